"""Issue 16 over HTTP: approvals by a quorum of a group's keys, and resolving an uncertain
attempt — roles, tenants (404 across them), four eyes and the typed problems."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from arvis.store.database import PgStore
from arvis.store.keys import PgKeyStore
from tests.support.http import Api, serve_api
from tests.support.lifecycle import Harness, crash_during_dispatch, make_harness

CONFIG = """
[policy.default.approvals."files.append"]
approvers = ["payments-leads"]
quorum = 2
ttl_s = 900
"""


@pytest.fixture(scope="module")
async def api(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    data: Path = tmp_path_factory.mktemp("arvis-ops")
    async with serve_api(database_url, data, config=CONFIG) as served:
        store = await PgStore.open(database_url)
        try:
            keys = PgKeyStore(store.engine)
            for name in ("lead-a", "lead-b"):
                _, issued = await keys.create("acme", name, ["approver"], ["payments-leads"])
                served.tokens[f"acme:{name}"] = issued.token
        finally:
            await store.close()
        yield served


def _problem(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["code"] == code


async def test_a_quorum_of_two_group_keys_approves_over_http(api: Api) -> None:
    payload = {"path": "ops/quorum.log", "line": "two leads said so"}
    asked = await api.syscall("files.append", payload, run_id="run-q", causal_id="c-1")
    assert asked.json()["outcome"] == "confirmation_required"
    cid = asked.json()["confirmation"]["id"]
    approve = f"/v1/confirmations/{cid}/approve"

    _problem(
        await api.client.post(approve, headers=api.auth("acme:approver")),
        403,
        "approver_not_in_group",
    )
    _problem(await api.client.post(approve, headers=api.auth("globex:approver")), 404, "not_found")
    first = await api.client.post(approve, headers=api.auth("acme:lead-a"))
    assert first.status_code == 200, first.text
    assert first.json()["state"] == "PENDING"
    assert [a["principal_id"] for a in first.json()["approvals"]] == ["lead-a"]
    _problem(
        await api.client.post(approve, headers=api.auth("acme:lead-a")), 409, "already_approved"
    )
    second = await api.client.post(approve, headers=api.auth("acme:lead-b"))
    body = second.json()
    assert (body["state"], body["quorum"], body["approvers"]) == ("APPROVED", 2, ["payments-leads"])
    assert [a["key_id"].startswith("k") for a in body["approvals"]] == [True, True]

    ran = await api.syscall("files.append", payload, run_id="run-q", causal_id="c-1")
    assert ran.json()["outcome"] == "executed"


@pytest.fixture
async def uncertain(api: Api) -> AsyncIterator[tuple[Harness, str]]:
    """An attempt of tenant acme that a crash left uncertain (another process, same store)."""
    harness = await make_harness(api.database_url, instance_id="crashing-ops")
    try:
        key = await crash_during_dispatch(harness, "write", {"text": "t"}, causal_id="c-u")
        await harness.lifecycle.sweeper.sweep()
        yield harness, key
    finally:
        await harness.close()


def _resolve_path(harness: Harness, key: str, attempt: int = 1) -> str:
    return f"/v1/runs/{harness.run_id}/attempts/{key}/{attempt}/resolve"


async def test_an_approver_resolves_an_uncertain_attempt_once_over_http(
    api: Api, uncertain: tuple[Harness, str]
) -> None:
    harness, key = uncertain
    path = _resolve_path(harness, key)
    body = {"as": "not_started", "evidence": "the downstream log has no such request"}

    _problem(
        await api.client.post(path, json=body, headers=api.auth("acme:agent")),
        403,
        "forbidden_role",
    )
    _problem(
        await api.client.post(path, json=body, headers=api.auth("globex:approver")),
        404,
        "not_found",
    )
    _problem(
        await api.client.post(
            path, json={"as": "maybe", "evidence": "x"}, headers=api.auth("acme:approver")
        ),
        422,
        "validation_error",
    )
    done = await api.client.post(path, json=body, headers=api.auth("acme:approver"))
    assert done.status_code == 201, done.text
    answer = done.json()
    assert (answer["boundary"], answer["resolved_by"]) == ("EFFECT_NOT_STARTED", "approver-of-acme")
    _problem(
        await api.client.post(path, json=body, headers=api.auth("acme:admin")),
        409,
        "already_resolved",
    )
    _problem(
        await api.client.post(
            _resolve_path(harness, key, 2), json=body, headers=api.auth("acme:approver")
        ),
        404,
        "not_found",
    )

    journal = await api.client.get(
        f"/v1/runs/{harness.run_id}/journal", headers=api.auth("acme:auditor")
    )
    kinds = [(e["kind"], e["boundary"]) for e in journal.json()["entries"]]
    assert kinds[-2:] == [
        ("recovery", "EFFECT_STATE_UNKNOWN"),
        ("resolution", "EFFECT_NOT_STARTED"),
    ]
    verify = await api.client.get(
        f"/v1/runs/{harness.run_id}/verify", headers=api.auth("acme:auditor")
    )
    assert verify.json()["ok"] is True


async def test_an_attempt_with_a_known_outcome_is_not_uncertain_over_http(api: Api) -> None:
    done = await api.syscall("echo", {"x": 1}, run_id="run-known", causal_id="c-1")
    key = done.json()["idempotency_key"]
    response = await api.client.post(
        f"/v1/runs/run-known/attempts/{key}/1/resolve",
        json={"as": "completed", "evidence": "it is"},
        headers=api.auth("acme:approver"),
    )
    _problem(response, 409, "not_uncertain")


async def test_the_caller_whose_attempt_it_was_cannot_resolve_it(
    api: Api, uncertain: tuple[Harness, str]
) -> None:
    harness, key = uncertain
    # The harness's agent principal, now holding an approver key of the same tenant.
    store = await PgStore.open(api.database_url)
    try:
        _, issued = await PgKeyStore(store.engine).create("acme", "agent-7", ["approver"])
    finally:
        await store.close()
    response = await api.client.post(
        _resolve_path(harness, key),
        json={"as": "completed", "evidence": "I did it"},
        headers={"Authorization": f"Bearer {issued.token}"},
    )
    _problem(response, 403, "self_resolution")
