"""Evidence that outlives the database (issue 19): signed checkpoints catch a run rewritten
with every hash recomputed, a witness disagrees with a tampered database, and a witness
that cannot be written fails the admission closed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from arvis.cli import app
from arvis.evidence.witness import read_witness
from tests.support.evidence import rewrite_run, signing_key, wait_for
from tests.support.http import Api, serve_api
from tests.support.httpserver import LocalHttpServer, Respond

WITNESS_CONFIG = """
[audit.checkpoints]
every = 2
idle_s = 0.2

[audit.witness]
kind = "file"
path = "witness/arvis.jsonl"
max_bytes = 4096
"""


def _cli(database_url: str, data_dir: Path) -> CliRunner:
    return CliRunner(
        env={
            "ARVIS_DATABASE_URL": database_url,
            "ARVIS_DATA_DIR": str(data_dir),
            "ARVIS_CONFIG": str(data_dir / "arvis.toml"),
            "ARVIS_SIGNING_KEY_FILE": None,
        }
    )


async def _invoke(runner: CliRunner, *args: str) -> Result:
    return await asyncio.to_thread(runner.invoke, app, list(args))


async def _calls(api: Api, run: str, n: int) -> None:
    for i in range(n):
        answer = await api.syscall(
            "echo", {"n": i, "note": f"call-{i}"}, run_id=run, causal_id=f"c{i}"
        )
        assert answer.status_code == 200, answer.text


def _checkpoints(api: Api, run: str) -> list[tuple[Any, ...]]:
    return api.sql("SELECT length FROM run_checkpoints WHERE run_id = %s ORDER BY length", run)


async def test_a_run_rewritten_with_every_hash_recomputed_is_caught_by_its_checkpoints(
    database_url: str, tmp_path: Path
) -> None:
    key_file, public = signing_key(tmp_path)
    settings = {"signing_key_file": key_file}
    async with serve_api(database_url, tmp_path, config=WITNESS_CONFIG, settings=settings) as api:
        await _calls(api, "run-ev", 5)
        # Every 2 entries, in the background; the fifth is signed once the run goes idle.
        await wait_for(lambda: [r[0] for r in _checkpoints(api, "run-ev")] == [2, 4, 5])
        auditor = api.auth("acme:auditor")
        listed = (await api.client.get("/v1/runs/run-ev/checkpoints", headers=auditor)).json()
        assert [c["length"] for c in listed["checkpoints"]] == [2, 4, 5]
        assert {c["key_id"] for c in listed["checkpoints"]} == {listed["public_key_id"]}
        other = await api.client.get(
            "/v1/runs/run-ev/checkpoints", headers=api.auth("globex:auditor")
        )
        assert other.status_code == 404
        assert other.headers["content-type"].startswith("application/problem+json")
        agent = await api.client.get("/v1/runs/run-ev/checkpoints", headers=api.auth())
        assert agent.status_code == 403
        before = (await api.client.get("/v1/runs/run-ev/verify", headers=auditor)).json()
        assert before["ok"] is True
        assert before["checkpoints"] == 3

        # The writer rewrites what call 2 (position 3) said and recomputes every hash.
        rewrite_run(api.sql, "acme", "run-ev", 3, "call-2", "CALL-2")
        after = (await api.client.get("/v1/runs/run-ev/verify", headers=auditor)).json()

    assert after["ok"] is False
    assert after["rewritten_before"] == 5
    assert after["reason"].startswith("rewritten before position 5 (checkpoint of 4 entries at ")

    cli = _cli(database_url, tmp_path)
    # The chain alone links perfectly; the deployment's witness (arvis.toml) does not
    # agree, and names the entry itself (issue 23: one verification everywhere).
    plain = await _invoke(cli, "verify", "run-ev", "--tenant", "acme")
    assert plain.exit_code == 1, plain.output
    assert "position 3: the entry's hash differs from the witness's" in plain.output
    signed = await _invoke(cli, "verify", "run-ev", "--tenant", "acme", "--public-key", str(public))
    assert signed.exit_code == 1
    assert "rewritten before position 5 (checkpoint of 4 entries at" in signed.output

    # The witness, outside the database, names the first disagreement: the entry
    # rewritten, whose hash it took when it was appended.
    witness = tmp_path / "witness" / "arvis.jsonl"
    disputed = await _invoke(cli, "verify", "run-ev", "--tenant", "acme", "--witness", str(witness))
    assert disputed.exit_code == 1
    assert "position 3: the entry's hash differs from the witness's" in disputed.output


async def test_deleting_the_checkpoints_too_is_caught_by_the_witness(
    database_url: str, tmp_path: Path
) -> None:
    key_file, public = signing_key(tmp_path)
    settings = {"signing_key_file": key_file}
    async with serve_api(database_url, tmp_path, config=WITNESS_CONFIG, settings=settings) as api:
        await _calls(api, "run-wit", 2)
        await wait_for(lambda: [r[0] for r in _checkpoints(api, "run-wit")] == [2])
        rewrite_run(api.sql, "acme", "run-wit", 1, "call-0", "CALL-0")
        api.sql("DELETE FROM run_checkpoints WHERE run_id = 'run-wit'")

    witness = tmp_path / "witness" / "arvis.jsonl"
    records = [r for _, _, r in read_witness(witness) if r["run_id"] == "run-wit"]
    # Intents are witnessed before admission, entries and checkpoints by a background
    # pump after their commit: call 1's intent may come before call 0's entry.
    assert sorted(r["type"] for r in records) == [
        "checkpoint",
        "entry",
        "entry",
        "intent",
        "intent",
    ]
    assert [r["position"] for r in records if r["type"] == "entry"] == [1, 2]
    cli = _cli(database_url, tmp_path)
    signed = await _invoke(
        cli, "verify", "run-wit", "--tenant", "acme", "--public-key", str(public)
    )
    assert signed.exit_code == 0  # nothing left in the database to disagree with
    disputed = await _invoke(
        cli, "verify", "run-wit", "--tenant", "acme", "--witness", str(witness), "--json"
    )
    assert disputed.exit_code == 1
    report = json.loads(disputed.output)
    assert report["witness"].startswith("position 1: the entry's hash differs from the witness's")


async def test_a_witness_that_cannot_be_written_runs_nothing(
    database_url: str, tmp_path: Path
) -> None:
    config = '[audit.witness]\nkind = "file"\npath = "witness.jsonl"\n'
    async with serve_api(database_url, tmp_path, config=config) as api:
        ok = await api.syscall("echo", {"n": 1}, run_id="run-wfail", causal_id="c1")
        assert ok.status_code == 200
        # Its intent, then its entry once journaled.
        await wait_for(lambda: len((tmp_path / "witness.jsonl").read_bytes().splitlines()) == 2)
        # The witness file goes away and a directory takes its place: appends fail.
        (tmp_path / "witness.jsonl").unlink()
        (tmp_path / "witness.jsonl").mkdir()
        answer = await api.syscall(
            "files.write", {"path": "x.txt", "content": "no"}, run_id="run-wfail", causal_id="c2"
        )
        attempts = api.sql("SELECT count(*) FROM attempts WHERE run_id = 'run-wfail'")
        entries = api.sql("SELECT count(*) FROM journal_entries WHERE run_id = 'run-wfail'")

    assert answer.status_code == 503
    assert answer.json()["code"] == "audit_unavailable"
    assert attempts == [(0,)]
    assert entries == [(1,)]
    assert not (tmp_path / "sandbox" / "x.txt").exists()


async def test_an_exported_bundle_verifies_offline_and_fails_on_any_edited_byte(
    database_url: str, tmp_path: Path
) -> None:
    key_file, public = signing_key(tmp_path)
    config = "[audit.checkpoints]\nevery = 2\nidle_s = 0.2\n"
    settings = {"signing_key_file": key_file}
    async with serve_api(database_url, tmp_path, config=config, settings=settings) as api:
        await _calls(api, "run-bundle", 3)
        await wait_for(lambda: [r[0] for r in _checkpoints(api, "run-bundle")] == [2, 3])

    bundle = tmp_path / "run-bundle.json"
    cli = _cli(database_url, tmp_path)
    exported = await _invoke(
        cli,
        "export",
        "run-bundle",
        "--tenant",
        "acme",
        "-o",
        str(bundle),
        "--public-key",
        str(public),
    )
    assert exported.exit_code == 0, exported.output

    # The auditor's machine: no database reachable, no configuration.
    offline = CliRunner(
        env={"ARVIS_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none", "ARVIS_CONFIG": None}
    )
    good = await _invoke(offline, "verify", "--bundle", str(bundle), "--public-key", str(public))
    assert good.exit_code == 0, good.output
    assert "intact, 3 entries, 2 checkpoints" in good.output

    data = bundle.read_bytes()
    content = json.loads(data)
    assert content["public_key"]["key_id"] in good.output
    places = [
        0,
        len(data) // 5,
        len(data) // 3,
        len(data) // 2,
        (3 * len(data)) // 4,
        len(data) - 3,
    ]
    places.append(data.index(b"call-1"))
    places.append(data.index(content["checkpoints"][0]["signature"].encode()) + 5)
    for place in places:
        edited = bytearray(data)
        edited[place] = ord("A") if edited[place] != ord("A") else ord("B")
        target = tmp_path / f"edited-{place}.json"
        target.write_bytes(bytes(edited))
        result = await _invoke(offline, "verify", "--bundle", str(target))
        assert result.exit_code == 1, (place, result.output)


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_a_signing_key_others_can_read_stops_start_up(tmp_path: Path, mode: int) -> None:
    key_file, _ = signing_key(tmp_path)
    key_file.chmod(mode)
    result = CliRunner(env={"ARVIS_SIGNING_KEY_FILE": str(key_file)}).invoke(
        app, ["keys", "signing", "public"]
    )
    assert result.exit_code == 1
    assert "readable by others" in result.output
    assert "PRIVATE" not in result.output


async def test_an_http_witness_receives_each_intent_before_it_runs_and_a_refusal_runs_nothing(
    database_url: str, tmp_path: Path
) -> None:
    async with LocalHttpServer() as witness:
        config = f'[audit.witness]\nkind = "http"\nurl = "{witness.url("/witness")}"\n'
        async with serve_api(database_url, tmp_path, config=config) as api:
            ok = await api.syscall("echo", {"n": 1}, run_id="run-hw", causal_id="c1")
            # The entry follows its intent once its journal statement committed.
            await wait_for(lambda: len(witness.received) == 2)
            witnessed = [r.json() for r in witness.received]
            witness.then(Respond(503, {"error": "full"}))
            refused = await api.syscall(
                "files.write", {"path": "hw.txt", "content": "no"}, run_id="run-hw", causal_id="c2"
            )
            attempts = api.sql("SELECT count(*) FROM attempts WHERE run_id = 'run-hw'")
            entries = api.sql("SELECT count(*) FROM journal_entries WHERE run_id = 'run-hw'")

    assert ok.status_code == 200, ok.text
    assert [(r["type"], r["run_id"], r["causal_id"]) for r in witnessed] == [
        ("intent", "run-hw", "c1"),
        ("entry", "run-hw", "c1"),
    ]
    assert witnessed[0]["idempotency_key"] == ok.json()["idempotency_key"]
    assert witnessed[1]["position"] == ok.json()["journal_position"]
    assert witness.received[0].method == "POST"
    assert witness.received[0].path == "/witness"
    # The witness refused the second intent: nothing was admitted and nothing ran.
    assert refused.status_code == 503
    assert refused.json()["code"] == "audit_unavailable"
    assert attempts == [(0,)]
    assert entries == [(1,)]
    assert not (tmp_path / "sandbox" / "hw.txt").exists()
