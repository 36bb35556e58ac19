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
from tests.support.unsuretools import RUNS

CONFIG = """
[tools]
factories = ["tests.support.unsuretools:make_tools"]

[policy.default.approvals."files.append"]
approvers = ["payments-leads"]
quorum = 2
ttl_s = 900

[policy.default.approvals."probe.unsure"]
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
            keys = PgKeyStore(store.engine, store.ops)
            for name in ("lead-a", "lead-b"):
                _, issued = await keys.create("acme", name, ["approver"], ["payments-leads"])
                served.tokens[f"acme:{name}"] = issued.token
            _, issued = await keys.create("acme", "ops-outsider", ["approver"], ["infra"])
            served.tokens["acme:outsider"] = issued.token
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


async def test_an_approvers_reason_is_on_the_record_beside_the_approval(api: Api) -> None:
    """The reason an approver gives (the client's ``approve(reason=...)``) is journaled
    with that approval, in the chain an auditor verifies, as a deny's reason is."""
    asked = await api.syscall(
        "files.append", {"path": "ops/why.log", "line": "x"}, run_id="run-why", causal_id="c-w"
    )
    cid = asked.json()["confirmation"]["id"]
    approve = f"/v1/confirmations/{cid}/approve"
    first = await api.client.post(
        approve, headers=api.auth("acme:lead-a"), json={"reason": "invoice 1042 checked"}
    )
    assert first.status_code == 200, first.text
    second = await api.client.post(approve, headers=api.auth("acme:lead-b"))
    assert second.json()["state"] == "APPROVED", second.text

    page = await api.client.get("/v1/runs/run-why/journal", headers=api.auth("acme:auditor"))
    decisions = [
        (e["body"]["decided_by"]["principal_id"], e["body"].get("reason"))
        for e in page.json()["entries"]
        if e["kind"] == "confirmation" and e["body"].get("decision") == "APPROVED"
    ]
    assert decisions == [("lead-a", "invoice 1042 checked"), ("lead-b", None)]
    verified = await api.client.get("/v1/runs/run-why/verify", headers=api.auth("acme:auditor"))
    assert verified.json()["ok"] is True


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
        _, issued = await PgKeyStore(store.engine, store.ops).create(
            "acme", "agent-7", ["approver"]
        )
    finally:
        await store.close()
    response = await api.client.post(
        _resolve_path(harness, key),
        json={"as": "completed", "evidence": "I did it"},
        headers={"Authorization": f"Bearer {issued.token}"},
    )
    _problem(response, 403, "self_resolution")


async def _approve(api: Api, cid: str, *who: str) -> httpx.Response:
    answer = None
    for name in who:
        answer = await api.client.post(f"/v1/confirmations/{cid}/approve", headers=api.auth(name))
        assert answer.status_code == 200, answer.text
    assert answer is not None
    return answer


async def _uncertain_under_quorum(api: Api, run_id: str, target: str) -> tuple[str, str]:
    """A quorum-2 consent given by two leads, and the call it allowed ending uncertain:
    (the confirmation id, the idempotency key)."""
    payload = {"target": target}
    asked = await api.syscall("probe.unsure", payload, run_id=run_id, causal_id="c-1")
    assert asked.json()["outcome"] == "confirmation_required", asked.text
    cid = asked.json()["confirmation"]["id"]
    approved = await _approve(api, cid, "acme:lead-a", "acme:lead-b")
    assert approved.json()["state"] == "APPROVED"
    ran = await api.syscall("probe.unsure", payload, run_id=run_id, causal_id="c-1")
    assert ran.json()["boundary"] == "EFFECT_STATE_UNKNOWN", ran.text
    assert RUNS[target] == 1
    return cid, ran.json()["idempotency_key"]


async def test_an_outsiders_not_started_does_not_rerun_a_quorum_consent(api: Api) -> None:
    """The finding: two leads of a quorum-2 consent approve, the call ends uncertain, an
    approver outside the group resolves it not_started. The agent's re-post must not run
    the tool again under the consumed consent: the consent asks for a new round."""
    cid, key = await _uncertain_under_quorum(api, "run-renew", "renew")
    payload = {"target": "renew"}
    resolved = await api.client.post(
        f"/v1/runs/run-renew/attempts/{key}/1/resolve",
        json={"as": "not_started", "evidence": "no such request in the far side's log"},
        headers=api.auth("acme:outsider"),
    )
    assert resolved.status_code == 201, resolved.text

    again = await api.syscall("probe.unsure", payload, run_id="run-renew", causal_id="c-1")
    assert again.json()["outcome"] == "confirmation_required", again.text
    assert again.json()["confirmation"]["id"] == cid
    assert RUNS["renew"] == 1
    assert resolved.json()["consent"] == {
        "confirmation_id": cid,
        "round": 2,
        "state": "PENDING",
        "approvals": 0,
        "quorum": 2,
    }

    # The new round meets the terms as the first did: an outsider is not in the group,
    # one lead is not a quorum, and an approval of the first round does not count.
    _problem(
        await api.client.post(
            f"/v1/confirmations/{cid}/approve", headers=api.auth("acme:outsider")
        ),
        403,
        "approver_not_in_group",
    )
    one = await _approve(api, cid, "acme:lead-a")
    assert (one.json()["state"], [a["principal_id"] for a in one.json()["approvals"]]) == (
        "PENDING",
        ["lead-a"],
    )
    still = await api.syscall("probe.unsure", payload, run_id="run-renew", causal_id="c-1")
    assert still.json()["outcome"] == "confirmation_required"
    assert RUNS["renew"] == 1
    two = await _approve(api, cid, "acme:lead-b")
    assert two.json()["state"] == "APPROVED"

    ran = await api.syscall("probe.unsure", payload, run_id="run-renew", causal_id="c-1")
    assert (ran.json()["outcome"], ran.json()["boundary"]) == ("executed", "EFFECT_COMPLETED")
    assert RUNS["renew"] == 2
    again = await api.syscall("probe.unsure", payload, run_id="run-renew", causal_id="c-1")
    assert again.json()["outcome"] == "deduplicated"
    assert RUNS["renew"] == 2
    verify = await api.client.get("/v1/runs/run-renew/verify", headers=api.auth("acme:auditor"))
    assert verify.json()["ok"] is True


async def test_the_requesting_agent_may_withdraw_its_own_request_and_nothing_more(
    api: Api,
) -> None:
    payload = {"path": "ops/withdrawn.log", "line": "never mind"}
    asked = await api.syscall("files.append", payload, run_id="run-w", causal_id="c-1")
    cid = asked.json()["confirmation"]["id"]
    store = await PgStore.open(api.database_url)
    try:
        _, other = await PgKeyStore(store.engine, store.ops).create("acme", "agent-2", ["agent"])
    finally:
        await store.close()
    deny = f"/v1/confirmations/{cid}/deny"

    _problem(await api.client.post(deny, headers=api.auth("globex:agent")), 404, "not_found")
    _problem(
        await api.client.post(deny, headers={"Authorization": f"Bearer {other.token}"}),
        403,
        "identity_mismatch",
    )
    _problem(
        await api.client.post(f"/v1/confirmations/{cid}/approve", headers=api.auth("acme:agent")),
        403,
        "forbidden_role",
    )
    withdrawn = await api.client.post(deny, headers=api.auth("acme:agent"))
    assert withdrawn.status_code == 200, withdrawn.text
    body = withdrawn.json()
    assert (body["state"], body["reason"]) == ("DENIED", "withdrawn by the requester")
    assert body["decided_by"].startswith("agent-of-acme ")

    refused = await api.syscall("files.append", payload, run_id="run-w", causal_id="c-1")
    assert (refused.json()["outcome"], refused.json()["reason"]) == (
        "refused",
        "confirmation_denied",
    )
    journal = await api.client.get("/v1/runs/run-w/journal", headers=api.auth("acme:auditor"))
    [decision] = [e for e in journal.json()["entries"] if e["kind"] == "confirmation"]
    assert decision["boundary"] == "PRE_EFFECT_REFUSAL"
    assert decision["body"]["decided_by"]["principal_id"] == "agent-of-acme"
