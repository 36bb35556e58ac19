"""The one identity extraction: a bearer credential (and, for an agent acting for a
person, the person's token) in, an :class:`Identity` out, or a refusal with its code.

An ``arvis_…`` token is an API key, checked by the key store's one lookup; a compact JWT
is verified against the ``[[auth.oidc]]`` issuers. Which is which is decided by the
token's shape alone, never by trying one after the other, so a JWT can never be
"accepted as a key" or the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import SecretStr

from arvis.domain.identity import Actor, Identity
from arvis.identity.errors import DelegationRefused, Unauthenticated
from arvis.identity.tokens import DELEGATED_ROLES, JwtVerifier, looks_like_jwt

SUBJECT_TOKEN_HEADER = "Arvis-Subject-Token"
"""The header an agent authenticated by its own credential presents a person's token in
(RFC 8693's subject token): the call is the agent's, for that person."""


class KeyLookup(Protocol):
    """The key store's one check of an API key (:class:`arvis.store.keys.PgKeyStore`)."""

    async def authenticated(self, token: str | None) -> Identity | None: ...


@dataclass
class Authenticator:
    """Who a request is, for every entry point (DESIGN §10 "One edge")."""

    keys: KeyLookup
    tokens: JwtVerifier | None = None
    """None: no ``[[auth.oidc]]`` issuer is trusted; only API keys authenticate."""

    async def authenticate(self, token: str | None, subject_token: str | None = None) -> Identity:
        """The identity of ``token``; with ``subject_token``, the person it names as the
        principal and ``token``'s holder (an agent) as the actor."""
        caller = await self._caller(token)
        if subject_token is None:
            return caller
        return await self._acting_for(caller, subject_token)

    async def _caller(self, token: str | None) -> Identity:
        if not token:
            raise Unauthenticated(
                "a bearer credential is required: Authorization: Bearer <API key or JWT>"
            )
        if self.tokens is not None and looks_like_jwt(token):
            verified = self.tokens.identity(await self.tokens.verify(token))
            return verified.model_copy(update={"subject_token": SecretStr(token)})
        identity = await self.keys.authenticated(token)
        if identity is None:
            # Unknown key, wrong secret, revoked: alike, so a caller learns nothing.
            raise Unauthenticated("a valid API key or token is required")
        return identity

    async def _acting_for(self, agent: Identity, subject_token: str) -> Identity:
        if self.tokens is None or not looks_like_jwt(subject_token):
            raise DelegationRefused(f"{SUBJECT_TOKEN_HEADER} must be a JWT of a trusted issuer")
        if agent.actor is not None:
            raise DelegationRefused("a credential that already acts for a person names no other")
        if not agent.has_role("agent"):
            raise DelegationRefused("only an agent may act for a person")
        verified = await self.tokens.verify(subject_token)
        person = self.tokens.identity(verified)
        _may_act(verified.claims, agent)
        if person.actor is not None and person.actor.principal_id != agent.principal_id:
            raise DelegationRefused("the person's token names another agent acting for them")
        if person.tenant_id != agent.tenant_id:
            raise DelegationRefused("the agent and the person are of different tenants")
        actor = Actor(principal_id=agent.principal_id, method=agent.method, key_id=agent.key_id)
        return person.model_copy(
            update={
                "roles": DELEGATED_ROLES,
                "actor": actor,
                "subject_token": SecretStr(subject_token),
            }
        )


def _may_act(claims: Mapping[str, Any], agent: Identity) -> None:
    """RFC 8693 §4.4: a token that says who may act for its subject admits only them."""
    may_act = claims.get("may_act")
    if may_act is None:
        return
    if not isinstance(may_act, dict) or may_act.get("sub") != agent.principal_id:
        raise DelegationRefused("the person's token does not let this agent act for them")
