"""The request deadline answers 503 in time and never cancels the work behind it."""

from __future__ import annotations

import asyncio

import httpx
from starlette.types import Receive, Scope, Send

from arvis.web.middleware import Deadline


def _app(delay_s: float, finished: asyncio.Event):  # type: ignore[no-untyped-def]
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(delay_s)
        finished.set()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


async def test_a_request_past_its_deadline_is_answered_503_and_its_work_goes_on() -> None:
    finished = asyncio.Event()
    app = Deadline(_app(0.3, finished), timeout_s=0.05)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/slow")
    assert response.status_code == 503
    assert response.json()["code"] == "request_timeout"
    assert not finished.is_set()
    await asyncio.wait_for(finished.wait(), timeout=5)


async def test_a_request_within_its_deadline_is_untouched() -> None:
    finished = asyncio.Event()
    app = Deadline(_app(0, finished), timeout_s=5)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/fast")
    assert response.status_code == 200
