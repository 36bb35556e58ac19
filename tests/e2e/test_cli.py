"""The arvis command over the same database the API serves."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from arvis.cli import app
from tests.support.http import Api


@pytest.fixture
def arvis(api: Api, tmp_path: Path) -> CliRunner:
    (tmp_path / "arvis.toml").write_text("")
    return CliRunner(
        env={
            "ARVIS_DATABASE_URL": api.database_url,
            "ARVIS_DATA_DIR": str(tmp_path),
            "ARVIS_CONFIG": str(tmp_path / "arvis.toml"),
            "ARVIS_ENV": "development",
        }
    )


def _ok(runner: CliRunner, *args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


async def _aok(runner: CliRunner, *args: str) -> str:
    # The command runs its own event loop, so it runs beside the test's, in a thread.
    return await asyncio.to_thread(_ok, runner, *args)


async def _invoke(runner: CliRunner, *args: str) -> Result:
    return await asyncio.to_thread(runner.invoke, app, list(args))


async def test_keys_create_prints_the_token_last_and_it_works_until_revoked(
    api: Api, arvis: CliRunner
) -> None:
    out = await _aok(
        arvis, "keys", "create", "--tenant", "acme", "--principal", "bot", "--role", "agent"
    )
    token = out.strip().splitlines()[-1]
    assert token.startswith("arvis_k")
    headers = {"Authorization": f"Bearer {token}"}
    assert (await api.client.get("/v1/tools", headers=headers)).status_code == 200

    key_id = token.split("_")[1]
    listing = json.loads(await _aok(arvis, "keys", "list", "--tenant", "acme", "--json"))
    assert [k["principal"] for k in listing if k["key_id"] == key_id] == ["bot"]
    assert token.split("_", 2)[2] not in await _aok(arvis, "keys", "list")
    stored = api.sql("SELECT secret_hash FROM api_keys WHERE key_id = %s", key_id)[0][0]
    assert token.split("_", 2)[2] not in stored

    await _aok(arvis, "keys", "revoke", key_id)
    assert (await api.client.get("/v1/tools", headers=headers)).status_code == 401
    again = await _invoke(arvis, "keys", "revoke", key_id)
    assert again.exit_code == 1


def test_keys_create_refuses_an_unknown_role(arvis: CliRunner) -> None:
    result = arvis.invoke(
        app, ["keys", "create", "--tenant", "t", "--principal", "p", "--role", "root"]
    )
    assert result.exit_code == 2


def test_tools_lists_the_built_ins_as_a_table_and_as_json(arvis: CliRunner) -> None:
    rows = json.loads(_ok(arvis, "tools", "--json"))
    assert {"echo", "files.append"} <= {r["name"] for r in rows}
    assert "files.append" in _ok(arvis, "tools")


async def test_tools_json_carries_what_get_v1_tools_answers_for_the_same_plan(
    api: Api, arvis: CliRunner
) -> None:
    rows = json.loads(await _aok(arvis, "tools", "--json"))
    served = (await api.client.get("/v1/tools", headers=api.auth())).json()

    assert {row.pop("plan_id") for row in rows} == {served["plan_id"]}
    assert rows == sorted(served["tools"], key=lambda tool: tool["name"])
    echo = next(row for row in rows if row["name"] == "echo")
    assert echo["input_schema"]["type"] == "object"
    assert echo["description"]


async def test_journal_verify_and_replay_read_a_run_and_verify_exits_1_when_broken(
    api: Api, arvis: CliRunner
) -> None:
    for n in (1, 2):
        response = await api.syscall("echo", {"n": n}, run_id="run-cli", causal_id=f"c-{n}")
        assert response.status_code == 200

    entries = json.loads(await _aok(arvis, "journal", "run-cli", "--tenant", "acme", "--json"))
    assert [e["position"] for e in entries] == [1, 2]
    assert "echo" in await _aok(arvis, "journal", "run-cli", "--tenant", "acme")
    assert "chain intact, 2 entries" in await _aok(arvis, "verify", "run-cli", "--tenant", "acme")
    replayed = json.loads(await _aok(arvis, "replay", "run-cli", "--tenant", "acme", "--json"))
    assert [r["result"] for r in replayed] == [{"n": 1}, {"n": 2}]

    other = await _invoke(arvis, "verify", "run-cli", "--tenant", "globex")
    assert other.exit_code == 1
    assert "no run" in other.output

    api.sql(
        "UPDATE journal_entries SET body = jsonb_set(body::jsonb, '{result}', '{\"n\": 9}')::text"
        " WHERE run_id = 'run-cli' AND position = 2"
    )
    broken = await _invoke(arvis, "verify", "run-cli", "--tenant", "acme", "--json")
    assert broken.exit_code == 1
    assert json.loads(broken.output)["broken_at"] == 2
    # Replay never hands on the tampered record: it fails closed, naming the position.
    refused = await _invoke(arvis, "replay", "run-cli", "--tenant", "acme", "--json")
    assert refused.exit_code == 1
    assert "broken at position 2" in refused.output
    assert '"n": 9' not in refused.output
    over_http = await api.client.post("/v1/runs/run-cli/replay", headers=api.auth())
    assert over_http.status_code == 409
    assert (over_http.json()["code"], over_http.json()["broken_at"]) == ("chain_broken", 2)
    assert "results" not in over_http.json()
