"""Issue 27, API parity: ``GET /v1/runs`` (status first, filters, cursor pages) and the
tenant's API keys over HTTP (``GET/POST /v1/keys``, ``POST /v1/keys/{id}/revoke``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from arvis.cli import app
from tests.support.http import Api, serve_api


@pytest.fixture(scope="module")
async def api(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    data: Path = tmp_path_factory.mktemp("arvis-runs")
    async with serve_api(database_url, data) as served:
        yield served


def _problem(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == code


async def _runs(api: Api, who: str = "acme:auditor", **params: Any) -> dict[str, Any]:
    response = await api.client.get("/v1/runs", params=params, headers=api.auth(who))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture(scope="module")
async def runs(api: Api) -> dict[str, str]:
    """One run of each status, by its status."""
    ran = await api.syscall("echo", {"n": 1}, run_id="rl-running", causal_id="c-1")
    assert ran.json()["outcome"] == "executed"
    asked = await api.syscall(
        "files.append", {"path": "a.txt", "line": "x"}, run_id="rl-waiting", causal_id="c-1"
    )
    assert asked.json()["outcome"] == "confirmation_required"
    refused = await api.syscall(
        "files.read", {"path": "../etc"}, run_id="rl-refused", causal_id="c"
    )
    assert refused.json()["outcome"] == "refused", refused.text
    await api.syscall("echo", {"n": 2}, run_id="rl-flagged", causal_id="c-1")
    api.sql("UPDATE runs SET audit_incomplete = true WHERE run_id = 'rl-flagged'")
    return {
        "running": "rl-running",
        "waiting_for_consent": "rl-waiting",
        "refused": "rl-refused",
        "audit_incomplete": "rl-flagged",
    }


async def test_runs_are_listed_with_status_principal_tools_and_times(
    api: Api, runs: dict[str, str]
) -> None:
    listed = {r["run_id"]: r for r in (await _runs(api, q="rl-"))["runs"]}
    assert {status: listed[run]["status"] for status, run in runs.items()} == {
        status: status for status in runs
    }
    waiting = listed["rl-waiting"]
    assert waiting["principal"] == "agent-of-acme"
    assert waiting["tools"] == ["files.append"]
    assert waiting["waiting"] == 1
    assert waiting["entries"] == 0
    # A call waiting for consent journals nothing; asking for it is activity all the same.
    assert waiting["last_activity"] >= waiting["started_at"]


async def test_each_filter_selects_and_they_hold_together(api: Api, runs: dict[str, str]) -> None:
    for status, run in runs.items():
        found = await _runs(api, status=status, q="rl-")
        assert [r["run_id"] for r in found["runs"]] == [run]
    by_tool = await _runs(api, tool="files.append", q="rl-")
    assert [r["run_id"] for r in by_tool["runs"]] == ["rl-waiting"]
    assert (await _runs(api, principal="someone-else", q="rl-"))["runs"] == []
    mine = await _runs(api, principal="agent-of-acme", q="rl-")
    assert len(mine["runs"]) == 4
    assert (await _runs(api, started_after="2999-01-01T00:00:00Z"))["runs"] == []
    assert (await _runs(api, active_before="2000-01-01T00:00:00Z"))["runs"] == []
    assert len((await _runs(api, active_after="2000-01-01T00:00:00", q="rl-"))["runs"]) == 4


async def test_a_cursor_pages_through_every_run_once(api: Api, runs: dict[str, str]) -> None:
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await _runs(api, q="rl-", limit=1, **({"cursor": cursor} if cursor else {}))
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(runs.values())
    assert len(seen) == len(set(seen))


async def test_another_tenant_sees_none_of_the_runs(api: Api, runs: dict[str, str]) -> None:
    assert (await _runs(api, "globex:auditor", q="rl-"))["runs"] == []
    assert (await _runs(api, "globex:admin", q="rl-"))["runs"] == []


@pytest.mark.parametrize(
    "params",
    [
        {"status": "finished"},
        {"cursor": "not-a-cursor"},
        {"cursor": "x" * 600},
        {"limit": 0},
        {"limit": 201},
        {"started_after": "yesterday"},
        {"q": "r" * 129},
        {"tool": "t" * 257},
    ],
    ids=lambda p: next(iter(p)),
)
async def test_a_bad_filter_is_a_validation_problem(api: Api, params: dict[str, Any]) -> None:
    response = await api.client.get("/v1/runs", params=params, headers=api.auth("acme:auditor"))
    _problem(response, 422, "validation_error")


async def test_keys_are_created_listed_used_and_revoked_over_http(api: Api) -> None:
    admin = api.auth("acme:admin")
    made = await api.client.post(
        "/v1/keys",
        json={"principal": "ci-bot", "roles": ["agent"], "groups": ["payments-leads"]},
        headers=admin,
    )
    assert made.status_code == 201, made.text
    assert made.headers["cache-control"] == "no-store"
    key, token = made.json(), made.json()["token"]
    assert (key["state"], key["tenant_id"], key["groups"]) == ("active", "acme", ["payments-leads"])
    assert key["last_used_at"] is None
    used = await api.client.get("/v1/tools", headers={"Authorization": f"Bearer {token}"})
    assert used.status_code == 200

    listed = await api.client.get("/v1/keys", headers=admin)
    assert listed.status_code == 200
    assert "secret_hash" not in listed.text
    assert token.split("_", 2)[2] not in listed.text  # the whole secret (it may hold "_")
    mine = [k for k in listed.json()["keys"] if k["key_id"] == key["key_id"]]
    assert [k["state"] for k in mine] == ["active"]
    assert all(k["tenant_id"] == "acme" for k in listed.json()["keys"])

    theirs = await api.client.post(
        f"/v1/keys/{key['key_id']}/revoke", headers=api.auth("globex:admin")
    )
    _problem(theirs, 404, "not_found")
    assert (
        key["key_id"]
        not in (await api.client.get("/v1/keys", headers=api.auth("globex:admin"))).text
    )
    revoked = await api.client.post(f"/v1/keys/{key['key_id']}/revoke", headers=admin)
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["state"] == "revoked"
    again = await api.client.post(f"/v1/keys/{key['key_id']}/revoke", headers=admin)
    assert again.status_code == 200, again.text
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]
    refused = await api.client.get("/v1/tools", headers={"Authorization": f"Bearer {token}"})
    _problem(refused, 401, "unauthenticated")


async def test_a_key_records_when_it_was_last_used_once_a_minute_at_most(api: Api) -> None:
    made = await api.client.post(
        "/v1/keys",
        json={"principal": "watched", "roles": ["auditor"]},
        headers=api.auth("acme:admin"),
    )
    key_id, token = made.json()["key_id"], made.json()["token"]
    for _ in range(3):
        await api.client.get("/v1/runs", headers={"Authorization": f"Bearer {token}"})
    kernel = api.app.state.kernel
    await kernel.keys.settle_touches()
    rows = api.sql("SELECT last_used_at FROM api_keys WHERE key_id = %s", key_id)
    assert rows[0][0] is not None
    first = rows[0][0]
    await api.client.get("/v1/runs", headers={"Authorization": f"Bearer {token}"})
    await kernel.keys.settle_touches()
    assert api.sql("SELECT last_used_at FROM api_keys WHERE key_id = %s", key_id)[0][0] == first


@pytest.mark.parametrize(
    "body",
    [
        {"principal": "", "roles": ["agent"]},
        {"principal": "x", "roles": []},
        {"principal": "x", "roles": ["root"]},
        {"principal": "x", "roles": ["agent"], "groups": ["Not A Group"]},
        {"principal": "x\u0000y", "roles": ["agent"]},
        {"principal": "x", "roles": ["agent"], "tenant_id": "globex"},
    ],
    ids=["empty-principal", "no-roles", "unknown-role", "bad-group", "nul", "tenant"],
)
async def test_a_bad_key_body_is_a_validation_problem(api: Api, body: dict[str, Any]) -> None:
    response = await api.client.post("/v1/keys", json=body, headers=api.auth("acme:admin"))
    _problem(response, 422, "validation_error")


async def test_arvis_runs_prints_what_get_v1_runs_answers(
    api: Api, runs: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "arvis.toml").write_text("")
    runner = CliRunner(
        env={
            "ARVIS_DATABASE_URL": api.database_url,
            "ARVIS_DATA_DIR": str(tmp_path),
            "ARVIS_CONFIG": str(tmp_path / "arvis.toml"),
            "ARVIS_ENV": "development",
        }
    )

    def run(*args: str) -> Result:
        return runner.invoke(app, ["runs", "--tenant", "acme", "--q", "rl-", *args])

    printed = json.loads((await asyncio.to_thread(run, "--json")).output)
    assert printed == await _runs(api, q="rl-")
    table = (await asyncio.to_thread(run, "--status", "waiting_for_consent")).output
    assert "waiting_for_consent  rl-waiting  agent-of-acme  files.append" in table
    assert "rl-running" not in table
    paged = (await asyncio.to_thread(run, "--limit", "1")).output
    assert "more: --cursor " in paged
    bad = await asyncio.to_thread(run, "--status", "finished")
    assert bad.exit_code == 2
    assert "status: one of" in bad.output
