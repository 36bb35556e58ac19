"""Issue 16 from the arvis command: keys in approver groups, ``arvis resolve`` as the
principal of an API key, and the notification outbox an operator can see."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from arvis.cli import app
from arvis.store.database import PgStore
from arvis.store.keys import PgKeyStore
from tests.support.http import Api, serve_api
from tests.support.lifecycle import crash_during_dispatch, make_harness
from tests.support.unsuretools import RUNS

CONFIG = """
[tools]
factories = ["tests.support.unsuretools:make_tools"]

[policy.default.approvals."probe.unsure"]
approvers = ["payments-leads"]
quorum = 2
"""


@pytest.fixture(scope="module")
async def api(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    """The served app, with two keys of the group a quorum-2 tool names and one outside it."""
    data: Path = tmp_path_factory.mktemp("arvis-ops-cli")
    async with serve_api(database_url, data, config=CONFIG) as served:
        store = await PgStore.open(database_url)
        try:
            keys = PgKeyStore(store.engine, store.ops)
            for name, group in (("lead-a", "payments-leads"), ("lead-b", "payments-leads")):
                _, issued = await keys.create("acme", name, ["approver"], [group])
                served.tokens[f"acme:{name}"] = issued.token
            _, issued = await keys.create("acme", "ops-outsider", ["approver"], ["infra"])
            served.tokens["acme:outsider"] = issued.token
        finally:
            await store.close()
        yield served


@pytest.fixture
def env(api: Api, tmp_path: Path) -> dict[str, str]:
    (tmp_path / "arvis.toml").write_text("")
    return {
        "ARVIS_DATABASE_URL": api.database_url,
        "ARVIS_DATA_DIR": str(tmp_path),
        "ARVIS_CONFIG": str(tmp_path / "arvis.toml"),
        "ARVIS_ENV": "development",
    }


async def _invoke(env: dict[str, str], *args: str) -> Result:
    # The command runs its own event loop, so it runs beside the test's, in a thread.
    return await asyncio.to_thread(CliRunner(env=env).invoke, app, list(args))


async def _ok(env: dict[str, str], *args: str) -> str:
    result = await _invoke(env, *args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


async def test_a_key_created_in_a_group_carries_it(env: dict[str, str]) -> None:
    out = await _ok(
        env,
        "keys",
        "create",
        "--tenant",
        "acme",
        "--principal",
        "lead-x",
        "--role",
        "approver",
        "--group",
        "payments-leads",
        "--group",
        "infra",
    )
    key_id = out.strip().splitlines()[-1].split("_")[1]
    listing = json.loads(await _ok(env, "keys", "list", "--tenant", "acme", "--json"))
    [mine] = [k for k in listing if k["key_id"] == key_id]
    assert mine["groups"] == ["infra", "payments-leads"]


async def test_a_group_name_that_is_not_one_is_refused(env: dict[str, str]) -> None:
    result = await _invoke(
        env,
        "keys",
        "create",
        "--tenant",
        "acme",
        "--principal",
        "p",
        "--role",
        "approver",
        "--group",
        "Payments Leads",
    )
    assert result.exit_code == 2
    assert "not a group name" in result.output


async def test_arvis_resolve_journals_the_resolution_as_the_keys_principal(
    api: Api, env: dict[str, str]
) -> None:
    harness = await make_harness(api.database_url, instance_id="cli-crash")
    try:
        key = await crash_during_dispatch(harness, "write", {"text": "cli"}, causal_id="c-cli")
        await harness.lifecycle.sweeper.sweep()
        args = ("resolve", harness.run_id, key, "1", "--as", "completed", "--evidence", "seen")

        missing = await _invoke(env, *args)
        assert missing.exit_code == 2
        assert "ARVIS_API_KEY" in missing.output
        agent = await _invoke({**env, "ARVIS_API_KEY": api.tokens["acme:agent"]}, *args)
        assert agent.exit_code == 1
        assert "approver" in agent.output

        out = await _ok({**env, "ARVIS_API_KEY": api.tokens["acme:approver"]}, *args, "--json")
        answer = json.loads(out)
        assert (answer["boundary"], answer["resolved_by"]) == (
            "EFFECT_COMPLETED",
            "approver-of-acme",
        )
        again = await _invoke({**env, "ARVIS_API_KEY": api.tokens["acme:approver"]}, *args)
        assert again.exit_code == 1
        assert "resolved already" in again.output
        foreign = await _invoke({**env, "ARVIS_API_KEY": api.tokens["globex:approver"]}, *args)
        assert foreign.exit_code == 1
        assert "no attempt" in foreign.output
    finally:
        await harness.close()


async def test_arvis_resolve_by_an_outsider_does_not_rerun_a_quorum_consent(
    api: Api, env: dict[str, str]
) -> None:
    """Issue 23 from the command line: two leads of a quorum-2 consent approve, the call
    ends uncertain, an approver outside the group resolves it not_started with ``arvis
    resolve``. The re-post waits for a new round of approval instead of running again."""
    payload = {"target": "cli-renew"}
    asked = await api.syscall("probe.unsure", payload, run_id="run-cli-q", causal_id="c-1")
    cid = asked.json()["confirmation"]["id"]
    for lead in ("acme:lead-a", "acme:lead-b"):
        approved = await api.client.post(f"/v1/confirmations/{cid}/approve", headers=api.auth(lead))
        assert approved.status_code == 200, approved.text
    ran = await api.syscall("probe.unsure", payload, run_id="run-cli-q", causal_id="c-1")
    assert ran.json()["boundary"] == "EFFECT_STATE_UNKNOWN"
    key = ran.json()["idempotency_key"]

    out = await _ok(
        {**env, "ARVIS_API_KEY": api.tokens["acme:outsider"]},
        "resolve",
        "run-cli-q",
        key,
        "1",
        "--as",
        "not_started",
        "--evidence",
        "no such request in the far side's log",
    )

    again = await api.syscall("probe.unsure", payload, run_id="run-cli-q", causal_id="c-1")
    assert again.json()["outcome"] == "confirmation_required", again.text
    assert RUNS["cli-renew"] == 1
    assert f"consent {cid} opened round 2: PENDING, 0 of 2 approvals" in out
    assert "waits for its approvers" in out


async def test_arvis_notify_lists_the_outbox_and_revives_dead_events(
    api: Api, env: dict[str, str]
) -> None:
    api.sql(
        "INSERT INTO notify_outbox (tenant_id, event_id, event_type, subject, state, attempts)"
        " VALUES ('acme', 'ev_dead_cli', 'confirmation.requested', '{}', 'DEAD', 12)"
    )
    rows = json.loads(await _ok(env, "notify", "list", "--state", "dead", "--json"))
    assert [r["event_id"] for r in rows if r["event_id"] == "ev_dead_cli"] == ["ev_dead_cli"]
    assert "dead events will be delivered again" in await _ok(env, "notify", "retry")
    # The served instance's deliverer may already have taken it (no webhook wants it).
    [(state, attempts)] = api.sql(
        "SELECT state, attempts FROM notify_outbox WHERE event_id = 'ev_dead_cli'"
    )
    assert (state, attempts) in {("PENDING", 0), ("DELIVERED", 0)}
