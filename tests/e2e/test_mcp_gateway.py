"""ARVIS as an MCP server: the official SDK's client over real streamable HTTP.

List, run a read-only tool, refusals, consent with and without elicitation,
dedupe, protocol errors, tenant isolation and bad keys; everything journaled
and verifiable afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import MCPError
from mcp.client.context import ClientRequestContext

from arvis.domain.identity import Role
from arvis.store.database import PgStore
from arvis.store.keys import PgKeyStore
from tests.support import plantools
from tests.support.mcp_client import Served, meta_of, serve_arvis, text_of

pytestmark = pytest.mark.db

CAUSAL = "arvis.dev/causal_id"
RUN = "arvis.dev/run_id"
PUBLIC = "https://arvis.example.test"
CONFIG = f"""
[tools]
factories = ["tests.support.plantools:make_tools"]

[policy.default]
deny_tools = ["files.read"]
no_consent_tools = ["plan.unsafe"]

[notify]
base_url = "{PUBLIC}"
"""


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data_dir: Path = tmp_path_factory.mktemp("arvis-mcp")
    with serve_arvis(database_url, data_dir, CONFIG) as running:
        yield running


async def test_a_missing_bad_or_revoked_key_is_401_and_a_key_without_agent_is_403(
    served: Served,
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=served.url) as http:
        missing = await http.post("/mcp", json=body, headers=headers)
        bad = await http.post(
            "/mcp", json=body, headers={**headers, "Authorization": "Bearer arvis_nope"}
        )
        approver = await http.post(
            "/mcp", json=body, headers={**headers, **served.auth("acme:approver")}
        )
    assert (missing.status_code, bad.status_code) == (401, 401)
    assert missing.json()["code"] == "unauthenticated"
    assert missing.headers["www-authenticate"] == "Bearer"
    assert approver.status_code == 403
    assert approver.json()["code"] == "forbidden_role"
    async with httpx.AsyncClient(base_url=served.url) as http:
        stream = await http.get("/mcp", headers={"Accept": "text/event-stream"})
        agent_stream = await http.get(
            "/mcp", headers={"Accept": "text/event-stream", **served.auth("acme:agent")}
        )
    assert stream.status_code == 401
    assert (agent_stream.status_code, agent_stream.headers["allow"]) == (405, "POST")

    store = await PgStore.open(served.database_url)
    try:
        keys = PgKeyStore(store.engine, store.ops)
        _, issued = await keys.create("acme", "short-lived", ["agent"])
        served.tokens["acme:revoked"] = issued.token
        async with served.client("acme:revoked") as client:
            assert (await client.list_tools()).tools
        await keys.revoke(issued.key_id)
    finally:
        await store.close()
    async with httpx.AsyncClient(base_url=served.url) as http:
        revoked = await http.post(
            "/mcp", json=body, headers={**headers, **served.auth("acme:revoked")}
        )
    assert revoked.status_code == 401
    assert revoked.json()["code"] == "unauthenticated"


async def test_tools_list_answers_the_plan_with_hints_and_never_its_fingerprints(
    served: Served,
) -> None:
    async with served.client() as client:
        listed = await client.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    plan = (await served.api("GET", "/v1/tools", "acme:agent")).json()
    assert set(tools) == {tool["name"] for tool in plan["tools"]}
    echo, append, write = tools["echo"], tools["files.append"], tools["files.write"]
    assert echo.annotations is not None
    assert (echo.annotations.read_only_hint, echo.annotations.idempotent_hint) == (True, True)
    assert append.annotations is not None
    assert append.annotations.destructive_hint is True
    assert append.annotations.idempotent_hint is False
    assert write.annotations is not None
    assert (write.annotations.destructive_hint, write.annotations.idempotent_hint) == (False, True)
    wire = listed.model_dump_json()
    assert plan["plan_id"] not in wire
    assert all(tool["fingerprint"] not in wire for tool in plan["tools"])


async def test_a_read_only_call_runs_once_per_call_and_lands_in_a_journal_the_client_can_find(
    served: Served,
) -> None:
    async with served.client() as client:
        first = await client.call_tool("echo", {"hello": "world"})
        second = await client.call_tool("echo", {"hello": "world"})
    assert first.is_error is False
    assert first.structured_content == {"hello": "world"}
    meta = meta_of(first)
    assert meta["arvis.dev/outcome"] == "executed"
    assert meta["arvis.dev/boundary"] == "EFFECT_COMPLETED"
    assert meta["arvis.dev/attempt"] == 1
    # The principal's run, whatever its key or the plan (docs/mcp.md).
    assert meta["arvis.dev/run_id"] == "mcp:agent-of-acme"
    # A read has nothing to deduplicate: each call is its own decision.
    assert meta_of(second)["arvis.dev/outcome"] == "executed"
    assert meta_of(second)["arvis.dev/causal_id"] != meta["arvis.dev/causal_id"]
    entries = await served.journal(meta["arvis.dev/run_id"])
    by_position = {entry["position"]: entry for entry in entries}
    recorded = by_position[meta["arvis.dev/journal_position"]]
    assert recorded["idempotency_key"] == meta["arvis.dev/idempotency_key"]
    assert recorded["body"]["result"] == {"hello": "world"}


async def test_consent_without_elicitation_says_who_approves_then_runs_once_then_the_record(
    served: Served,
) -> None:
    arguments = {"path": "ledger.txt", "line": "charge 10"}
    async with served.client() as client:
        asked = await client.call_tool("files.append", arguments)
        assert asked.is_error is True
        meta = meta_of(asked)
        assert meta["arvis.dev/outcome"] == "confirmation_required"
        confirmation = meta["arvis.dev/confirmation_id"]
        assert "approver role in tenant 'acme' other than you" in text_of(asked)
        assert confirmation in text_of(asked)
        again = await client.call_tool("files.append", arguments)
        assert meta_of(again)["arvis.dev/confirmation_id"] == confirmation

        await served.approve(confirmation)
        ran = await client.call_tool("files.append", arguments)
        repeated = await client.call_tool("files.append", arguments)
    assert ran.is_error is False
    assert meta_of(ran)["arvis.dev/outcome"] == "executed"
    assert meta_of(repeated)["arvis.dev/outcome"] == "deduplicated"
    assert repeated.structured_content == ran.structured_content
    assert (
        meta_of(repeated)["arvis.dev/journal_position"]
        == meta_of(ran)["arvis.dev/journal_position"]
    )
    runs = [
        entry
        for entry in await served.journal(meta["arvis.dev/run_id"])
        if entry["causal_id"] == meta["arvis.dev/causal_id"] and entry["kind"] == "execution"
    ]
    assert len(runs) == 1
    assert served.sandbox_text("ledger.txt") == "charge 10\n"  # one effect, however many calls


async def test_consent_with_url_elicitation_sends_the_client_to_the_approval_and_resumes_it(
    served: Served,
) -> None:
    asked: list[types.ElicitRequestURLParams] = []

    async def approve_when_asked(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        asked.append(params)
        confirmation = params.url.removeprefix(f"{PUBLIC}/console/confirmations/")
        route = f"/v1/confirmations/{confirmation}/approve"
        response = await served.api("POST", route, "acme:approver")
        assert response.status_code == 200, response.text
        return types.ElicitResult(action="accept")

    arguments = {"path": "elicited.txt", "line": "once"}
    async with served.client(elicitation=approve_when_asked) as client:
        result = await client.call_tool("files.append", arguments)
        repeated = await client.call_tool("files.append", arguments)
    assert len(asked) == 1
    assert asked[0].url.startswith(f"{PUBLIC}/console/confirmations/cnf_")
    assert result.is_error is False, text_of(result)
    assert meta_of(result)["arvis.dev/outcome"] == "executed"
    assert meta_of(repeated)["arvis.dev/outcome"] == "deduplicated"
    assert served.sandbox_text("elicited.txt") == "once\n"


async def test_a_declined_elicitation_runs_nothing_and_leaves_the_confirmation_open(
    served: Served,
) -> None:
    async def decline(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    arguments = {"path": "declined.txt", "line": "never"}
    async with served.client(elicitation=decline) as client:
        result = await client.call_tool("files.append", arguments)
    assert result.is_error is True
    meta = meta_of(result)
    assert meta["arvis.dev/outcome"] == "confirmation_required"
    pending = await served.api("GET", "/v1/confirmations?state=PENDING", "acme:approver")
    assert meta["arvis.dev/confirmation_id"] in {c["id"] for c in pending.json()["confirmations"]}
    executions = [
        entry
        for entry in await served.journal(meta["arvis.dev/run_id"])
        if entry["causal_id"] == meta["arvis.dev/causal_id"]
    ]
    assert executions == []


async def test_a_denied_confirmation_answers_a_refusal_and_never_runs(served: Served) -> None:
    arguments = {"path": "denied.txt", "line": "no"}
    async with served.client() as client:
        asked = await client.call_tool("files.append", arguments)
        confirmation = meta_of(asked)["arvis.dev/confirmation_id"]
        denied = await served.api(
            "POST", f"/v1/confirmations/{confirmation}/deny", "acme:approver", json={"reason": "no"}
        )
        assert denied.status_code == 200, denied.text
        after = await client.call_tool("files.append", arguments)
    assert after.is_error is True
    assert meta_of(after)["arvis.dev/reason"] == "confirmation_denied"
    assert not (served.data_dir / "sandbox" / "denied.txt").exists()


async def test_a_refusal_is_a_tool_error_with_its_reason_and_is_journaled(served: Served) -> None:
    async with served.client() as client:
        refused = await client.call_tool("files.read", {"path": "ledger.txt"})
    assert refused.is_error is True
    meta = meta_of(refused)
    assert (meta["arvis.dev/outcome"], meta["arvis.dev/reason"]) == ("refused", "policy_denied")
    assert meta["arvis.dev/boundary"] == "PRE_EFFECT_REFUSAL"
    assert "refused" in text_of(refused)
    assert "Nothing ran" in text_of(refused)
    entries = await served.journal(meta["arvis.dev/run_id"])
    assert any(
        entry["position"] == meta["arvis.dev/journal_position"] and entry["kind"] == "refusal"
        for entry in entries
    )


async def test_an_unknown_tool_is_a_protocol_error_journaled_as_a_refusal(served: Served) -> None:
    async with served.client() as client:
        listed = await client.list_tools()
        run_id = meta_of(await client.call_tool("echo", {}))["arvis.dev/run_id"]
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nope.missing", {"a": 1})
    assert unknown.value.error.code == types.INVALID_PARAMS
    assert "Unknown tool" in unknown.value.error.message
    assert "nope.missing" not in {tool.name for tool in listed.tools}
    last = (await served.journal(run_id))[-1]
    assert (last["kind"], last["body"]["reason"]) == ("refusal", "unknown_tool")


async def test_arguments_that_fail_the_schema_are_a_tool_error_the_model_can_correct(
    served: Served,
) -> None:
    async with served.client() as client:
        result = await client.call_tool("files.write", {"path": 7})
    assert result.is_error is True
    assert meta_of(result)["arvis.dev/reason"] == "payload_invalid"
    assert meta_of(result)["arvis.dev/journal_position"] is not None


async def test_ids_come_from_meta_else_from_the_headers(served: Served) -> None:
    meta = {"arvis.dev/run_id": "mcp-explicit-run", "arvis.dev/causal_id": "step-1"}
    async with served.client() as client:
        by_meta = await client.call_tool("echo", {"n": 1}, meta=meta)
    headers = {"ARVIS-Run-Id": "mcp-header-run", "ARVIS-Causal-Id": "step-1"}
    async with served.client(headers=headers) as client:
        by_header = await client.call_tool("echo", {"n": 2})
        with pytest.raises(MCPError) as bad:
            await client.call_tool("echo", {}, meta={"arvis.dev/run_id": "not a valid id"})
    assert (meta_of(by_meta)["arvis.dev/run_id"], meta_of(by_meta)["arvis.dev/causal_id"]) == (
        "mcp-explicit-run",
        "step-1",
    )
    assert meta_of(by_header)["arvis.dev/run_id"] == "mcp-header-run"
    assert bad.value.error.code == types.INVALID_PARAMS


async def test_another_tenant_never_sees_or_resumes_a_tenants_decisions(served: Served) -> None:
    ids = {"arvis.dev/run_id": "mcp-shared-name", "arvis.dev/causal_id": "write-1"}
    arguments = {"path": "tenant.txt", "content": "acme's"}
    async with served.client("acme:agent") as acme:
        mine = await acme.call_tool("files.write", arguments, meta=ids)
        asked = await acme.call_tool(
            "files.append", {"path": "t.txt", "line": "x"}, meta={**ids, CAUSAL: "append-1"}
        )
        own = await acme.call_tool("echo", {"only": "acme"})
    async with served.client("globex:agent") as globex:
        theirs = await globex.call_tool("files.write", arguments, meta=ids)
    assert meta_of(mine)["arvis.dev/outcome"] == "executed"
    # Same run id, causal id and payload in another tenant: its own decision, run afresh.
    assert meta_of(theirs)["arvis.dev/outcome"] == "executed"
    assert (
        meta_of(theirs)["arvis.dev/idempotency_key"] != meta_of(mine)["arvis.dev/idempotency_key"]
    )
    confirmation = meta_of(asked)["arvis.dev/confirmation_id"]
    stranger = await served.api(
        "POST", f"/v1/confirmations/{confirmation}/approve", "globex:approver"
    )
    assert stranger.status_code == 404
    acme_default_run = meta_of(own)["arvis.dev/run_id"]
    hidden = await served.api("GET", f"/v1/runs/{acme_default_run}/journal", "globex:auditor")
    assert hidden.status_code == 404
    acme_entries = await served.journal("mcp-shared-name", "acme:auditor")
    globex_entries = await served.journal("mcp-shared-name", "globex:auditor")
    assert [e["idempotency_key"] for e in globex_entries] == [
        meta_of(theirs)["arvis.dev/idempotency_key"]
    ]
    assert meta_of(theirs)["arvis.dev/idempotency_key"] not in {
        e["idempotency_key"] for e in acme_entries
    }


async def test_a_handshake_era_client_gets_the_same_governance(served: Served) -> None:
    async def never(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        raise AssertionError("a 2025 client is never sent an input_required answer")

    async with served.client(mode="legacy", elicitation=never) as client:
        assert client.protocol_version.startswith("2025")
        ran = await client.call_tool("echo", {"legacy": True})
        asked = await client.call_tool("files.append", {"path": "legacy.txt", "line": "x"})
    assert ran.structured_content == {"legacy": True}
    assert meta_of(ran)["arvis.dev/outcome"] == "executed"
    assert asked.is_error is True
    assert meta_of(asked)["arvis.dev/outcome"] == "confirmation_required"


async def _key(served: Served, who: str, principal: str, *roles: Role) -> None:
    """One more key of tenant acme, for ``principal``, as ``served.tokens[who]``."""
    store = await PgStore.open(served.database_url)
    try:
        _, issued = await PgKeyStore(store.engine, store.ops).create(
            "acme", principal, list(roles or ["agent"])
        )
    finally:
        await store.close()
    served.tokens[who] = issued.token


async def test_the_approval_link_is_the_configured_address_never_the_requests_host(
    served: Served,
) -> None:
    async with served.client(headers={"Host": "evil.example"}) as client:
        asked = await client.call_tool("files.append", {"path": "host.txt", "line": "x"})
    confirmation = meta_of(asked)["arvis.dev/confirmation_id"]
    assert f"{PUBLIC}/console/confirmations/{confirmation}" in text_of(asked)
    assert "evil.example" not in text_of(asked)
    # One sentence after another, each starting with a capital.
    assert "nothing ran. A principal with the approver role" in text_of(asked)


async def test_a_default_run_is_its_principals_and_nobody_else_can_take_or_read_it(
    served: Served,
) -> None:
    await _key(served, "alice", "alice")
    await _key(served, "alice:rotated", "alice")
    await _key(served, "bob", "bob")
    arguments = {"path": "alice.txt", "line": "pay 10"}
    alices = "mcp:alice"  # docs/mcp.md: the default run of principal alice
    # Bob takes Alice's default run first, and her decision's default causal id with it.
    async with served.client("bob") as bob:
        with pytest.raises(MCPError) as squatted:
            await bob.call_tool("files.append", arguments, meta={RUN: alices})
    assert squatted.value.error.data == {"code": "identity_mismatch"}
    posted = await served.api(
        "POST",
        "/v1/syscalls",
        "bob",
        json={
            "name": "tool.execute",
            "run_id": alices,
            "causal_id": "files.append:x",
            "decision": {"tool": "files.append", "payload": arguments},
        },
    )
    assert (posted.status_code, posted.json()["code"]) == (403, "identity_mismatch")
    assert ("acme", alices) not in served.runs()

    # Alice is not locked out: her consent is hers, her call runs once.
    async with served.client("alice") as alice:
        asked = await alice.call_tool("files.append", arguments)
        assert meta_of(asked)[RUN] == alices
        await served.approve(meta_of(asked)["arvis.dev/confirmation_id"])
        ran = await alice.call_tool("files.append", arguments)
    assert meta_of(ran)["arvis.dev/outcome"] == "executed", text_of(ran)
    # Another key of hers is the same principal: the same run, the recorded result.
    async with served.client("alice:rotated") as rotated:
        again = await rotated.call_tool("files.append", arguments)
    assert meta_of(again)["arvis.dev/outcome"] == "deduplicated"
    assert meta_of(again)[RUN] == alices
    assert served.sandbox_text("alice.txt") == "pay 10\n"

    # Her run exists now: Bob can neither post into it nor replay it; an auditor can.
    async with served.client("bob") as bob:
        with pytest.raises(MCPError) as refused:
            await bob.call_tool("files.append", arguments, meta={RUN: alices})
    assert refused.value.error.data == {"code": "identity_mismatch"}
    assert "pay 10" not in refused.value.error.message
    replayed = await served.api("POST", f"/v1/runs/{alices}/replay", "bob")
    assert (replayed.status_code, replayed.json()["code"]) == (403, "identity_mismatch")
    assert (await served.api("POST", f"/v1/runs/{alices}/replay", "alice")).status_code == 200
    assert (
        await served.api("POST", f"/v1/runs/{alices}/replay", "acme:auditor")
    ).status_code == 200
    assert [e["kind"] for e in await served.journal(alices)] == [
        "confirmation",
        "execution",
    ]


async def test_an_uncertain_call_resolved_completed_answers_the_resolution(
    served: Served,
) -> None:
    arguments = {"mode": "unknown", "n": 1}
    async with served.client() as client:
        uncertain = await client.call_tool("plan.unsafe", arguments)
        meta = meta_of(uncertain)
        assert meta["arvis.dev/boundary"] == "EFFECT_STATE_UNKNOWN"
        assert "Do NOT retry" in text_of(uncertain)
        route = (
            f"/v1/runs/{meta[RUN]}/attempts/{meta['arvis.dev/idempotency_key']}/"
            f"{meta['arvis.dev/attempt']}/resolve"
        )
        resolved = await served.api(
            "POST", route, "acme:approver", json={"as": "completed", "evidence": "ticket 42"}
        )
        assert resolved.status_code == 201, resolved.text
        after = await client.call_tool("plan.unsafe", arguments)
    assert after.is_error is False, text_of(after)
    assert meta_of(after)["arvis.dev/outcome"] == "deduplicated"
    assert meta_of(after)["arvis.dev/resolution"]["boundary"] == "EFFECT_COMPLETED"
    assert "resolved it as completed" in text_of(after)
    assert "ticket 42" in text_of(after)
    assert "Nobody knows" not in text_of(after)
    assert plantools.calls(served.data_dir / "sandbox", "plan.unsafe") == 1


def _plan_config(factory: str) -> str:
    return f"""
[tools]
factories = ["tests.support.plantools:{factory}"]

[policy.default]
no_consent_tools = ["plan.unsafe"]
"""


async def test_a_plan_change_between_two_starts_keeps_every_decided_action_decided(
    database_url: str, tmp_path: Path
) -> None:
    sandbox = tmp_path / "sandbox"
    with serve_arvis(database_url, tmp_path, _plan_config("make_tools")) as first:
        await _key(first, "planner", "planner")
        async with first.client("planner") as client:
            uncertain = await client.call_tool("plan.unsafe", {"mode": "unknown"})
            done = await client.call_tool("plan.unsafe", {"mode": "ok"})
            failed = await client.call_tool("plan.retry", {"mode": "failed"})
        token = first.tokens["planner"]
    assert meta_of(uncertain)["arvis.dev/boundary"] == "EFFECT_STATE_UNKNOWN"
    assert meta_of(done)["arvis.dev/outcome"] == "executed"
    assert meta_of(failed)["arvis.dev/boundary"] == "EFFECT_FAILED"

    # The next deployment: one tool added, plan.retry's definition changed.
    with serve_arvis(database_url, tmp_path, _plan_config("make_tools_changed")) as second:
        second.tokens["planner"] = token
        async with second.client("planner") as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            still_uncertain = await client.call_tool("plan.unsafe", {"mode": "unknown"})
            still_done = await client.call_tool("plan.unsafe", {"mode": "ok"})
            changed = await client.call_tool("plan.retry", {"mode": "failed"})
            added = await client.call_tool("plan.added", {})
            fresh = await client.call_tool("plan.retry", {"mode": "ok", "n": 2})
    assert "plan.added" in listed
    assert meta_of(still_uncertain)["arvis.dev/reason"] == "retry_prohibited_uncertain"
    assert meta_of(still_done)["arvis.dev/outcome"] == "deduplicated"
    assert (
        meta_of(still_done)["arvis.dev/idempotency_key"]
        == meta_of(done)["arvis.dev/idempotency_key"]
    )
    assert still_done.structured_content == done.structured_content
    assert meta_of(changed)["arvis.dev/reason"] == "plan_retired"
    assert meta_of(changed)["arvis.dev/boundary"] == "PRE_EFFECT_REFUSAL"
    assert meta_of(added)["arvis.dev/outcome"] == "executed"
    assert meta_of(fresh)["arvis.dev/outcome"] == "executed"  # a new decision: current plan
    assert plantools.calls(sandbox, "plan.unsafe") == 2  # once each, never again
    assert plantools.calls(sandbox, "plan.retry") == 2  # the failed one, and the fresh one
    run = meta_of(uncertain)[RUN]
    assert {meta_of(answer)[RUN] for answer in (still_uncertain, still_done, changed, added)} == {
        run
    }


async def test_every_run_the_gateway_wrote_verifies(served: Served) -> None:
    runs = served.runs()
    assert len(runs) >= 4
    for tenant, run_id in runs:
        report = await served.api("GET", f"/v1/runs/{run_id}/verify", f"{tenant}:auditor")
        assert report.status_code == 200
        assert report.json()["ok"] is True, report.json()
