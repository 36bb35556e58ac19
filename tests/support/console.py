"""Driving the operator console over HTTP like a browser without script: forms and cookies."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urljoin

import httpx

_HIDDEN = re.compile(r'name="(csrf_token|signin_token)" value="([^"]*)"')
_FORM = re.compile(r'<form[^>]*action="([^"]+)"')


def hidden(page: str, name: str = "csrf_token") -> str:
    """The value of a hidden field of a page (the first one of that name)."""
    for found, value in _HIDDEN.findall(page):
        if found == name:
            return html.unescape(value)
    raise AssertionError(f"no hidden field {name} on the page")


async def sign_in(client: httpx.AsyncClient, token: str) -> str:
    """Sign in with an API key; answers the session's CSRF token (from the next page)."""
    form = await client.get("/console/sign-in")
    assert form.status_code == 200, form.text
    answer = await client.post(
        "/console/sign-in",
        data={"api_key": token, "signin_token": hidden(form.text, "signin_token"), "next": ""},
    )
    assert answer.status_code == 303, answer.text
    home = await client.get(answer.headers["location"], follow_redirects=True)
    assert home.status_code == 200, home.text
    return hidden(home.text)


async def sign_in_with_provider(client: httpx.AsyncClient, username: str, password: str) -> str:
    """Sign in through the console's first identity provider as a browser does: its
    button, the provider's login form, the redirect back to the callback. Answers the
    session's CSRF token (from the page it moves on to, as the key sign-in does)."""
    login = await client.get("/console/oidc/start", params={"issuer": 0}, follow_redirects=True)
    assert login.status_code == 200, login.text
    form = _FORM.search(login.text)
    assert form is not None, login.text[:800]
    landed = await client.post(
        urljoin(str(login.url), html.unescape(form.group(1))),
        data={"username": username, "password": password},
        follow_redirects=True,
    )
    assert landed.status_code == 200, landed.text
    home = await client.get("/console", follow_redirects=True)
    assert home.status_code == 200, home.text
    return hidden(home.text)


def text_of(page: str) -> str:
    """A page's text as a reader sees it: tags dropped, entities decoded, spaces folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


@asynccontextmanager
async def browser_on(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client with a cookie jar of its own on ``app``: one browser."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://arvis.test") as client:
        yield client
