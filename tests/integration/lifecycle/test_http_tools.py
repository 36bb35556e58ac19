"""Remote HTTP tools through SyscallHandler, against a real local HTTP server (DESIGN §3)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.tools import ToolHost, build_tool_set, describe_plan
from arvis.tools.base import Tool
from tests.support.httpserver import Hang, LocalHttpServer, Respond, refusing_port
from tests.support.lifecycle import AGENT, Harness, ScriptedTool, make_harness, tool_definition

LOCAL = PolicyConfig(default=TenantRules(egress_hosts=["127.0.0.1"]))
ELSEWHERE = PolicyConfig(default=TenantRules(egress_hosts=["api.example.com", "*.example.org"]))


def entry(url: str, **fields: Any) -> dict[str, Any]:
    declared: dict[str, Any] = {
        "name": "crm.update",
        "description": "Update a CRM record.",
        "url": url,
        "effect": "mutating",
        "replay_safety": "idempotent",
    }
    declared.update(fields)
    return declared


def lookup(url: str) -> dict[str, Any]:
    return entry(url, name="crm.lookup", effect="read_only", replay_safety="safe")


@pytest.fixture
async def server() -> AsyncIterator[LocalHttpServer]:
    async with LocalHttpServer() as running:
        yield running


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as shared:
        yield shared


def declared(
    tmp_path: Path,
    client: httpx.AsyncClient,
    entries: Sequence[dict[str, Any]],
    environ: Mapping[str, str] | None = None,
) -> list[Tool]:
    """The ``[[tools.http]]`` entries as start-up builds them, from an injected environment."""
    host = ToolHost(sandbox_dir=tmp_path / "sandbox", http=client, environ=environ or {})
    return build_tool_set({"builtins": False, "http": list(entries)}, host)


@asynccontextmanager
async def governed(
    database_url: str,
    tools: Sequence[Tool],
    policy: PolicyConfig = LOCAL,
    scripted: dict[str, ScriptedTool] | None = None,
) -> AsyncIterator[Harness]:
    harness = await make_harness(
        database_url, tools=scripted or {}, extra_tools=tools, policy=policy
    )
    try:
        yield harness
    finally:
        await harness.close()


async def test_a_completed_call_carries_its_idempotency_key_and_sealed_context(
    database_url: str, tmp_path: Path, client: httpx.AsyncClient, server: LocalHttpServer
) -> None:
    server.then(Respond(200, {"value": {"updated": 7}}))
    tools = declared(tmp_path, client, [entry(server.url("/crm"))])
    async with governed(database_url, tools) as harness:
        result = await harness.execute("crm.update", {"id": 7}, causal_id="c-http-1")
        plan_id = harness.lifecycle.plans.current.plan_id
        instance_id = harness.lifecycle.lease.name  # the admitting process's lease

    assert (result.outcome, result.boundary) == ("executed", EffectBoundary.EFFECT_COMPLETED)
    assert result.result == {"updated": 7}
    [request] = server.received
    assert (request.method, request.path) == ("POST", "/crm")
    assert request.headers["idempotency-key"] == result.idempotency_key
    body = request.json()
    assert body["idempotency_key"] == result.idempotency_key
    assert body["payload"] == {"id": 7}
    assert body["tool"] == "crm.update"
    assert body["context"] == {
        "tenant_id": AGENT.tenant_id,
        "principal_id": AGENT.principal_id,
        "auth_method": AGENT.method,
        "key_id": AGENT.key_id,
        "roles": list(AGENT.roles),
        "run_id": result.run_id,
        "causal_id": "c-http-1",
        "plan_id": plan_id,
        "instance_id": instance_id,
    }


async def test_202_accepted_is_journaled_as_started_with_its_receipt(
    database_url: str, tmp_path: Path, client: httpx.AsyncClient, server: LocalHttpServer
) -> None:
    server.then(Respond(202, {"job": "j-42"}))
    tools = declared(tmp_path, client, [entry(server.url())])
    async with governed(database_url, tools) as harness:
        result = await harness.execute("crm.update", {"id": 4})
        [(boundary,)] = harness.sql(
            "SELECT boundary FROM journal_entries WHERE run_id = %s AND position = %s",
            result.run_id,
            result.journal_position,
        )

    assert result.boundary is EffectBoundary.EFFECT_STARTED
    assert result.result == {"job": "j-42"}
    assert boundary == "EFFECT_STARTED"
    assert len(server.received) == 1


async def test_a_refused_connection_did_not_start_the_effect(
    database_url: str, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    with refusing_port() as port:
        tools = declared(tmp_path, client, [entry(f"http://127.0.0.1:{port}/crm")])
        async with governed(database_url, tools) as harness:
            result = await harness.execute("crm.update", {"id": 1})
            states = harness.capability_states(result.idempotency_key)

    assert result.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert result.problem is not None
    assert result.problem["code"] == "connect_failed"
    assert states == ["CONSUMED"]


async def test_a_hung_endpoint_leaves_the_effect_state_unknown(
    database_url: str, tmp_path: Path, client: httpx.AsyncClient, server: LocalHttpServer
) -> None:
    server.then(Hang())
    tools = declared(tmp_path, client, [entry(server.url(), timeout_s=0.3)])
    async with governed(database_url, tools) as harness:
        result = await harness.execute("crm.update", {"id": 2})

    assert result.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    assert result.problem is not None
    assert result.problem["code"] == "remote_unknown"
    assert len(server.received) == 1  # it was sent: nobody knows whether it took effect


@pytest.mark.parametrize("make_entry", [entry, lookup], ids=["mutating", "read_only"])
async def test_egress_is_checked_by_the_configured_endpoints_host(
    database_url: str,
    tmp_path: Path,
    client: httpx.AsyncClient,
    server: LocalHttpServer,
    make_entry: Any,
) -> None:
    tool = make_entry(server.url())
    tools = declared(tmp_path, client, [tool])
    async with governed(database_url, tools, policy=ELSEWHERE) as harness:
        # The payload's url names an allowed host; the call would still go to 127.0.0.1.
        result = await harness.execute(tool["name"], {"url": "https://api.example.com/"})
        minted = harness.capability_states(result.idempotency_key)

    assert (result.outcome, result.reason) == ("refused", "egress_denied")
    assert result.boundary is EffectBoundary.PRE_EFFECT_REFUSAL
    assert result.detail is not None
    assert "127.0.0.1" in result.detail
    assert minted == []
    assert server.connections == 0


async def test_a_retired_plans_tool_is_checked_by_the_endpoint_that_will_run_it(
    database_url: str, tmp_path: Path, client: httpx.AsyncClient, server: LocalHttpServer
) -> None:
    marker = {"old.only": ScriptedTool(tool_definition("old.only"))}
    before = declared(tmp_path, client, [lookup(server.url())])
    async with governed(database_url, before, scripted=marker) as old:
        bound = await old.execute("old.only", {})
        run_id, old_plan = old.run_id, old.lifecycle.plans.current.plan_id
    assert bound.outcome == "executed"

    # The next deployment moves crm.lookup elsewhere; its definition (and so its
    # fingerprint) is unchanged, so the old plan's runs get the new endpoint.
    after = declared(tmp_path, client, [lookup("http://crm.elsewhere.test/lookup")])
    async with governed(database_url, after) as new:
        assert new.lifecycle.plans.current.plan_id != old_plan
        result = await new.execute("crm.lookup", {}, run_id=run_id)

    assert (result.outcome, result.reason) == ("refused", "egress_denied")
    assert result.detail is not None
    assert "crm.elsewhere.test" in result.detail


async def test_headers_env_values_reach_the_endpoint_and_nothing_else(
    database_url: str, tmp_path: Path, client: httpx.AsyncClient, server: LocalHttpServer
) -> None:
    secret = "Bearer s3cr3t-crm-token"
    tool = entry(
        server.url(),
        headers={"X-Zone": "eu"},
        headers_env={"Authorization": "CRM_TOKEN"},
    )
    tools = declared(tmp_path, client, [tool], environ={"CRM_TOKEN": secret})
    async with governed(database_url, tools) as harness:
        result = await harness.execute("crm.update", {"id": 3})
        journal = harness.sql(
            "SELECT body::text FROM journal_entries WHERE run_id = %s", result.run_id
        )
        listed = repr(describe_plan(harness.lifecycle.plans.current))

    assert result.boundary is EffectBoundary.EFFECT_COMPLETED
    [request] = server.received
    assert request.headers["authorization"] == secret
    assert request.headers["x-zone"] == "eu"
    assert journal
    assert all("s3cr3t" not in row[0] for row in journal)
    assert "s3cr3t" not in listed
    assert "s3cr3t" not in repr(tools)
