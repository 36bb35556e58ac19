"""ARVIS's verifier against the real provider: discovery, JWKS, every signing algorithm
the provider uses, and key rotation honoured without a restart (issue 26)."""

from __future__ import annotations

import httpx
import pytest

from arvis.identity.config import OidcIssuer
from arvis.identity.errors import TokenAudienceMismatch, TokenKeyUnknown
from arvis.identity.tokens import JwtVerifier
from tests.support.oidc import SIGNING_ALGS, OidcProvider, running_provider, unverified_header

pytestmark = pytest.mark.filterwarnings("ignore:EdDSA is deprecated:joserfc.errors.SecurityWarning")


def verifier_for(idp: OidcProvider, http: httpx.AsyncClient, **overrides: object) -> JwtVerifier:
    entry = OidcIssuer.model_validate(
        {
            "issuer": idp.issuer,
            "audience": "arvis",
            "tenant_claim": "tenant",
            "algorithms": list(SIGNING_ALGS),
            **overrides,
        }
    )
    return JwtVerifier([entry], http)


async def test_every_algorithm_the_provider_signs_with_verifies(
    oidc_provider: OidcProvider,
) -> None:
    async with httpx.AsyncClient() as http:
        verifier = verifier_for(oidc_provider, http)
        for alg in SIGNING_ALGS:
            identity = verifier.identity(await verifier.verify(oidc_provider.agent_token(alg=alg)))
            assert (identity.principal_id, identity.tenant_id) == ("arvis-agent", "acme")
            assert identity.roles == ("agent",)
        alice = verifier.identity(await verifier.verify(oidc_provider.user_token("alice")))
        assert (alice.principal_id, alice.roles, alice.groups) == ("alice", ("approver",), ("ops",))
        exchanged = oidc_provider.token_exchange(
            oidc_provider.user_token("alice"), audience="urn:tool:example"
        ).access_token
        with pytest.raises(TokenAudienceMismatch):
            await verifier.verify(exchanged)
        assert verifier.keys_of(oidc_provider.issuer).fetches == 1


async def test_rotated_keys_are_fetched_on_the_first_token_signed_with_them() -> None:
    with running_provider() as idp:
        async with httpx.AsyncClient() as http:
            verifier = verifier_for(idp, http, jwks_min_refresh_s=0)
            before = idp.agent_token()
            await verifier.verify(before)
            idp.rotate_keys(retain_previous=False)
            after = idp.agent_token()
            assert unverified_header(after)["kid"] != unverified_header(before)["kid"]
            identity = verifier.identity(await verifier.verify(after))
            assert identity.principal_id == "arvis-agent"
            assert verifier.keys_of(idp.issuer).fetches == 2
            # The old key is no longer published: its token is refused.
            with pytest.raises(TokenKeyUnknown):
                await verifier.verify(before)
