"""The syscall fast lane answers exactly as the FastAPI route does.

Two apps on one database, one with the lane and one without, get the same
requests; every answer must match: status, media type and body (ids and
timestamps aside), for the calls the lane serves and those it hands on.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.http import Api, serve_api

_causal = itertools.count()

# Fields that differ by design: each app gets its own run and causal id.
_VOLATILE = {
    "run_id",
    "causal_id",
    "idempotency_key",
    "intent_commitment",
    "intent_id",
    "capability_id",
    "recorded_at",
    "entry_hash",
    "prev_hash",
    "position",
}


@pytest.fixture(scope="module")
async def lanes(
    database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Api, Api]]:
    data = tmp_path_factory.mktemp("arvis-data")
    async with (
        serve_api(database_url, data) as with_lane,
        serve_api(database_url, data, fast_lane=False) as without,
    ):
        yield with_lane, without


def _body(run: str, causal: str, tool: str = "echo", payload: Any = None) -> dict[str, Any]:
    return {
        "name": "tool.execute",
        "run_id": run,
        "causal_id": causal,
        "decision": {"tool": tool, "payload": {"text": "hi"} if payload is None else payload},
    }


def _shape(response: httpx.Response) -> tuple[int, str, Any]:
    media = response.headers.get("content-type", "")
    return response.status_code, media, _scrub(response.json())


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "…" if k in _VOLATILE else _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


async def _both(
    lanes: tuple[Api, Api], make: Any, headers: Any
) -> tuple[httpx.Response, httpx.Response]:
    """The same request to each app, each with its own run and causal id."""
    answers = []
    for api in lanes:
        n = next(_causal)
        body = make(f"lane-run-{n}", f"c-{n}")
        content = body if isinstance(body, bytes) else None
        answers.append(
            await api.client.post(
                "/v1/syscalls",
                json=None if content is not None else body,
                content=content,
                headers={"content-type": "application/json", **headers(api)},
            )
        )
    return answers[0], answers[1]


CASES = {
    "executed": (_body, lambda api: api.auth()),
    "lowercase bearer scheme": (
        _body,
        lambda api: {"Authorization": f"bearer {api.tokens['acme:agent']}"},
    ),
    "admin holds the agent role": (_body, lambda api: api.auth("acme:admin")),
    "refused: unknown tool": (
        lambda r, c: _body(r, c, tool="no_such_tool"),
        lambda api: api.auth(),
    ),
    "no key": (_body, lambda api: {}),
    "another scheme": (_body, lambda api: {"Authorization": "Basic YWJjOmRlZg=="}),
    "wrong secret": (
        _body,
        lambda api: {"Authorization": "Bearer " + api.tokens["acme:agent"][:-4] + "AAAA"},
    ),
    "approver key": (_body, lambda api: api.auth("acme:approver")),
    "missing field": (
        lambda r, c: {k: v for k, v in _body(r, c).items() if k != "decision"},
        lambda api: api.auth(),
    ),
    "extra field": (lambda r, c: {**_body(r, c), "extra": 1}, lambda api: api.auth()),
    "not JSON": (lambda r, c: b"{not json", lambda api: api.auth()),
    "not an object": (lambda r, c: b"[1, 2]", lambda api: api.auth()),
    "payload value not allowed": (
        lambda r, c: _body(r, c, payload={"text": "nul\x00"}),
        lambda api: api.auth(),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_the_lane_answers_as_the_route_does(lanes: tuple[Api, Api], case: str) -> None:
    make, headers = CASES[case]
    with_lane, without = await _both(lanes, make, headers)
    assert _shape(with_lane) == _shape(without)


async def test_a_repost_is_deduplicated_identically_through_either(
    lanes: tuple[Api, Api],
) -> None:
    with_lane, without = lanes
    body = _body("lane-repost", "c-repost")
    first = await with_lane.client.post("/v1/syscalls", json=body, headers=with_lane.auth())
    via_route = await without.client.post("/v1/syscalls", json=body, headers=without.auth())
    via_lane = await with_lane.client.post("/v1/syscalls", json=body, headers=with_lane.auth())

    assert first.json()["outcome"] == "executed"
    assert via_route.json()["outcome"] == "deduplicated"
    assert via_lane.status_code == via_route.status_code
    assert via_lane.json() == via_route.json()


async def test_the_lane_serves_valid_calls_and_hands_on_the_rest(
    lanes: tuple[Api, Api],
) -> None:
    with_lane, _ = lanes
    with with_lane.routed() as handed_on:
        served = await with_lane.syscall("echo", {"text": "hi"}, run_id="lane-count", causal_id="1")
        refused = await with_lane.client.post(
            "/v1/syscalls", json=_body("lane-count", "2"), headers=with_lane.auth("acme:auditor")
        )

    assert served.json()["outcome"] == "executed"
    assert refused.status_code == 403
    assert handed_on == ["/v1/syscalls"]
