"""What is served is verified (DESIGN §10, issue 23): a repeated decision (deduplicated)
and a replay never hand out an entry whose own hash does not recompute, nor anything of
a run whose chain or signed checkpoints disagree — over HTTP, the CLI and MCP. The
refusal is ``chain_broken`` naming the position, and nothing recorded changes."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from mcp import MCPError

from tests.support.console import sign_in, text_of
from tests.support.evidence import cli_runner, invoke, rewrite_run, signing_key, wait_for
from tests.support.http import Api, serve_api
from tests.support.mcp_client import meta_of, serve_arvis
from tests.support.postgres import sql

CHECKPOINTS = "[audit.checkpoints]\nevery = 2\nidle_s = 0\n"


def _entries(api: Api, run: str) -> list[tuple[object, ...]]:
    return api.sql(
        "SELECT position, body, entry_hash FROM journal_entries WHERE run_id = %s"
        " ORDER BY position",
        run,
    )


async def test_a_result_edited_in_sql_is_not_served_to_a_repeated_call(
    database_url: str, tmp_path: Path
) -> None:
    async with serve_api(database_url, tmp_path) as api:
        first = await api.syscall("echo", {"note": "original"}, run_id="run-ed", causal_id="c1")
        # Edited in place, hashes not recomputed.
        api.sql(
            "UPDATE journal_entries SET body = replace(body, 'original', 'FORGED')"
            " WHERE run_id = 'run-ed'"
        )
        recorded = _entries(api, "run-ed")
        again = await api.syscall("echo", {"note": "original"}, run_id="run-ed", causal_id="c1")
        replay = await api.client.post("/v1/runs/run-ed/replay", headers=api.auth())
        after = _entries(api, "run-ed")

    assert first.status_code == 200, first.text
    assert again.status_code == 409, again.text
    assert again.headers["content-type"].startswith("application/problem+json")
    assert again.json()["code"] == "chain_broken"
    assert again.json()["broken_at"] == first.json()["journal_position"]
    assert "FORGED" not in again.text
    assert replay.status_code == 409
    assert replay.json()["code"] == "chain_broken"
    assert after == recorded  # nothing recorded changed, nothing was added


async def test_a_run_its_checkpoints_show_rewritten_is_neither_deduplicated_nor_replayed(
    database_url: str, tmp_path: Path
) -> None:
    key_file, _ = signing_key(tmp_path)
    settings = {"signing_key_file": key_file}
    async with serve_api(database_url, tmp_path, config=CHECKPOINTS, settings=settings) as api:
        for run in ("run-rw-a", "run-rw-b"):
            for i in range(3):
                answer = await api.syscall(
                    "echo", {"n": i, "note": f"call-{i}"}, run_id=run, causal_id=f"c{i}"
                )
                assert answer.status_code == 200, answer.text
        await wait_for(
            lambda: api.sql("SELECT count(*) FROM run_checkpoints WHERE length = 2") == [(2,)]
        )
        # What call 0 said, rewritten with every hash recomputed: the chain links, the
        # checkpoint of 2 entries does not hold any more.
        for run in ("run-rw-a", "run-rw-b"):
            rewrite_run(api.sql, "acme", run, 1, "call-0", "FORGED")
        recorded = _entries(api, "run-rw-a")

        # Run a: nobody verified it; the repeated call finds the rewrite by itself.
        forged = await api.syscall(
            "echo", {"n": 0, "note": "call-0"}, run_id="run-rw-a", causal_id="c0"
        )
        # Its tail, after the checkpoint, recomputes; the run is known broken now.
        tail = await api.syscall(
            "echo", {"n": 2, "note": "call-2"}, run_id="run-rw-a", causal_id="c2"
        )
        # Run b: replay checks the checkpoints, not only the chain.
        replay = await api.client.post("/v1/runs/run-rw-b/replay", headers=api.auth())
        after = _entries(api, "run-rw-a")

    for answer in (forged, tail, replay):
        assert answer.status_code == 409, answer.text
        assert answer.json()["code"] == "chain_broken"
        assert "FORGED" not in answer.text
    assert forged.json()["broken_at"] == 3
    assert "rewritten before position 3 (checkpoint of 2 entries" in forged.json()["detail"]
    assert replay.json()["broken_at"] == 3
    assert after == recorded

    # The CLI replays with the deployment's key: the same refusal, and no result printed.
    cli = cli_runner(database_url, tmp_path, ARVIS_SIGNING_KEY_FILE=str(key_file))
    replayed = await invoke(cli, "replay", "run-rw-b", "--tenant", "acme")
    assert replayed.exit_code == 1, replayed.output
    assert "broken at position 3 (rewritten before position 3" in replayed.output
    assert "FORGED" not in replayed.output


async def test_a_tampered_record_is_never_handed_to_an_mcp_client(
    database_url: str, tmp_path: Path
) -> None:
    ids = {"arvis.dev/run_id": "mcp-tampered", "arvis.dev/causal_id": "step-1"}
    with serve_arvis(database_url, tmp_path) as served:
        async with served.client() as client:
            first = await client.call_tool("echo", {"note": "original"}, meta=ids)
            sql(
                database_url,
                "UPDATE journal_entries SET body = replace(body, 'original', 'FORGED')"
                " WHERE run_id = 'mcp-tampered'",
            )
            with pytest.raises(MCPError) as refused:
                await client.call_tool("echo", {"note": "original"}, meta=ids)

    assert meta_of(first)["arvis.dev/outcome"] == "executed"
    assert refused.value.error.data["code"] == "chain_broken"
    assert "FORGED" not in str(refused.value.error)


async def test_the_console_run_page_checks_the_signed_checkpoints_too(
    database_url: str, tmp_path: Path
) -> None:
    key_file, _ = signing_key(tmp_path)
    settings = {"signing_key_file": key_file}
    async with serve_api(database_url, tmp_path, config=CHECKPOINTS, settings=settings) as api:
        for i in range(2):
            answer = await api.syscall(
                "echo", {"n": i, "note": f"call-{i}"}, run_id="run-console", causal_id=f"c{i}"
            )
            assert answer.status_code == 200, answer.text
        await wait_for(
            lambda: (
                api.sql("SELECT count(*) FROM run_checkpoints WHERE run_id = 'run-console'")
                == [(1,)]
            )
        )
        rewrite_run(api.sql, "acme", "run-console", 1, "call-0", "FORGED")
        transport = httpx.ASGITransport(app=api.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://arvis.test") as browser:
            await sign_in(browser, api.tokens["acme:auditor"])
            page = text_of((await browser.get("/console/runs/run-console")).text)

    # The same verification as GET /v1/runs/{id}/verify: the chain links, the checkpoint not.
    assert "Chain broken at position 3" in page
    assert "rewritten before position 3 (checkpoint of 2 entries" in page
