"""JWT bearer tokens of the ``[[auth.oidc]]`` issuers, verified with ``joserfc``.

The order matters: only the header and ``iss`` of an unverified token are read, to pick
the issuer whose keys and allow-list apply; the signature is verified with that issuer's
key and an algorithm on its list; then ``iss``, ``aud``, ``exp``, ``nbf`` and ``iat`` are
checked; only then is any claim turned into an identity. No principal, tenant or role
ever comes from a token that did not verify.
"""

from __future__ import annotations

import hmac
import json
import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ClaimError,
    ExpiredTokenError,
    JoseError,
    KeyParameterError,
    MissingClaimError,
    SecurityWarning,
)
from joserfc.jws import extract_compact

from arvis.domain.authorization import GROUP_PATTERN
from arvis.domain.identity import ROLES, Actor, Identity, Role
from arvis.domain.ids import PrincipalId, TenantId
from arvis.identity.config import AuthConfig, OidcIssuer
from arvis.identity.errors import (
    TokenAlgorithmRefused,
    TokenAudienceMismatch,
    TokenClaimInvalid,
    TokenExpired,
    TokenIssuerUntrusted,
    TokenKeyUnknown,
    TokenMalformed,
    TokenNotYetValid,
    TokenRolesMissing,
    TokenSignatureInvalid,
)
from arvis.identity.jwks import IssuerKeys

MAX_TOKEN_CHARS = 16 * 1024
_COMPACT = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")
_GROUP = re.compile(GROUP_PATTERN)
_MAX_ID = 255


def looks_like_jwt(token: str) -> bool:
    """Whether ``token`` has the shape of a compact JWS (three base64url parts)."""
    return len(token) <= MAX_TOKEN_CHARS and _COMPACT.fullmatch(token) is not None


@dataclass(frozen=True)
class VerifiedToken:
    """A token whose signature and registered claims verified, and the issuer it is of."""

    issuer: OidcIssuer
    claims: Mapping[str, Any]


class JwtVerifier:
    """Verifies tokens of the configured issuers; each issuer's keys are cached."""

    def __init__(
        self,
        issuers: Sequence[OidcIssuer],
        http: httpx.AsyncClient,
        *,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._issuers = {issuer.issuer: issuer for issuer in issuers}
        self._keys = {issuer.issuer: IssuerKeys(issuer, http) for issuer in issuers}
        self._now = now

    def keys_of(self, issuer: str) -> IssuerKeys:
        return self._keys[issuer]

    @property
    def issuers(self) -> tuple[OidcIssuer, ...]:
        return tuple(self._issuers.values())

    async def verify_id_token(self, token: str, issuer: OidcIssuer, nonce: str) -> VerifiedToken:
        """An ID token of the console's sign-in: the same checks as a bearer token, but
        ``aud`` must be the console's client, ``iss`` the issuer the sign-in went to, and
        ``nonce`` the one that sign-in sent (OpenID Connect Core §3.1.3.7)."""
        if issuer.console_client_id is None:
            raise TokenAudienceMismatch("this issuer has no console client")
        verified = await self.verify(token, audience=issuer.console_client_id)
        if verified.issuer.issuer != issuer.issuer:
            raise TokenIssuerUntrusted("the ID token is of another issuer than the sign-in's")
        presented = verified.claims.get("nonce")
        if not isinstance(presented, str) or not hmac.compare_digest(presented, nonce):
            raise TokenClaimInvalid("the ID token's nonce is not this sign-in's")
        return verified

    async def verify(self, token: str, *, audience: str | None = None) -> VerifiedToken:
        """The verified token, or the :mod:`arvis.identity.errors` refusal that says why not.

        ``audience``: the ``aud`` required instead of the issuer's (the console's client
        for an ID token)."""
        if not looks_like_jwt(token):
            raise TokenMalformed("the bearer token is not a compact JWT")
        try:
            compact = extract_compact(token.encode("ascii"))
            header = compact.headers()
            unverified = json.loads(compact.payload)
        except (JoseError, ValueError, UnicodeError):
            raise TokenMalformed("the bearer token is not a compact JWT") from None
        if not isinstance(unverified, dict):
            raise TokenMalformed("the token's claims are not a JSON object")
        iss = unverified.get("iss")
        issuer = self._issuers.get(iss) if isinstance(iss, str) else None
        if issuer is None:
            raise TokenIssuerUntrusted("the token's issuer is not trusted here")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in issuer.algorithms:
            raise TokenAlgorithmRefused(
                f"tokens of this issuer must be signed with {', '.join(issuer.algorithms)}"
            )
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenMalformed("the token's kid is not a string")
        key = await self._keys[issuer.issuer].key(kid)
        if key is None:
            raise TokenKeyUnknown("the issuer publishes no key with the token's kid")
        try:
            with warnings.catch_warnings():
                # "EdDSA" is deprecated in favour of "Ed25519" (RFC 9864); the operator chose.
                warnings.simplefilter("ignore", SecurityWarning)
                decoded = jwt.decode(token, key, algorithms=[alg])
        except (BadSignatureError, KeyParameterError):
            raise TokenSignatureInvalid("the token's signature does not verify") from None
        except (JoseError, ValueError, TypeError):
            raise TokenMalformed("the token could not be decoded") from None
        claims = dict(decoded.claims)
        self._check_claims(issuer, claims, audience or issuer.audience)
        return VerifiedToken(issuer, claims)

    def _check_claims(self, issuer: OidcIssuer, claims: dict[str, Any], audience: str) -> None:
        whose = jwt.JWTClaimsRegistry(
            iss={"essential": True, "value": issuer.issuer},
            aud={"essential": True, "value": audience},
        )
        when = jwt.JWTClaimsRegistry(
            now=lambda: int(self._now()), leeway=issuer.leeway_s, exp={"essential": True}
        )
        try:
            whose.validate({name: claims.get(name) for name in ("iss", "aud")})
        except ClaimError:
            raise TokenAudienceMismatch(
                f"the token is not for this deployment (aud must include {audience!r})"
            ) from None
        try:
            when.validate({name: claims[name] for name in ("exp", "nbf", "iat") if name in claims})
        except ExpiredTokenError:
            raise TokenExpired("the token has expired") from None
        except MissingClaimError:
            raise TokenClaimInvalid("the token has no exp") from None
        except ClaimError as exc:
            if exc.claim in ("nbf", "iat") and "NumericDate" not in str(exc):
                raise TokenNotYetValid("the token is not valid yet") from None
            raise TokenClaimInvalid(f"the token's {exc.claim} is not a NumericDate") from None

    def identity(self, verified: VerifiedToken) -> Identity:
        """The principal a verified token names: tenant, roles and groups from its claims
        as the issuer's entry says; a person the ``act`` claim says an agent acts for is
        the principal, the agent the actor (RFC 8693 §4.1)."""
        issuer, claims = verified.issuer, verified.claims
        principal = _identifier(claims.get(issuer.principal_claim), issuer.principal_claim)
        tenant = issuer.tenant or _identifier(
            claims.get(issuer.tenant_claim or ""), issuer.tenant_claim or "tenant"
        )
        roles = known_roles(claims.get(issuer.roles_claim))
        if not roles:
            raise TokenRolesMissing(
                f"the token's {issuer.roles_claim} claim names none of {', '.join(ROLES)}"
            )
        groups = _groups(claims.get(issuer.groups_claim)) if issuer.groups_claim else ()
        actor = actor_of(claims.get("act"))
        return Identity(
            tenant_id=TenantId(tenant),
            principal_id=PrincipalId(principal),
            method="oidc",
            issuer=issuer.issuer,
            roles=DELEGATED_ROLES if actor is not None else roles,
            groups=groups,
            actor=actor,
        )


DELEGATED_ROLES: tuple[Role, ...] = ("agent",)
"""What an agent acting for a person may do: call tools (and replay) in the person's name.
Never approve, audit or administer as them: four eyes would count the agent as the person."""


def actor_of(act: object) -> Actor | None:
    """The agent of an RFC 8693 ``act`` claim (the outermost: the current actor)."""
    if act is None:
        return None
    if not isinstance(act, dict):
        raise TokenClaimInvalid("the token's act claim is not an object")
    return Actor(principal_id=_identifier(act.get("sub"), "act.sub"), method="oidc")


def known_roles(value: object) -> tuple[Role, ...]:
    """The ARVIS roles a claim names (a list, or a space-separated string); others are
    ignored: an IdP's roles are not all ARVIS's."""
    named = _strings(value)
    return tuple(role for role in ROLES if role in named)


def _groups(value: object) -> tuple[str, ...]:
    return tuple(sorted({group for group in _strings(value) if _GROUP.fullmatch(group)}))


def _strings(value: object) -> set[str]:
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list | tuple):
        return {item for item in value if isinstance(item, str)}
    return set()


def _identifier(value: object, claim: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_ID:
        raise TokenClaimInvalid(f"the token's {claim} claim is missing or not a usable id")
    return value


def load_token_verifier(auth: AuthConfig, http: httpx.AsyncClient) -> JwtVerifier | None:
    """The verifier of ``[[auth.oidc]]``'s issuers; None when none is configured."""
    return JwtVerifier(auth.oidc, http) if auth.oidc else None
