"""The test identity provider itself (tests/support/oidc): a real OpenID provider on
loopback that the identity tests of issue 26 sign people and agents in with.

These tests pin what those tests rely on: discovery, JWT access tokens that verify
against the published JWKS with joserfc, the authorization-code flow with PKCE, RFC 8693
token exchange with ``act``, key rotation, and RP-initiated logout. Skipped, saying why,
when Node.js or npm is missing.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.errors import BadSignatureError, InvalidClaimError, InvalidKeyIdError
from joserfc.jwk import KeySet

from tests.support.oidc import (
    ACCESS_TOKEN_TYPE,
    ARVIS_AUDIENCE,
    ARVIS_SCOPE,
    ID_TOKEN_TYPE,
    SIGNING_ALGS,
    TOKEN_EXCHANGE,
    TOOL_AUDIENCE,
    OidcError,
    OidcProvider,
    running_provider,
    unverified_claims,
    unverified_header,
)

# joserfc flags "EdDSA" as deprecated by RFC 9864 (its new name is "Ed25519"); the
# provider still emits it because most providers do, and ARVIS has to read it.
pytestmark = pytest.mark.filterwarnings("ignore:EdDSA is deprecated:joserfc.errors.SecurityWarning")


def verified(idp: OidcProvider, token: str, audience: str) -> dict[str, Any]:
    """The token's claims once its signature checks out against the provider's JWKS and
    its iss/aud/exp/nbf/iat are valid."""
    keys = KeySet.import_key_set(idp.jwks())  # type: ignore[arg-type]
    decoded = jwt.decode(token, keys, algorithms=list(SIGNING_ALGS))
    jwt.JWTClaimsRegistry(
        iss={"essential": True, "value": idp.issuer},
        aud={"essential": True, "value": audience},
        sub={"essential": True},
        exp={"essential": True},
        iat={"essential": True},
    ).validate(decoded.claims)
    return dict(decoded.claims)


def test_discovery_names_every_endpoint_and_grant_arvis_uses(oidc_provider: OidcProvider) -> None:
    found = oidc_provider.discovery()
    issuer = oidc_provider.issuer
    assert found["issuer"] == issuer
    assert issuer.startswith("http://127.0.0.1:")
    assert found["authorization_endpoint"] == f"{issuer}/auth"
    assert found["token_endpoint"] == f"{issuer}/token"
    assert found["jwks_uri"] == f"{issuer}/jwks"
    assert found["end_session_endpoint"] == f"{issuer}/session/end"
    assert found["userinfo_endpoint"] == f"{issuer}/me"
    assert {"authorization_code", "client_credentials", TOKEN_EXCHANGE} <= set(
        found["grant_types_supported"]
    )
    assert found["response_types_supported"] == ["code"]
    assert found["code_challenge_methods_supported"] == ["S256"]
    assert {"RS256", "ES256", "EdDSA"} <= set(found["id_token_signing_alg_values_supported"])
    assert {"tenant", "arvis_roles", "groups"} <= set(found["claims_supported"])

    keys = oidc_provider.jwks()["keys"]
    assert {(key["kty"], key.get("crv")) for key in keys} == {
        ("RSA", None),
        ("EC", "P-256"),
        ("OKP", "Ed25519"),
    }
    assert all("d" not in key for key in keys), "the JWKS publishes private key material"
    assert len({key["kid"] for key in keys}) == len(keys)


@pytest.mark.parametrize("alg", SIGNING_ALGS)
def test_agent_token_is_a_jwt_for_arvis_that_verifies_against_the_jwks(
    oidc_provider: OidcProvider, alg: str
) -> None:
    token = oidc_provider.agent_token(alg=alg)

    header = unverified_header(token)
    assert header["alg"] == alg
    assert header["typ"] == "at+jwt"
    assert header["kid"] == oidc_provider.signing_kids()[alg]
    claims = verified(oidc_provider, token, ARVIS_AUDIENCE)
    assert claims["sub"] == "arvis-agent"
    assert claims["client_id"] == "arvis-agent"
    assert claims["aud"] == ARVIS_AUDIENCE
    assert claims["tenant"] == "acme"
    assert claims["arvis_roles"] == ["agent"]
    assert claims["scope"] == ARVIS_SCOPE
    assert claims["nbf"] <= claims["iat"] < claims["exp"]


def test_a_token_altered_after_signing_does_not_verify(oidc_provider: OidcProvider) -> None:
    head, payload, signature = oidc_provider.agent_token().split(".")
    forged = dict(unverified_claims(f"{head}.{payload}.{signature}"), arvis_roles=["admin"])
    body = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    with pytest.raises(BadSignatureError):
        verified(oidc_provider, f"{head}.{body}.{signature}", ARVIS_AUDIENCE)


def test_a_machine_client_carries_the_claims_it_was_given(oidc_provider: OidcProvider) -> None:
    token = oidc_provider.agent_token(
        "globex-bot", claims={"tenant": "globex", "arvis_roles": ["agent", "auditor"]}
    )

    claims = verified(oidc_provider, token, ARVIS_AUDIENCE)
    assert claims["sub"] == "globex-bot"
    assert claims["tenant"] == "globex"
    assert claims["arvis_roles"] == ["agent", "auditor"]


def test_a_wrong_client_secret_gets_no_token(oidc_provider: OidcProvider) -> None:
    with pytest.raises(OidcError) as refused:
        oidc_provider.client_credentials("arvis-agent", secret="not-the-secret")
    assert refused.value.status == 401
    assert refused.value.error == "invalid_client"


def test_a_token_for_an_unknown_resource_is_refused(oidc_provider: OidcProvider) -> None:
    with pytest.raises(OidcError) as refused:
        oidc_provider.client_credentials("arvis-agent", resource="urn:nobody:knows")
    assert refused.value.error == "invalid_target"


def test_sign_in_with_pkce_yields_an_id_token_with_the_persons_claims(
    oidc_provider: OidcProvider,
) -> None:
    tokens = oidc_provider.sign_in("alice", nonce="n-0S6_WzA2Mj")

    assert tokens.id_token is not None
    claims = verified(oidc_provider, tokens.id_token, "arvis-console")
    assert claims["sub"] == "alice"
    assert claims["nonce"] == "n-0S6_WzA2Mj"
    assert claims["tenant"] == "acme"
    assert claims["arvis_roles"] == ["approver"]
    assert claims["groups"] == ["ops"]
    assert claims["email"] == "alice@acme.test"
    # Without a resource the access token is the userinfo endpoint's, and says the same.
    me = httpx.get(
        f"{oidc_provider.issuer}/me",
        headers={"Authorization": f"Bearer {tokens.access_token}"},
    )
    assert me.status_code == 200, me.text
    assert me.json()["arvis_roles"] == ["approver"]


def test_sign_in_for_arvis_yields_a_jwt_access_token_for_the_person(
    oidc_provider: OidcProvider,
) -> None:
    token = oidc_provider.user_token("bob", alg="ES256")

    assert unverified_header(token)["alg"] == "ES256"
    claims = verified(oidc_provider, token, ARVIS_AUDIENCE)
    assert claims["sub"] == "bob"
    assert claims["client_id"] == "arvis-console"
    assert claims["arvis_roles"] == ["auditor"]
    assert claims["tenant"] == "acme"
    assert claims["scope"] == ARVIS_SCOPE


def test_a_wrong_password_signs_nobody_in(oidc_provider: OidcProvider) -> None:
    with pytest.raises(OidcError) as refused:
        oidc_provider.sign_in("alice", "not-alice-password")
    assert refused.value.status == 401


def test_a_person_added_while_running_signs_in_with_their_claims(
    oidc_provider: OidcProvider,
) -> None:
    oidc_provider.put_user(
        "hank",
        {"tenant": "initech", "arvis_roles": ["admin"], "groups": ["x"], "cost_center": "42"},
    )

    tokens = oidc_provider.sign_in("hank")
    assert tokens.id_token is not None
    claims = verified(oidc_provider, tokens.id_token, "arvis-console")
    assert (claims["tenant"], claims["arvis_roles"], claims["cost_center"]) == (
        "initech",
        ["admin"],
        "42",
    )


def test_the_console_client_returns_only_to_redirects_it_was_given(
    oidc_provider: OidcProvider,
) -> None:
    callback = "http://127.0.0.1:18765/console/oidc/callback"
    oidc_provider.add_console_redirects([callback], ["http://127.0.0.1:18765/console/sign-in"])

    assert oidc_provider.sign_in("alice", redirect_uri=callback).id_token
    with pytest.raises(OidcError) as refused:
        oidc_provider.sign_in("alice", redirect_uri="http://127.0.0.1:18766/elsewhere")
    assert "redirect_uri" in refused.value.description


def test_token_exchange_issues_a_tool_token_on_behalf_of_the_person_with_act(
    oidc_provider: OidcProvider,
) -> None:
    person = oidc_provider.user_token("alice")
    agent = oidc_provider.agent_token()

    issued = oidc_provider.token_exchange(person, audience=TOOL_AUDIENCE, actor_token=agent)

    assert issued.issued_token_type == ACCESS_TOKEN_TYPE
    assert issued.token_type == "Bearer"
    claims = verified(oidc_provider, issued.access_token, TOOL_AUDIENCE)
    assert claims["sub"] == "alice"
    assert claims["act"] == {"sub": "arvis-agent"}
    assert claims["client_id"] == "arvis-exchange"
    assert claims["tenant"] == "acme"
    assert claims["arvis_roles"] == ["approver"]
    assert claims["scope"] == "tool:read tool:write"
    assert claims["exp"] <= unverified_claims(person)["exp"]


def test_token_exchange_without_an_actor_carries_no_act(oidc_provider: OidcProvider) -> None:
    issued = oidc_provider.token_exchange(
        oidc_provider.user_token("bob"), audience=TOOL_AUDIENCE, scope="tool:read"
    )

    claims = verified(oidc_provider, issued.access_token, TOOL_AUDIENCE)
    assert claims["sub"] == "bob"
    assert "act" not in claims
    assert claims["scope"] == "tool:read"


def test_an_agent_exchanges_a_persons_token_to_act_for_them_at_arvis(
    oidc_provider: OidcProvider,
) -> None:
    person = oidc_provider.user_token("dave")
    agent = oidc_provider.agent_token()

    issued = oidc_provider.token_exchange(
        person, audience=ARVIS_AUDIENCE, actor_token=agent, client_id="arvis-agent"
    )

    claims = verified(oidc_provider, issued.access_token, ARVIS_AUDIENCE)
    assert claims["sub"] == "dave"
    assert claims["act"] == {"sub": "arvis-agent"}
    assert claims["client_id"] == "arvis-agent"
    # A second hop keeps the first actor nested (RFC 8693 §4.1).
    again = oidc_provider.token_exchange(
        issued.access_token,
        audience=TOOL_AUDIENCE,
        actor_token=oidc_provider.agent_token("relay-bot", claims={"tenant": "acme"}),
    )
    assert unverified_claims(again.access_token)["act"] == {
        "sub": "relay-bot",
        "act": {"sub": "arvis-agent"},
    }


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"audience": "urn:unknown:tool"}, "invalid_target"),
        ({"audience": None}, "invalid_target"),
        ({"scope": "tool:admin"}, "invalid_scope"),
        ({"subject_token": "not.a.jwt"}, "invalid_grant"),
        ({"subject_token_type": "urn:example:saml"}, "invalid_request"),
        ({"subject_token_type": ID_TOKEN_TYPE, "use_id_token": True}, "invalid_grant"),
    ],
    ids=["unknown-audience", "no-audience", "scope-beyond", "garbage", "bad-type", "id-token"],
)
def test_token_exchange_refuses_what_it_cannot_vouch_for(
    oidc_provider: OidcProvider, change: dict[str, Any], error: str
) -> None:
    signed_in = oidc_provider.sign_in(
        "alice", scope=f"openid arvis {ARVIS_SCOPE}", resource="urn:arvis"
    )
    args: dict[str, Any] = {"audience": TOOL_AUDIENCE, "subject_token": signed_in.access_token}
    if change.pop("use_id_token", False):
        # An ID token is for the console, not an audience arvis-exchange may trade in.
        args["subject_token"] = signed_in.id_token
    args |= change
    subject = args.pop("subject_token")

    with pytest.raises(OidcError) as refused:
        oidc_provider.token_exchange(subject, **args)
    assert refused.value.error == error


def test_a_client_without_the_grant_cannot_exchange(oidc_provider: OidcProvider) -> None:
    with pytest.raises(OidcError) as refused:
        oidc_provider.token_exchange(
            oidc_provider.user_token("alice"), audience=TOOL_AUDIENCE, client_id="arvis-console"
        )
    assert refused.value.error == "invalid_request"
    assert "grant type is not allowed" in refused.value.description


def test_sign_out_ends_the_providers_session(oidc_provider: OidcProvider) -> None:
    after = "http://127.0.0.1:8000/console/sign-in"
    with httpx.Client() as browser:
        first = oidc_provider.sign_in("carol", browser=browser)
        # Signed in at the provider: a second sign-in needs no password.
        assert oidc_provider.sign_in("carol", "unused", browser=browser).id_token
        assert first.id_token is not None

        assert oidc_provider.end_session(browser, first.id_token, after).startswith(after)

        with pytest.raises(OidcError):
            oidc_provider.sign_in("carol", "unused", browser=browser)


@pytest.fixture
def private_provider() -> Iterator[OidcProvider]:
    with running_provider() as provider:
        yield provider


def test_key_rotation_changes_the_kid_and_keeps_old_tokens_verifiable_until_retired(
    private_provider: OidcProvider,
) -> None:
    idp = private_provider
    before = idp.signing_kids()
    old = idp.agent_token()

    after = idp.rotate_keys()

    assert set(after.values()).isdisjoint(before.values())
    fresh = idp.agent_token()
    assert unverified_header(fresh)["kid"] == after["RS256"]
    published = {key["kid"] for key in idp.jwks()["keys"]}
    assert set(before.values()) | set(after.values()) <= published
    assert verified(idp, old, ARVIS_AUDIENCE)["sub"] == "arvis-agent"

    idp.rotate_keys(retain_previous=False)

    published = {key["kid"] for key in idp.jwks()["keys"]}
    assert published.isdisjoint(set(before.values()) | set(after.values()))
    with pytest.raises(InvalidKeyIdError):
        verified(idp, old, ARVIS_AUDIENCE)
    # The provider itself no longer vouches for a token signed with a retired key.
    with pytest.raises(OidcError) as refused:
        idp.token_exchange(old, audience=TOOL_AUDIENCE, client_id="arvis-agent")
    assert refused.value.error == "invalid_grant"


def test_a_token_for_another_audience_fails_the_audience_check(
    oidc_provider: OidcProvider,
) -> None:
    tool_token = oidc_provider.token_exchange(
        oidc_provider.user_token("alice"), audience=TOOL_AUDIENCE
    ).access_token
    with pytest.raises(InvalidClaimError):
        verified(oidc_provider, tool_token, ARVIS_AUDIENCE)


def test_stopping_ends_the_node_process() -> None:
    with running_provider() as idp:
        assert idp.running
    assert not idp.running


def test_may_act_on_the_subject_admits_only_the_actor_it_names(
    oidc_provider: OidcProvider,
) -> None:
    oidc_provider.put_user(
        "ivy", {"tenant": "acme", "arvis_roles": ["approver"], "may_act": {"sub": "arvis-agent"}}
    )
    ivy = oidc_provider.user_token("ivy")
    assert unverified_claims(ivy)["may_act"] == {"sub": "arvis-agent"}

    with pytest.raises(OidcError) as refused:
        oidc_provider.token_exchange(
            ivy,
            audience=TOOL_AUDIENCE,
            actor_token=oidc_provider.agent_token("stranger-bot", claims={"tenant": "acme"}),
        )
    assert refused.value.error == "invalid_grant"
    assert "may_act" in oidc_provider.log  # the answer itself does not say why

    issued = oidc_provider.token_exchange(
        ivy, audience=TOOL_AUDIENCE, actor_token=oidc_provider.agent_token()
    )
    claims = unverified_claims(issued.access_token)
    assert claims["act"] == {"sub": "arvis-agent"}
    assert "may_act" not in claims
