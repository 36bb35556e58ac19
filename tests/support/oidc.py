"""A real OpenID provider for identity tests: ``oidc-provider`` (npm) on 127.0.0.1.

``tests/support/oidc/provider.mjs`` is the server; this module installs its packages
from the lock file when they are missing (``npm ci``), starts it as a subprocess on a
free loopback port, and drives it the way ARVIS's peers would: a machine client's
client-credentials grant, a person's sign-in through the authorization-code flow with
PKCE (the login form is filled in over HTTP, as a browser would), RFC 8693 token
exchange, and key rotation through the provider's loopback admin API.

Fixtures (registered in ``tests/conftest.py``):

- ``oidc_provider``: one provider for the whole session, default configuration. Tests
  that change shared state (keys, the default clients' claims) should start their own
  with :meth:`OidcProvider.start` instead.

Without ``node``/``npm`` on PATH the fixtures skip, saying so. ``ARVIS_TEST_NODE`` names
another ``node`` binary. tests/support/oidc/README.md describes the configuration.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import hashlib
import html
import json
import os
import queue
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, quote, urljoin, urlsplit

import httpx
import pytest

HERE = Path(__file__).resolve().parent / "oidc"
"""The npm project: package.json, package-lock.json, provider.mjs."""

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt"

ARVIS_AUDIENCE = "arvis"
ARVIS_RESOURCE = {
    "RS256": "urn:arvis",
    "ES256": "urn:arvis:es256",
    "EdDSA": "urn:arvis:eddsa",
    "Ed25519": "urn:arvis:ed25519",
}
"""Resource indicator for a token with audience ``arvis``, by signing algorithm (one Ed25519
key signs both "EdDSA", RFC 8037, and "Ed25519", RFC 9864's fully specified name)."""
ARVIS_SCOPE = "arvis:api"
TOOL_AUDIENCE = "urn:tool:example"
"""A tool's audience, the default target of a token exchange."""
SIGNING_ALGS = ("RS256", "ES256", "EdDSA", "Ed25519")

DEFAULT_USER_SCOPE = "openid profile email arvis"

START_TIMEOUT = 60.0
HTTP_TIMEOUT = 15.0


class OidcUnavailable(RuntimeError):
    """Node.js or npm is missing: the provider cannot run on this machine."""


class OidcError(Exception):
    """The provider refused a request: an OAuth error response (or a failed login)."""

    def __init__(self, status: int, error: str, description: str = "") -> None:
        super().__init__(f"{status} {error}: {description}")
        self.status = status
        self.error = error
        self.description = description


@dataclass(frozen=True)
class Tokens:
    """A token endpoint's answer."""

    access_token: str
    token_type: str
    expires_in: int | None
    scope: str | None
    id_token: str | None
    refresh_token: str | None
    issued_token_type: str | None
    """Set by a token exchange (RFC 8693 §2.2.1)."""
    raw: Mapping[str, Any] = field(repr=False)

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> Tokens:
        return cls(
            access_token=str(body["access_token"]),
            token_type=str(body.get("token_type", "")),
            expires_in=int(body["expires_in"]) if "expires_in" in body else None,
            scope=body.get("scope"),
            id_token=body.get("id_token"),
            refresh_token=body.get("refresh_token"),
            issued_token_type=body.get("issued_token_type"),
            raw=dict(body),
        )


@dataclass(frozen=True)
class AuthorizationRequest:
    """What a client keeps between sending the browser to the provider and the callback."""

    client_id: str
    redirect_uri: str
    state: str
    nonce: str
    code_verifier: str
    resource: str | None
    url: str
    """The authorization endpoint URL to open."""


def _b64url_json(segment: str) -> dict[str, Any]:
    padded = segment + "=" * (-len(segment) % 4)
    value: dict[str, Any] = json.loads(base64.urlsafe_b64decode(padded))
    return value


def unverified_header(token: str) -> dict[str, Any]:
    """A JWS's protected header, not verified (for asserting ``kid``/``alg``/``typ``)."""
    return _b64url_json(token.split(".")[0])


def unverified_claims(token: str) -> dict[str, Any]:
    """A JWT's payload, not verified. Verify with joserfc against :meth:`OidcProvider.jwks`."""
    return _b64url_json(token.split(".")[1])


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge) per RFC 7636."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


# ---------------------------------------------------------------------------------------
# Installing


def node_binary() -> str:
    found = os.environ.get("ARVIS_TEST_NODE") or shutil.which("node")
    if not found:
        raise OidcUnavailable(
            "the OpenID provider tests need Node.js (`node` on PATH, or ARVIS_TEST_NODE)"
        )
    return found


def ensure_installed() -> None:
    """``npm ci`` in tests/support/oidc when node_modules is missing or older than the lock.

    ``.ci/run`` and ``make install`` do this up front; here it is the fallback for a
    checkout that skipped them. A file lock keeps two pytest processes from installing at
    once.
    """
    node_binary()
    lock = HERE / "package-lock.json"
    marker = HERE / "node_modules" / ".package-lock.json"

    def fresh() -> bool:
        return marker.exists() and marker.stat().st_mtime >= lock.stat().st_mtime

    if fresh():
        return
    npm = shutil.which("npm")
    if not npm:
        raise OidcUnavailable(
            "the OpenID provider tests need npm to install tests/support/oidc "
            "(or run `npm ci` there on a machine that has it)"
        )
    with open(HERE / ".install.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if fresh():
            return
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"`npm ci` in {HERE} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )


# ---------------------------------------------------------------------------------------
# The running provider


class OidcProvider:
    """A running provider. ``with OidcProvider.start() as idp:`` or the ``oidc_provider``
    fixture; every method is synchronous (the provider is another process, so calling
    them from an async test does not hold up anything the test serves)."""

    def __init__(self, process: subprocess.Popen[str], ready: Mapping[str, Any], log: Path) -> None:
        self._process = process
        self._log = log
        self.issuer: str = ready["issuer"]
        self.port: int = int(ready["port"])
        self.admin_token: str = ready["admin_token"]
        self._http = httpx.Client(base_url=self.issuer, timeout=HTTP_TIMEOUT)
        self._state: dict[str, Any] = dict(ready)

    # -- lifecycle ---------------------------------------------------------------------

    @classmethod
    def start(cls, config: Mapping[str, Any] | None = None) -> OidcProvider:
        """Install if needed, start on a free port, wait for the ready line.

        ``config`` overrides the defaults of provider.mjs (README.md): ``clients``,
        ``users``, ``resources`` (lists, merged by client_id / sub / identifier), ``jwks``
        (a private JWKS to sign with instead of fresh keys), ``admin_token``.
        """
        ensure_installed()
        workdir = Path(tempfile.mkdtemp(prefix="arvis-oidc-"))
        config_path = workdir / "config.json"
        config_path.write_text(json.dumps(dict(config or {})))
        log = workdir / "provider.log"
        with open(log, "w") as stderr:
            process = subprocess.Popen(
                [
                    node_binary(),
                    str(HERE / "provider.mjs"),
                    "--port",
                    "0",
                    "--config",
                    str(config_path),
                    "--exit-with-stdin",
                ],
                cwd=HERE,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        lines: queue.Queue[str] = queue.Queue()
        assert process.stdout is not None
        stdout = process.stdout
        threading.Thread(
            target=lambda: lines.put(stdout.readline()), name="oidc-ready", daemon=True
        ).start()
        try:
            line = lines.get(timeout=START_TIMEOUT)
        except queue.Empty:
            line = ""
        try:
            ready = json.loads(line) if line else {}
        except json.JSONDecodeError:
            ready = {}
        if not ready.get("ready"):
            _end(process)
            raise RuntimeError(
                f"the OpenID provider did not start (exit {process.returncode}); "
                f"its log {log}:\n{log.read_text()[-4000:]}"
            )
        return cls(process, ready, log)

    def stop(self) -> None:
        """End the node process (and close the HTTP client). Safe to call twice."""
        self._http.close()
        _end(self._process)

    def __enter__(self) -> OidcProvider:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def log(self) -> str:
        """The provider's stderr so far (for a failing test's message)."""
        return self._log.read_text()

    @property
    def running(self) -> bool:
        return self._process.poll() is None

    # -- what it serves ----------------------------------------------------------------

    def discovery(self) -> dict[str, Any]:
        return self._json(self._http.get("/.well-known/openid-configuration"))

    def jwks(self) -> dict[str, Any]:
        """The public JWKS as the provider publishes it (``jwks_uri``)."""
        return self._json(self._http.get("/jwks"))

    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    # -- the directory (admin API) -----------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Clients (with secrets), users (with passwords), resources, signing kids, JWKS."""
        self._state = self._admin("GET", "state")
        return self._state

    def client(self, client_id: str) -> dict[str, Any]:
        for entry in self.state()["clients"]:
            if entry["client_id"] == client_id:
                return dict(entry)
        raise KeyError(client_id)

    def user(self, sub: str) -> dict[str, Any]:
        for entry in self.state()["users"]:
            if entry["sub"] == sub:
                return dict(entry)
        raise KeyError(sub)

    def put_client(
        self, client_id: str, metadata: Mapping[str, Any], *, replace: bool = False
    ) -> dict[str, Any]:
        """Create a client, or change one (metadata merged over what it had unless
        ``replace``). The library validates it; a bad one raises :class:`OidcError`."""
        return self._admin(
            "PUT", f"clients/{client_id}", {"metadata": dict(metadata), "replace": replace}
        )

    def delete_client(self, client_id: str) -> None:
        self._admin("DELETE", f"clients/{client_id}")

    def machine_client(
        self,
        client_id: str,
        claims: Mapping[str, Any],
        *,
        secret: str | None = None,
        default_resource: str = ARVIS_RESOURCE["RS256"],
    ) -> dict[str, Any]:
        """A client-credentials client (like ``arvis-agent``) whose tokens carry ``claims``
        (e.g. ``{"tenant": "acme", "arvis_roles": ["agent"]}``); may also exchange tokens."""
        return self.put_client(
            client_id,
            {
                "client_secret": secret or f"{client_id}-secret",
                "grant_types": ["client_credentials", TOKEN_EXCHANGE],
                "response_types": [],
                "redirect_uris": [],
                "token_endpoint_auth_method": "client_secret_basic",
                "default_resource": default_resource,
                "arvis_claims": dict(claims),
                "token_exchange_subject_audiences": [ARVIS_AUDIENCE],
            },
            replace=True,
        )

    def add_console_redirects(
        self,
        redirect_uris: Sequence[str],
        post_logout_redirect_uris: Sequence[str] = (),
        *,
        client_id: str = "arvis-console",
    ) -> dict[str, Any]:
        """Let the console client return to a running ARVIS (its port is known only once it
        serves): callback URIs for the code flow and after-logout URIs, added to those the
        client has (several ARVIS servers may share the session's provider)."""
        known = self.client(client_id)

        def union(have: Sequence[str], more: Sequence[str]) -> list[str]:
            return list(dict.fromkeys([*have, *more]))

        return self.put_client(
            client_id,
            {
                "redirect_uris": union(known.get("redirect_uris", []), redirect_uris),
                "post_logout_redirect_uris": union(
                    known.get("post_logout_redirect_uris", []), post_logout_redirect_uris
                ),
            },
        )

    def put_user(
        self, sub: str, claims: Mapping[str, Any], *, password: str | None = None
    ) -> dict[str, Any]:
        """Create or replace a person who can sign in; ``claims`` go into their ID tokens
        (``arvis`` scope) and access tokens: ``tenant``, ``arvis_roles``, ``groups``, …"""
        return self._admin(
            "PUT", f"users/{sub}", {"password": password or f"{sub}-password", "claims": claims}
        )

    def delete_user(self, sub: str) -> None:
        self._admin("DELETE", f"users/{sub}")

    def put_resource(
        self,
        identifier: str,
        *,
        audience: str | None = None,
        scope: str = "",
        alg: str = "RS256",
        ttl: int = 600,
    ) -> dict[str, Any]:
        """A resource (RFC 8707 indicator, an absolute URI) tokens can be issued for."""
        body: dict[str, Any] = {"identifier": identifier, "audience": audience or identifier}
        body |= {"scope": scope, "alg": alg, "ttl": ttl}
        return self._admin("PUT", "resources", body)

    def rotate_keys(
        self, *, retain_previous: bool = True, jwks: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        """New RS256/ES256/EdDSA signing keys (or the given private JWKS) sign from now
        on. The previous keys stay in the published JWKS unless ``retain_previous`` is
        false. Answers the new signing ``kid`` per algorithm."""
        body: dict[str, Any] = {"retain_previous": retain_previous}
        if jwks is not None:
            body["jwks"] = dict(jwks)
        self._state = self._admin("POST", "rotate-keys", body)
        kids: dict[str, str] = self._state["signing_kids"]
        return kids

    def signing_kids(self) -> dict[str, str]:
        """The ``kid`` that signs now, per algorithm."""
        kids: dict[str, str] = self.state()["signing_kids"]
        return kids

    # -- tokens --------------------------------------------------------------------------

    def client_credentials(
        self,
        client_id: str = "arvis-agent",
        *,
        resource: str | None = ARVIS_RESOURCE["RS256"],
        scope: str | None = None,
        secret: str | None = None,
    ) -> Tokens:
        """``grant_type=client_credentials`` with HTTP Basic client authentication."""
        data = {"grant_type": "client_credentials"}
        if resource:
            data["resource"] = resource
        if scope:
            data["scope"] = scope
        return self._token(data, client_id, secret)

    def agent_token(
        self,
        client_id: str = "arvis-agent",
        *,
        claims: Mapping[str, Any] | None = None,
        alg: str = "RS256",
        scope: str | None = ARVIS_SCOPE,
    ) -> str:
        """A machine's JWT access token for ARVIS (``aud`` ``arvis``, ``sub`` = client id),
        signed with ``alg``. With ``claims`` the client is (re)created to carry them first
        (:meth:`machine_client`): use a client id of the test's own for that."""
        if claims is not None:
            self.machine_client(client_id, claims)
        return self.client_credentials(
            client_id, resource=ARVIS_RESOURCE[alg], scope=scope
        ).access_token

    def authorization_request(
        self,
        *,
        client_id: str = "arvis-console",
        scope: str = DEFAULT_USER_SCOPE,
        resource: str | None = None,
        redirect_uri: str | None = None,
        nonce: str | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> AuthorizationRequest:
        """An authorization-code request with PKCE (S256), for a browser to open."""
        redirect = redirect_uri or self.client(client_id)["redirect_uris"][0]
        verifier, challenge = pkce_pair()
        request = AuthorizationRequest(
            client_id=client_id,
            redirect_uri=redirect,
            state=secrets.token_urlsafe(16),
            nonce=nonce or secrets.token_urlsafe(16),
            code_verifier=verifier,
            resource=resource,
            url="",
        )
        params = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect,
            "scope": scope,
            "state": request.state,
            "nonce": request.nonce,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        if resource:
            params["resource"] = resource
        params |= dict(extra or {})
        return dataclasses.replace(request, url=f"{self.issuer}/auth?{httpx.QueryParams(params)}")

    def redeem(self, request: AuthorizationRequest, callback_url: str) -> Tokens:
        """The tokens for the code on ``callback_url`` (where the browser was sent back to),
        after checking its ``state`` and ``iss`` (RFC 9207)."""
        query = {k: v[0] for k, v in parse_qs(urlsplit(callback_url).query).items()}
        if "error" in query:
            raise OidcError(400, query["error"], query.get("error_description", ""))
        if query.get("state") != request.state or query.get("iss") != self.issuer:
            raise AssertionError(f"callback with a foreign state or issuer: {query}")
        data = {
            "grant_type": "authorization_code",
            "code": query["code"],
            "redirect_uri": request.redirect_uri,
            "code_verifier": request.code_verifier,
        }
        if request.resource:
            data["resource"] = request.resource
        return self._token(data, request.client_id, None)

    def sign_in(
        self,
        username: str,
        password: str | None = None,
        *,
        client_id: str = "arvis-console",
        scope: str = DEFAULT_USER_SCOPE,
        resource: str | None = None,
        redirect_uri: str | None = None,
        nonce: str | None = None,
        extra: Mapping[str, str] | None = None,
        browser: httpx.Client | None = None,
    ) -> Tokens:
        """A person's tokens through the authorization-code flow with PKCE, the login form
        filled in over HTTP (consent is granted at once: the clients are first-party).

        ``resource`` (e.g. ``"urn:arvis"``, with ``"arvis:api"`` in ``scope``) makes the
        access token a JWT for that audience; without it the access token is the
        userinfo endpoint's. ``browser`` keeps the provider's session cookie between calls
        (SSO, logout); by default each call signs in afresh. A wrong password raises
        :class:`OidcError` with status 401.
        """
        request = self.authorization_request(
            client_id=client_id,
            scope=scope,
            resource=resource,
            redirect_uri=redirect_uri,
            nonce=nonce,
            extra=extra,
        )
        if password is None:
            password = self.user(username)["password"]
        with contextlib.ExitStack() as stack:
            http = browser or stack.enter_context(httpx.Client(timeout=HTTP_TIMEOUT))
            answer = self._follow(http, http.get(request.url), request.redirect_uri)
            if not str(answer.url).startswith(request.redirect_uri):
                login = http.post(
                    urljoin(str(answer.url), _form_action(answer.text)),
                    data={"username": username, "password": password},
                )
                if login.status_code == 401:
                    raise OidcError(401, "login_failed", f"the provider refused {username}")
                answer = self._follow(http, login, request.redirect_uri)
        return self.redeem(request, str(answer.url))

    def user_token(self, username: str, *, alg: str = "RS256") -> str:
        """A person's JWT access token for ARVIS (``aud`` ``arvis``, ``sub`` = username)."""
        return self.sign_in(
            username, scope=f"{DEFAULT_USER_SCOPE} {ARVIS_SCOPE}", resource=ARVIS_RESOURCE[alg]
        ).access_token

    def token_exchange(
        self,
        subject_token: str,
        *,
        audience: str | None = None,
        resource: str | None = None,
        actor_token: str | None = None,
        subject_token_type: str = ACCESS_TOKEN_TYPE,
        actor_token_type: str = ACCESS_TOKEN_TYPE,
        scope: str | None = None,
        requested_token_type: str | None = None,
        client_id: str = "arvis-exchange",
        secret: str | None = None,
    ) -> Tokens:
        """RFC 8693: a token for one ``audience`` (or ``resource``) on behalf of the subject;
        with ``actor_token`` it carries ``act: {"sub": <actor>}``."""
        data = {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": subject_token,
            "subject_token_type": subject_token_type,
        }
        if audience:
            data["audience"] = audience
        if resource:
            data["resource"] = resource
        if actor_token:
            data |= {"actor_token": actor_token, "actor_token_type": actor_token_type}
        if scope:
            data["scope"] = scope
        if requested_token_type:
            data["requested_token_type"] = requested_token_type
        return self._token(data, client_id, secret)

    def end_session_url(self, id_token_hint: str, post_logout_redirect_uri: str) -> str:
        """RP-initiated logout (OIDC RP-Initiated Logout 1.0), as the console would send."""
        query = httpx.QueryParams(
            id_token_hint=id_token_hint, post_logout_redirect_uri=post_logout_redirect_uri
        )
        return f"{self.issuer}/session/end?{query}"

    def end_session(
        self, browser: httpx.Client, id_token_hint: str, post_logout_redirect_uri: str
    ) -> str:
        """Sign the person in ``browser`` out: the end-session request, then the "Yes, sign
        me out" confirmation. Answers where the provider sends the browser back to."""
        confirm = browser.get(self.end_session_url(id_token_hint, post_logout_redirect_uri))
        if confirm.status_code != 200:
            raise OidcError(confirm.status_code, "end_session_failed", confirm.text[:500])
        fields = dict(_HIDDEN.findall(confirm.text))
        done = browser.post(
            urljoin(str(confirm.url), _form_action(confirm.text)), data={**fields, "logout": "yes"}
        )
        if done.status_code not in (302, 303):
            raise OidcError(done.status_code, "end_session_failed", done.text[:500])
        return urljoin(str(done.url), done.headers["location"])

    # -- plumbing ------------------------------------------------------------------------

    def _token(self, data: Mapping[str, str], client_id: str, secret: str | None) -> Tokens:
        if secret is None:
            secret = self.client(client_id).get("client_secret")
        body = dict(data)
        if secret:
            # RFC 6749 §2.3.1: both halves form-urlencoded before Basic encoding.
            auth = httpx.BasicAuth(quote(client_id, safe=""), quote(secret, safe=""))
            answer = self._http.post("/token", data=body, auth=auth)
        else:
            body["client_id"] = client_id
            answer = self._http.post("/token", data=body)
        return Tokens.parse(self._json(answer))

    def _admin(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        answer = self._http.request(
            method,
            f"/_admin/{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.admin_token}"},
        )
        if answer.status_code == 204:
            return {}
        return self._json(answer)

    def _json(self, answer: httpx.Response) -> dict[str, Any]:
        try:
            body = answer.json()
        except ValueError:
            body = {}
        if answer.status_code >= 400:
            raise OidcError(
                answer.status_code,
                str(body.get("error", "http_error")),
                str(body.get("error_description", answer.text[:500])),
            )
        if not isinstance(body, dict):
            raise OidcError(answer.status_code, "bad_response", answer.text[:500])
        return body

    def _follow(self, http: httpx.Client, answer: httpx.Response, stop_at: str) -> httpx.Response:
        """Follow redirects on the provider, stopping at the client's redirect URI (which
        is not requested: the test reads the code off the Location)."""
        for _ in range(20):
            if answer.status_code not in (301, 302, 303, 307, 308):
                if answer.status_code >= 400:
                    raise OidcError(answer.status_code, "authorization_failed", answer.text[:500])
                return answer
            target = urljoin(str(answer.url), answer.headers["location"])
            if target.startswith(stop_at):
                return httpx.Response(200, request=httpx.Request("GET", target))
            answer = http.get(target)
        raise AssertionError("too many redirects in the authorization flow")


_FORM = re.compile(r'<form[^>]*\baction="([^"]+)"')
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


def _form_action(page: str) -> str:
    found = _FORM.search(page)
    if not found:
        raise AssertionError(f"no login form on the provider's page: {page[:500]}")
    return html.unescape(found.group(1))


def _end(process: subprocess.Popen[str]) -> None:
    if process.stdin and not process.stdin.closed:
        with contextlib.suppress(OSError):
            process.stdin.close()
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    if process.stdout and not process.stdout.closed:
        process.stdout.close()


@contextlib.contextmanager
def running_provider(config: Mapping[str, Any] | None = None) -> Iterator[OidcProvider]:
    """A provider of the caller's own; skips the test when Node.js/npm are missing."""
    try:
        provider = OidcProvider.start(config)
    except OidcUnavailable as missing:
        pytest.skip(str(missing))
    with provider:
        yield provider


@pytest.fixture(scope="session")
def oidc_provider() -> Iterator[OidcProvider]:
    """The session's provider, default configuration (README.md beside provider.mjs)."""
    with running_provider() as provider:
        yield provider
