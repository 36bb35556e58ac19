"""Console sessions: an API key exchanged once for a session cookie.

The browser never holds the key. Signing in checks the key exactly as the API
does (:func:`arvis.web.identity.authenticate`) and stores a session of it; the
cookie carries a random token, of which only the SHA-256 is stored. Every request
looks the session up with its key, so revoking the key ends the session at once,
and the identity is the key's as it is now (roles, groups).

Each state-changing form carries a CSRF token derived from the session token
(an HMAC of it), so it is tied to the session and needs no storage: a page of
another origin can neither read the cookie nor the token. The sign-in form, which
has no session yet, uses a double-submit token: a random cookie of its own,
repeated in the form.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

from fastapi import Request, Response

from arvis.domain.errors import ArvisError
from arvis.domain.identity import Identity
from arvis.identity.errors import ForbiddenRole, Unauthenticated
from arvis.kernel import Kernel
from arvis.web.identity import authenticate

SESSION_COOKIE = "arvis_console"
SIGN_IN_COOKIE = "arvis_console_signin"
COOKIE_PATH = "/console"
_CSRF_CONTEXT = b"arvis-console-csrf-v1"
CONSOLE_ROLES = ("approver", "auditor", "admin")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class CsrfRefused(ArvisError):
    """A console form was posted without the CSRF token of its session."""

    code = "csrf_invalid"


@dataclass(frozen=True, slots=True)
class ConsoleUser:
    """Who is signed in: the key's identity, and this session's CSRF token."""

    identity: Identity
    csrf_token: str
    token_hash: str
    expires_at: datetime

    def can(self, role: str) -> bool:
        return role in self.identity.roles or "admin" in self.identity.roles


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def csrf_for(session_token: str) -> str:
    return hmac.new(session_token.encode("ascii"), _CSRF_CONTEXT, hashlib.sha256).hexdigest()


def _well_formed(token: str | None) -> bool:
    return token is not None and 32 <= len(token) <= 128 and set(token) <= _TOKEN_CHARS


def is_https(request: Request) -> bool:
    """Behind a TLS-terminating proxy uvicorn's proxy headers make this the client's scheme."""
    return request.url.scheme == "https"


async def sign_in(kernel: Kernel, request: Request, response: Response, api_key: str) -> None:
    """Exchange an API key for a session cookie on ``response``; the key is not kept.

    Every failure is an :class:`~arvis.identity.errors.IdentityRefusal`, as on the API;
    a JWT pasted here is refused too: a session of a key ends when the key is revoked,
    and a token has no such key.
    """
    identity = await authenticate(kernel, api_key.strip())
    if identity.key_id is None:
        raise Unauthenticated("the console signs in with an API key here")
    await start_session(kernel, request, response, identity)


async def start_session(
    kernel: Kernel, request: Request, response: Response, identity: Identity
) -> None:
    """A session cookie on ``response`` for ``identity``: of its key when it has one
    (the session then ends with the key), else of the identity itself (OpenID sign-in)."""
    if not any(role in identity.roles for role in CONSOLE_ROLES):
        raise ForbiddenRole("the console is for approvers, auditors and admins")
    token = secrets.token_urlsafe(32)
    ttl = kernel.settings.console_session_ttl_s
    await kernel.console_sessions.create(
        identity.tenant_id,
        identity.key_id,
        _digest(token),
        ttl,
        identity=None if identity.key_id is not None else identity,
    )
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(ttl),
        path=COOKIE_PATH,
        secure=is_https(request),
        httponly=True,
        samesite="strict",
    )
    response.delete_cookie(SIGN_IN_COOKIE, path=COOKIE_PATH)


async def current_user(kernel: Kernel, request: Request) -> ConsoleUser | None:
    """The signed-in user of the request's cookie, or None (none, expired, key revoked)."""
    token = request.cookies.get(SESSION_COOKIE)
    if not _well_formed(token):
        return None
    assert token is not None
    digest = _digest(token)
    found = await kernel.console_sessions.find(digest)
    if found is None:
        return None
    return ConsoleUser(found.identity, csrf_for(token), digest, found.expires_at)


async def sign_out(kernel: Kernel, user: ConsoleUser, response: Response) -> None:
    """End the session in the store (the old cookie no longer works anywhere)."""
    await kernel.console_sessions.end(user.token_hash)
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH)


def check_csrf(user: ConsoleUser, presented: str | None) -> None:
    if presented is None or not hmac.compare_digest(presented, user.csrf_token):
        raise CsrfRefused("this form was not sent from this session's page; reload and retry")


def sign_in_token(request: Request) -> str:
    """The sign-in form's double-submit token: the cookie's, or a new one."""
    current = request.cookies.get(SIGN_IN_COOKIE)
    return current if _well_formed(current) and current is not None else secrets.token_urlsafe(32)


def set_sign_in_cookie(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        SIGN_IN_COOKIE,
        token,
        max_age=3600,
        path=COOKIE_PATH,
        secure=is_https(request),
        httponly=True,
        samesite="strict",
    )


def check_sign_in_token(request: Request, presented: str | None) -> None:
    expected = request.cookies.get(SIGN_IN_COOKIE)
    if (
        presented is None
        or not _well_formed(expected)
        or expected is None
        or not hmac.compare_digest(presented, expected)
    ):
        raise CsrfRefused("the sign-in form has expired; reload the page and sign in again")
