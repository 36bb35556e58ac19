"""JWT bearer tokens (issue 26): every hostile token is refused with its stable code,
and a principal is built only from a token that verified.

The issuer here is a fake: its keys are minted with joserfc and served to ARVIS's
verifier through httpx's mock transport (the real provider is in the integration tier).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, OKPKey, RSAKey

from arvis.domain.errors import ConfigurationError
from arvis.domain.identity import Identity
from arvis.identity import errors
from arvis.identity.config import AuthConfig, OidcIssuer, parse_auth_config
from arvis.identity.extraction import Authenticator
from arvis.identity.tokens import JwtVerifier

pytestmark = pytest.mark.filterwarnings("ignore:EdDSA is deprecated:joserfc.errors.SecurityWarning")

ISSUER = "https://idp.test/realms/acme"


class FakeIssuer:
    """An issuer's discovery document and JWKS, and tokens signed with its keys."""

    def __init__(self) -> None:
        self.keys = {
            "RS256": RSAKey.generate_key(2048, parameters={"kid": "rsa-1"}),
            "ES256": ECKey.generate_key("P-256", parameters={"kid": "ec-1"}),
            "EdDSA": OKPKey.generate_key("Ed25519", parameters={"kid": "ed-1"}),
        }
        self.requests: list[str] = []
        self.down = False
        self.rotations = 0

    def jwks(self) -> dict[str, Any]:
        return KeySet(list(self.keys.values())).as_dict(private=False)

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request.url.path)
        if self.down:
            return httpx.Response(503)
        if request.url.path.endswith("/.well-known/openid-configuration"):
            return httpx.Response(200, json={"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks"})
        if request.url.path.endswith("/jwks"):
            return httpx.Response(200, json=self.jwks())
        return httpx.Response(404)

    def token(self, alg: str = "RS256", header: dict[str, Any] | None = None, **claims: Any) -> str:
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": ISSUER,
            "sub": "dave",
            "aud": "arvis",
            "iat": now,
            "nbf": now,
            "exp": now + 300,
            "tenant": "acme",
            "arvis_roles": ["agent"],
            "groups": ["agents"],
        }
        body.update(claims)
        body = {name: value for name, value in body.items() if value is not None}
        key = self.keys[alg]
        return jwt.encode(
            {"alg": alg, "kid": key.kid, **(header or {})}, body, key, algorithms=[alg]
        )

    def rotate(self) -> None:
        """A new RSA key signs from now on; the old one is no longer published."""
        self.rotations += 1
        kid = f"rsa-{self.rotations + 1}"
        self.keys["RS256"] = RSAKey.generate_key(2048, parameters={"kid": kid})

    def fetches(self) -> int:
        return sum(path.endswith("/jwks") for path in self.requests)


def issuer_config(**overrides: Any) -> OidcIssuer:
    fields: dict[str, Any] = {
        "issuer": ISSUER,
        "audience": "arvis",
        "tenant_claim": "tenant",
        **overrides,
    }
    return OidcIssuer(**fields)


@pytest.fixture
def idp() -> FakeIssuer:
    return FakeIssuer()


@pytest.fixture
def make_verifier(idp: FakeIssuer) -> Callable[..., JwtVerifier]:
    def make(**overrides: Any) -> JwtVerifier:
        http = httpx.AsyncClient(transport=httpx.MockTransport(idp.handler))
        return JwtVerifier([issuer_config(**overrides)], http)

    return make


async def _refusal(verifier: JwtVerifier, token: str) -> errors.IdentityRefusal:
    try:
        await verifier.verify(token)
    except errors.IdentityRefusal as refused:
        return refused
    raise AssertionError("the token verified")


async def identity_of(verifier: JwtVerifier, token: str) -> Identity:
    return verifier.identity(await verifier.verify(token))


def _b64(value: dict[str, Any] | bytes) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.mark.parametrize("alg", ["RS256", "ES256", "EdDSA"])
async def test_a_token_of_a_trusted_issuer_names_its_principal_tenant_roles_and_groups(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier], alg: str
) -> None:
    identity = await identity_of(make_verifier(), idp.token(alg))
    assert identity.principal_id == "dave"
    assert identity.tenant_id == "acme"
    assert identity.method == "oidc"
    assert identity.issuer == ISSUER
    assert identity.roles == ("agent",)
    assert identity.groups == ("agents",)
    assert identity.key_id is None
    assert identity.actor is None


async def test_alg_none_is_refused(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    signed = idp.token().split(".")
    header = {"alg": "none", "kid": "rsa-1"}
    unsigned = f"{_b64(header)}.{signed[1]}."
    with pytest.raises(errors.TokenAlgorithmRefused):
        await make_verifier().verify(unsigned)


async def test_hs256_signed_with_the_issuers_public_key_is_refused(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    # The classic confusion (RFC 8725 §2.1): the public key, used as an HMAC secret.
    public = idp.keys["RS256"].as_pem(private=False)
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": "carol", "aud": "arvis", "exp": now + 300}
    claims |= {"tenant": "acme", "arvis_roles": ["admin"]}
    signing_input = f"{_b64({'alg': 'HS256', 'kid': 'rsa-1'})}.{_b64(claims)}"
    mac = hmac.new(public, signing_input.encode(), hashlib.sha256).digest()
    forged = f"{signing_input}.{_b64(mac)}"
    with pytest.raises(errors.TokenAlgorithmRefused):
        await make_verifier().verify(forged)
    with pytest.raises(errors.TokenAlgorithmRefused):
        await make_verifier(algorithms=["RS256"]).verify(forged)


async def test_an_algorithm_off_the_issuers_list_is_refused(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    with pytest.raises(errors.TokenAlgorithmRefused):
        await make_verifier(algorithms=["RS256"]).verify(idp.token("ES256"))


async def test_a_token_of_another_issuer_is_refused(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    # Exact match: a trailing slash is another issuer.
    for iss in ("https://evil.test", ISSUER + "/"):
        refusal = await _refusal(make_verifier(), idp.token(iss=iss))
        assert isinstance(refusal, errors.TokenIssuerUntrusted), iss


async def test_a_token_for_another_audience_is_refused(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    with pytest.raises(errors.TokenAudienceMismatch):
        await make_verifier().verify(idp.token(aud="urn:tool:example"))
    with pytest.raises(errors.TokenAudienceMismatch):
        await make_verifier().verify(idp.token(aud=None))
    assert await make_verifier().verify(idp.token(aud=["other", "arvis"]))


async def test_an_expired_token_is_refused_beyond_the_leeway(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    now = int(time.time())
    with pytest.raises(errors.TokenExpired):
        await make_verifier(leeway_s=30).verify(
            idp.token(exp=now - 60, iat=now - 400, nbf=now - 400)
        )
    # Within the leeway, a token just past its exp is still good.
    assert await make_verifier(leeway_s=30).verify(idp.token(exp=now - 5))


async def test_a_token_not_valid_yet_is_refused(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    later = int(time.time()) + 600
    with pytest.raises(errors.TokenNotYetValid):
        await make_verifier().verify(idp.token(nbf=later, exp=later + 300))
    with pytest.raises(errors.TokenNotYetValid):
        await make_verifier().verify(idp.token(iat=later, exp=later + 300))


async def test_a_token_without_exp_is_refused(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    with pytest.raises(errors.TokenClaimInvalid):
        await make_verifier().verify(idp.token(exp=None))


async def test_a_token_whose_roles_claim_is_missing_or_names_no_arvis_role_is_forbidden(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    verifier = make_verifier()
    for roles in (None, [], ["superuser"], 7):
        with pytest.raises(errors.TokenRolesMissing):
            await identity_of(verifier, idp.token(arvis_roles=roles))


async def test_a_token_without_its_principal_or_tenant_claim_is_refused(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    verifier = make_verifier()
    with pytest.raises(errors.TokenClaimInvalid):
        await identity_of(verifier, idp.token(sub=None))
    with pytest.raises(errors.TokenClaimInvalid):
        await identity_of(verifier, idp.token(tenant=None))
    with pytest.raises(errors.TokenClaimInvalid):
        await identity_of(verifier, idp.token(tenant=["acme"]))


async def test_a_fixed_tenant_ignores_the_tokens_tenant_claim(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    verifier = make_verifier(tenant="acme", tenant_claim=None)
    identity = await identity_of(verifier, idp.token(tenant="globex"))
    assert identity.tenant_id == "acme"


async def test_a_tampered_token_is_refused(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    header, _, signature = idp.token().split(".")
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": "carol", "aud": "arvis", "exp": now + 300}
    tampered = (
        f"{header}.{_b64({**claims, 'tenant': 'acme', 'arvis_roles': ['admin']})}.{signature}"
    )
    with pytest.raises(errors.TokenSignatureInvalid):
        await make_verifier().verify(tampered)


async def test_a_token_signed_by_a_key_the_issuer_does_not_publish_is_refused(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    verifier = make_verifier(jwks_min_refresh_s=0)
    stranger = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"})
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": "x", "aud": "arvis", "exp": now + 60, "tenant": "acme"}
    same_kid = jwt.encode({"alg": "RS256", "kid": "rsa-1"}, claims, stranger)
    with pytest.raises(errors.TokenSignatureInvalid):
        await verifier.verify(same_kid)
    unknown_kid = jwt.encode({"alg": "RS256", "kid": "who"}, claims, stranger)
    with pytest.raises(errors.TokenKeyUnknown):
        await verifier.verify(unknown_kid)


@pytest.mark.parametrize(
    "token",
    [
        "",
        "a.b",
        "a.b.c.d",
        "!!.??.**",
        f"{_b64(b'not json')}.{_b64({})}.",
        f"{_b64({'alg': 'RS256'})}.{_b64(b'[1]')}.x",
    ],
)
async def test_a_malformed_token_is_refused(
    make_verifier: Callable[..., JwtVerifier], token: str
) -> None:
    refusal = await _refusal(make_verifier(), token)
    assert isinstance(refusal, errors.TokenMalformed)
    assert refusal.code == "token_malformed"


async def test_rotation_is_honoured_and_unknown_kids_refetch_at_most_once_per_interval(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    verifier = make_verifier(jwks_min_refresh_s=3600)
    await verifier.verify(idp.token())
    assert idp.fetches() == 1
    # Unknown kids, again and again: the keys were fetched just now, so not again.
    idp.rotate()
    for _ in range(3):
        with pytest.raises(errors.TokenKeyUnknown):
            await verifier.verify(idp.token())
    assert idp.fetches() == 1

    eager = make_verifier(jwks_min_refresh_s=0)
    await eager.verify(idp.token("ES256"))
    idp.rotate()  # a new RSA key signs from now on
    assert (await identity_of(eager, idp.token())).principal_id == "dave"
    assert idp.fetches() == 3
    # A known kid is served from the cache.
    await eager.verify(idp.token("ES256"))
    assert idp.fetches() == 3


async def test_an_unreachable_issuer_is_unavailable_not_a_refusal_of_the_token(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    idp.down = True
    with pytest.raises(errors.IdentityProviderUnavailable):
        await make_verifier().verify(idp.token())


async def test_a_discovery_document_naming_another_issuer_is_not_trusted(
    make_verifier: Callable[..., JwtVerifier], idp: FakeIssuer
) -> None:
    def lying(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"issuer": "https://evil.test", "jwks_uri": f"{ISSUER}/jwks"}
        )

    verifier = JwtVerifier(
        [issuer_config()], httpx.AsyncClient(transport=httpx.MockTransport(lying))
    )
    with pytest.raises(errors.IdentityProviderUnavailable):
        await verifier.verify(idp.token())


class Keys:
    """The key store's port: one API key, of an agent of acme."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity

    async def authenticated(self, token: str | None) -> Identity | None:
        return self.identity if token == "arvis_kagent_secret" else None


AGENT_KEY = Identity(
    tenant_id="acme", principal_id="bot", method="api_key", key_id="kagent", roles=("agent",)
)


async def test_the_act_claim_makes_the_person_the_principal_and_the_agent_the_actor(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    token = idp.token(
        sub="alice", arvis_roles=["approver"], groups=["ops"], act={"sub": "arvis-agent"}
    )
    identity = await identity_of(make_verifier(), token)
    assert (identity.principal_id, identity.actor_id) == ("alice", "arvis-agent")
    # Acting for alice, the agent calls tools; it never approves as her.
    assert identity.roles == ("agent",)
    assert not identity.has_role("approver")
    with pytest.raises(errors.TokenClaimInvalid):
        await identity_of(make_verifier(), idp.token(act="arvis-agent"))


async def test_an_agent_key_presenting_a_persons_token_acts_for_that_person(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    authenticator = Authenticator(Keys(AGENT_KEY), make_verifier())
    person = idp.token(sub="alice", arvis_roles=["approver"])
    identity = await authenticator.authenticate("arvis_kagent_secret", person)
    assert identity.principal_id == "alice"
    assert identity.actor is not None
    assert (identity.actor.principal_id, identity.actor.key_id) == ("bot", "kagent")
    assert identity.roles == ("agent",)


@pytest.mark.parametrize(
    "claims",
    [
        {"tenant": "globex"},  # the person is of another tenant
        {"may_act": {"sub": "someone-else"}},  # RFC 8693 §4.4
        {"act": {"sub": "another-agent"}},  # already delegated to another agent
    ],
)
async def test_an_agent_may_not_act_with_a_token_that_does_not_let_it(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier], claims: dict[str, Any]
) -> None:
    authenticator = Authenticator(Keys(AGENT_KEY), make_verifier())
    with pytest.raises(errors.DelegationRefused):
        await authenticator.authenticate("arvis_kagent_secret", idp.token(sub="alice", **claims))


async def test_only_an_agent_may_present_a_subject_token(
    idp: FakeIssuer, make_verifier: Callable[..., JwtVerifier]
) -> None:
    approver = AGENT_KEY.model_copy(update={"roles": ("approver",)})
    authenticator = Authenticator(Keys(approver), make_verifier())
    with pytest.raises(errors.DelegationRefused):
        await authenticator.authenticate("arvis_kagent_secret", idp.token(sub="alice"))
    with pytest.raises(errors.DelegationRefused):
        await Authenticator(Keys(AGENT_KEY)).authenticate("arvis_kagent_secret", idp.token())


async def test_without_a_trusted_issuer_a_jwt_is_just_an_unknown_credential(
    idp: FakeIssuer,
) -> None:
    authenticator = Authenticator(Keys(AGENT_KEY))
    with pytest.raises(errors.Unauthenticated):
        await authenticator.authenticate(idp.token())
    with pytest.raises(errors.Unauthenticated):
        await authenticator.authenticate(None)
    assert await authenticator.authenticate("arvis_kagent_secret") == AGENT_KEY


def test_every_refusal_has_a_stable_code_of_its_own() -> None:
    refusals = [
        getattr(errors, name)
        for name in errors.__dict__
        if name.startswith("Token") or name == "DelegationRefused"
    ]
    assert len(refusals) == 11
    codes = [refusal.code for refusal in refusals]
    assert len(set(codes)) == len(codes)
    assert all(issubclass(refusal, errors.IdentityRefusal) for refusal in refusals)


@pytest.mark.parametrize(
    "entry",
    [
        {"issuer": ISSUER, "audience": "arvis"},  # no tenant source
        {"issuer": ISSUER, "audience": "arvis", "tenant": "a", "tenant_claim": "t"},
        {"issuer": ISSUER, "audience": "arvis", "tenant": "a", "algorithms": ["HS256"]},
        {"issuer": ISSUER, "audience": "arvis", "tenant": "a", "algorithms": ["none"]},
        {"issuer": ISSUER, "audience": "arvis", "tenant": "a", "colour": "blue"},
    ],
)
def test_an_unusable_issuer_entry_stops_start_up(entry: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        parse_auth_config({"oidc": [entry]})


def test_an_issuer_is_declared_once() -> None:
    entry = {"issuer": ISSUER, "audience": "arvis", "tenant": "acme"}
    with pytest.raises(ConfigurationError):
        parse_auth_config({"oidc": [entry, entry]})
    assert parse_auth_config({}) == AuthConfig()
