"""Why a bearer credential was refused: one stable code each (docs/identity.md).

Every refusal of a token is an :class:`IdentityRefusal`; its code tells an operator what
was wrong (an expired token is not a forged one) without telling a caller anything a
valid token would not: no claim of an unverified token is echoed.
"""

from __future__ import annotations

from arvis.domain.errors import ArvisError


class IdentityRefusal(ArvisError, code="unauthenticated"):
    """A bearer credential that yields no identity (401 unless its code says 403)."""


class Unauthenticated(IdentityRefusal, code="unauthenticated"):
    """No usable credential: missing, malformed, an unknown, wrong or revoked API key."""


class ForbiddenRole(IdentityRefusal, code="forbidden_role"):
    """The credential is valid but has none of the roles this route needs."""


class TokenMalformed(IdentityRefusal, code="token_malformed"):
    """Not a compact JWS: three base64url parts with a JSON header and claims."""


class TokenAlgorithmRefused(IdentityRefusal, code="token_algorithm_refused"):
    """The header's ``alg`` is not on the issuer's allow-list (``none`` and ``HS*`` never are)."""


class TokenIssuerUntrusted(IdentityRefusal, code="token_issuer_untrusted"):
    """The token's ``iss`` is none of the ``[[auth.oidc]]`` issuers (exact match)."""


class TokenKeyUnknown(IdentityRefusal, code="token_key_unknown"):
    """No key of the issuer's JWKS (refetched once) matches the header's ``kid``."""


class TokenSignatureInvalid(IdentityRefusal, code="token_signature_invalid"):
    """The signature does not verify with the issuer's key."""


class TokenAudienceMismatch(IdentityRefusal, code="token_audience_mismatch"):
    """The token's ``aud`` does not name this deployment's audience for its issuer."""


class TokenExpired(IdentityRefusal, code="token_expired"):
    """``exp`` has passed (beyond the configured leeway)."""


class TokenNotYetValid(IdentityRefusal, code="token_not_yet_valid"):
    """``nbf`` or ``iat`` is in the future (beyond the configured leeway)."""


class TokenClaimInvalid(IdentityRefusal, code="token_claim_invalid"):
    """A claim ARVIS needs (``exp``, the principal, the tenant) is missing or not usable."""


class TokenRolesMissing(IdentityRefusal, code="token_roles_missing"):
    """The token verifies but its roles claim names none of ARVIS's roles (403)."""


class DelegationRefused(IdentityRefusal, code="delegation_refused"):
    """An agent presented a person's token it may not act with (another tenant, a token
    that already names another actor), or a subject token without an agent's credential."""


class IdentityProviderUnavailable(ArvisError, code="idp_unavailable"):
    """The issuer's discovery document or keys could not be fetched (503): the token is
    neither accepted nor called invalid."""
