"""The endpoints issue 16 talks to, as real local HTTP servers: an HTTP tool's
``reconcile_url`` settling a crashed attempt without a human, and a webhook receiver
that is down and then up getting every signed event from the durable outbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId, RunId, TenantId
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.tools.http import HttpToolConfig, http_tool
from tests.support.httpserver import Hang, LocalHttpServer, Respond
from tests.support.lifecycle import APPROVER, Harness, attempt_then_crash, make_harness
from tests.support.operators import deliverer, due_now, forged, verified, wait_for

PAYLOAD = {"account": "acct-9", "cents": 500}


@pytest.fixture
async def server() -> AsyncIterator[LocalHttpServer]:
    async with LocalHttpServer() as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def _ledger(server: LocalHttpServer, http: httpx.AsyncClient) -> Any:
    config = HttpToolConfig(
        name="ledger.post",
        description="Post to the ledger.",
        url=server.url("/ledger"),
        reconcile_url=server.url("/ledger/reconcile"),
        effect="mutating",
        replay_safety="unsafe",
    )
    return http_tool(config, http, source="test", environ={})


async def _harness(database_url: str, tools: dict[str, Any], tenant: str = "acme") -> Harness:
    rules = TenantRules(egress_hosts=["127.0.0.1"], consent_for_mutating_unsafe=False)
    return await make_harness(database_url, tools=tools, policy=PolicyConfig(default=rules))


async def test_an_http_tools_reconcile_url_settles_a_crashed_attempt_without_a_human(
    database_url: str, server: LocalHttpServer, http: httpx.AsyncClient
) -> None:
    tools = {"ledger.post": _ledger(server, http)}
    harness = await _harness(database_url, tools)
    try:
        server.then(Hang())  # the call reaches the ledger; its process dies waiting
        server.then(Respond(200, {"outcome": "completed", "evidence": "ledger line 42"}))
        reached = await wait_for(lambda: len(server.received) >= 1)
        crashed = await attempt_then_crash(
            harness, "ledger.post", PAYLOAD, causal_id="c-ledger", running=reached
        )
        assert crashed is None

        await harness.lifecycle.sweeper.sweep()

        call, asked = server.received[:2]
        assert asked.path == "/ledger/reconcile"
        assert asked.headers["idempotency-key"] == call.headers["idempotency-key"]
        assert asked.json() == {
            "call_id": call.json()["call_id"],
            "idempotency_key": call.json()["idempotency_key"],
            "tool": "ledger.post",
        }
        answer = await harness.execute("ledger.post", PAYLOAD, causal_id="c-ledger")
        assert answer.outcome == "deduplicated"
        assert answer.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
        assert answer.resolution is not None
        assert answer.resolution.boundary is EffectBoundary.EFFECT_COMPLETED
        assert answer.resolution.resolved_by == "reconciler:ledger.post"
        assert answer.resolution.evidence == "ledger line 42"
        assert len(server.received) == 2  # nothing ran again
        report = await harness.lifecycle.evidence.verify(TenantId("acme"), RunId(harness.run_id))
        assert report.ok
    finally:
        await harness.close()


def test_a_reconcile_url_on_another_host_is_refused() -> None:
    with pytest.raises(ValueError, match="scheme, host and port"):
        HttpToolConfig(
            name="ledger.post",
            description="d",
            url="https://ledger.example.com/post",
            reconcile_url="https://elsewhere.example.com/reconcile",
            effect="mutating",
            replay_safety="unsafe",
        )


HOOKS = Identity(
    tenant_id=TenantId("hooks"),
    principal_id=PrincipalId("agent-h"),
    method="api_key",
    key_id="k_h",
    roles=("agent",),
)
HOOKS_APPROVER = APPROVER.model_copy(update={"tenant_id": TenantId("hooks")})


async def test_a_receiver_down_then_up_gets_every_signed_event_with_its_id(
    database_url: str, server: LocalHttpServer, http: httpx.AsyncClient
) -> None:
    harness = await make_harness(database_url)  # default rule: `append` needs consent
    try:
        asked = await harness.execute("append", {"n": 1}, causal_id="c-n", identity=HOOKS)
        assert asked.confirmation is not None
        await harness.approve(asked.confirmation.id, HOOKS_APPROVER)
        outbox = deliverer(harness, server, http)

        for _ in range(2):
            server.then(Respond(503))
        await outbox.deliver_once()  # the receiver is down: nothing is lost
        down = [verified(r) for r in server.received]
        assert {e["type"] for e in down} == {"confirmation.requested", "confirmation.approved"}
        assert harness.sql(
            "SELECT count(*) FROM notify_outbox WHERE tenant_id = 'hooks' AND state = 'PENDING'"
        ) == [(2,)]

        due_now(harness)
        await outbox.deliver_once()  # up again
        up = [verified(r) for r in server.received[len(down) :]]
        assert sorted(e["id"] for e in up) == sorted(e["id"] for e in down)
        requested = next(e for e in up if e["type"] == "confirmation.requested")
        assert requested["data"]["confirmation_id"] == asked.confirmation.id
        assert requested["links"]["approval"].endswith(f"/confirmations/{asked.confirmation.id}")
        assert harness.sql(
            "SELECT state, delivered_to FROM notify_outbox WHERE tenant_id = 'hooks'"
        ) == [("DELIVERED", ["receiver"]), ("DELIVERED", ["receiver"])]

        due_now(harness)
        await outbox.deliver_once()  # delivered events are not sent again
        assert len(server.received) == len(down) + len(up)
        assert all(forged(r) for r in server.received)
    finally:
        await harness.close()


async def test_an_event_that_never_gets_through_ends_dead_and_visible(
    database_url: str, server: LocalHttpServer, http: httpx.AsyncClient
) -> None:
    harness = await make_harness(database_url)
    try:
        await harness.execute("append", {"n": 2}, causal_id="c-dead", identity=HOOKS)
        outbox = deliverer(harness, server, http, max_attempts=2)
        for _ in range(4):
            server.then(Respond(500))
        for _ in range(2):
            due_now(harness)
            await outbox.deliver_once()
        dead = harness.sql(
            "SELECT event_type, attempts, last_error FROM notify_outbox"
            " WHERE tenant_id = 'hooks' AND state = 'DEAD'"
        )
        assert ("confirmation.requested", 2, "receiver: HTTP 500") in dead
    finally:
        await harness.close()


async def test_an_uncertain_outcome_and_its_resolution_are_notified(
    database_url: str, server: LocalHttpServer, http: httpx.AsyncClient
) -> None:
    from tests.support.lifecycle import crash_during_dispatch

    harness = await make_harness(
        database_url, policy=PolicyConfig(default=TenantRules(consent_for_mutating_unsafe=False))
    )
    try:
        key = await crash_during_dispatch(
            harness, "append", {"n": 3}, causal_id="c-u", identity=HOOKS
        )
        await harness.lifecycle.sweeper.sweep()
        await harness.lifecycle.resolutions.resolve(
            HOOKS_APPROVER, RunId(harness.run_id), key, 1, EffectBoundary.EFFECT_NOT_STARTED, "x"
        )
        due_now(harness)
        await deliverer(harness, server, http).deliver_once()
        events = [verified(r) for r in server.received]
        uncertain = [e for e in events if e["type"] == "effect.uncertain"]
        resolved = [e for e in events if e["type"] == "effect.resolved"]
        assert [e["data"]["idempotency_key"] for e in uncertain] == [key]
        assert uncertain[0]["links"]["resolve"].endswith(f"/attempts/{key}/1/resolve")
        assert [e["data"]["boundary"] for e in resolved] == ["EFFECT_NOT_STARTED"]
    finally:
        await harness.close()
