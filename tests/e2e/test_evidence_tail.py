"""Evidence covers the tail (DESIGN §10, issue 23): with a witness on, an entry deleted,
inserted or rewritten after the last checkpoint is named by ``verify``; the checkpointer
never signs a head that does not descend from the one it signed; a bundle checked with a
trusted key must carry signed checkpoints (or be given a witness) that cover its entries.

Every tamper is what a database writer could do by SQL, hashes recomputed with the
store's own function, while the deployment runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.evidence import (
    cli_runner,
    delete_tail,
    forge_bundle,
    insert_entry,
    invoke,
    rewrite_run,
    signing_key,
    wait_for,
)
from tests.support.http import Api, serve_api

# Every 2 entries, never on idleness: entries after the last multiple of 2 stay unsigned
# while the deployment runs (its shutdown signs them).
TAIL_CONFIG = """
[audit.checkpoints]
every = 2
idle_s = 0

[audit.witness]
kind = "file"
path = "witness/arvis.jsonl"
"""


async def _calls(api: Api, run: str, n: int, first: int = 0) -> None:
    for i in range(first, first + n):
        answer = await api.syscall(
            "echo", {"n": i, "note": f"call-{i}"}, run_id=run, causal_id=f"c{i}"
        )
        assert answer.status_code == 200, answer.text


def _lengths(api: Api, run: str) -> list[int]:
    rows = api.sql("SELECT length FROM run_checkpoints WHERE run_id = %s ORDER BY length", run)
    return [int(row[0]) for row in rows]


async def _verify(api: Api, run: str) -> dict[str, Any]:
    answer = await api.client.get(f"/v1/runs/{run}/verify", headers=api.auth("acme:auditor"))
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_entries_deleted_after_the_last_checkpoint_are_named_by_the_witness(
    database_url: str, tmp_path: Path
) -> None:
    key_file, public = signing_key(tmp_path)
    witness = tmp_path / "witness" / "arvis.jsonl"
    settings = {"signing_key_file": key_file}
    async with serve_api(database_url, tmp_path, config=TAIL_CONFIG, settings=settings) as api:
        await _calls(api, "run-del", 3)
        await wait_for(lambda: _lengths(api, "run-del") == [2])
        # The writer deletes the entry no checkpoint covers and moves the run's head back.
        delete_tail(api.sql, "acme", "run-del", keep=2)
        served = await _verify(api, "run-del")
        cli = cli_runner(database_url, tmp_path)
        offline = await invoke(
            cli,
            "verify",
            "run-del",
            "--tenant",
            "acme",
            "--public-key",
            str(public),
            "--witness",
            str(witness),
        )
        replay = await api.client.post("/v1/runs/run-del/replay", headers=api.auth())
        metrics = (await api.client.get("/metrics", headers=api.auth("acme:admin"))).text

    assert offline.exit_code == 1, offline.output
    assert "position 3: the witness holds an entry the database does not have" in offline.output
    assert served["ok"] is False
    assert served["broken_at"] == 3
    assert served["witness"].startswith("position 3: the witness holds an entry")
    assert replay.status_code == 409
    assert replay.json()["code"] == "chain_broken"
    assert replay.json()["broken_at"] == 3
    # An operator sees it: the run is flagged, and the witness took every entry.
    assert "arvis_evidence_broken_runs " in metrics
    assert "arvis_evidence_broken_runs 0.0" not in metrics
    assert "arvis_witness_entries_pending 0.0" in metrics


async def test_a_rewritten_tail_is_named_and_the_next_checkpoint_refuses_to_sign_it(
    database_url: str, tmp_path: Path
) -> None:
    key_file, public = signing_key(tmp_path)
    witness = tmp_path / "witness" / "arvis.jsonl"
    settings = {"signing_key_file": key_file}
    async with serve_api(database_url, tmp_path, config=TAIL_CONFIG, settings=settings) as api:
        await _calls(api, "run-tail", 3)
        await wait_for(lambda: _lengths(api, "run-tail") == [2])
        # The last entry's result rewritten, its receipt kept, every hash recomputed.
        rewrite_run(api.sql, "acme", "run-tail", 3, "call-2", "FORGED")
        # The next append links to the forged entry; its position is due a checkpoint.
        await _calls(api, "run-tail", 1, first=3)
        await wait_for(
            lambda: _lengths(api, "run-tail") != [2] or _fault(api, "run-tail") is not None
        )
        lengths = _lengths(api, "run-tail")
        fault = _fault(api, "run-tail")
        served = await _verify(api, "run-tail")

    # The checkpointer saw that entry 3 is not the one this process appended: no signature.
    assert lengths == [2]
    assert fault is not None
    assert fault.startswith("the checkpointer refused to sign: this process appended it")
    assert served["ok"] is False
    assert served["flagged"].startswith("position 3: the checkpointer refused to sign")
    assert served["witness"].startswith("position 3: the entry's hash differs from the witness's")

    cli = cli_runner(database_url, tmp_path)
    offline = await invoke(
        cli,
        "verify",
        "run-tail",
        "--tenant",
        "acme",
        "--public-key",
        str(public),
        "--witness",
        str(witness),
    )
    assert offline.exit_code == 1, offline.output
    assert "position 3: the entry's hash differs from the witness's" in offline.output
    # The shutdown signed nothing of it either: a bundle of it does not verify.
    assert _db_lengths(database_url, "run-tail") == [2]
    bundle = tmp_path / "run-tail.json"
    exported = await invoke(cli, "export", "run-tail", "--tenant", "acme", "-o", str(bundle))
    assert exported.exit_code == 0, exported.output
    checked = await invoke(cli, "verify", "--bundle", str(bundle), "--public-key", str(public))
    assert checked.exit_code == 1, checked.output
    assert "NOT VERIFIED: 2 of 4 entries (positions 3 to 4) are not covered" in checked.output


def _fault(api: Api, run: str) -> str | None:
    """What the run was flagged for, if anything."""
    rows = api.sql("SELECT to_jsonb(r) ->> 'evidence_fault' FROM runs r WHERE run_id = %s", run)
    return None if rows[0][0] is None else str(rows[0][0])


def _db_lengths(database_url: str, run: str) -> list[int]:
    from tests.support.postgres import sql

    rows = sql(database_url, "SELECT length FROM run_checkpoints WHERE run_id = %s", run)
    return sorted(int(row[0]) for row in rows)


async def test_an_entry_inserted_after_the_last_checkpoint_is_named_by_the_witness(
    database_url: str, tmp_path: Path
) -> None:
    key_file, public = signing_key(tmp_path)
    witness = tmp_path / "witness" / "arvis.jsonl"
    settings = {"signing_key_file": key_file}
    async with serve_api(database_url, tmp_path, config=TAIL_CONFIG, settings=settings) as api:
        await _calls(api, "run-ins", 2)
        await wait_for(lambda: _lengths(api, "run-ins") == [2])
        # A forged entry, an hour old, linked to the head: the chain links perfectly.
        insert_entry(api.sql, "acme", "run-ins", "c-forged")
        served = await _verify(api, "run-ins")
        repeated = await api.syscall(
            "echo", {"n": 1, "note": "call-1"}, run_id="run-ins", causal_id="c1"
        )

    assert served["ok"] is False
    assert served["witness"].startswith("position 3: the witness has no record of this entry")
    # Found broken once: no answer of the run is served any more.
    assert repeated.status_code == 409
    assert repeated.json()["code"] == "chain_broken"
    cli = cli_runner(database_url, tmp_path)
    offline = await invoke(
        cli,
        "verify",
        "run-ins",
        "--tenant",
        "acme",
        "--public-key",
        str(public),
        "--witness",
        str(witness),
    )
    assert offline.exit_code == 1, offline.output
    assert "position 3: the witness has no record of this entry" in offline.output


async def test_an_entry_that_no_longer_settles_its_intent_is_named_without_key_or_witness(
    database_url: str, tmp_path: Path
) -> None:
    async with serve_api(database_url, tmp_path) as api:
        first = await api.syscall("echo", {"note": "kept"}, run_id="run-tie", causal_id="c1")
        digest = json.loads(
            api.sql("SELECT body FROM journal_entries WHERE run_id = 'run-tie'")[0][0]
        )["payload_digest"]
        # Another payload's digest under the kept receipt, every hash recomputed.
        rewrite_run(api.sql, "acme", "run-tie", 1, digest, "0" * 64)
        served = await _verify(api, "run-tie")
        replay = await api.client.post("/v1/runs/run-tie/replay", headers=api.auth())

    assert first.status_code == 200
    assert served["ok"] is False
    assert served["broken_at"] == 1
    assert served["reason"] == (
        "entry altered: it does not settle the intent its receipt commits to"
    )
    assert replay.status_code == 409
    assert replay.json()["broken_at"] == 1


async def test_a_bundle_verifies_with_a_trusted_key_only_where_its_checkpoints_cover_it(
    database_url: str, tmp_path: Path
) -> None:
    key_file, public = signing_key(tmp_path)
    witness = tmp_path / "witness" / "arvis.jsonl"
    settings = {"signing_key_file": key_file}
    cli = cli_runner(database_url, tmp_path)
    running = tmp_path / "run-cover-running.json"
    async with serve_api(database_url, tmp_path, config=TAIL_CONFIG, settings=settings) as api:
        await _calls(api, "run-cover", 3)
        await wait_for(lambda: _lengths(api, "run-cover") == [2])
        # Exported while running: the last entry is not signed yet.
        exported = await invoke(cli, "export", "run-cover", "--tenant", "acme", "-o", str(running))
        assert exported.exit_code == 0, exported.output
    # The shutdown signed the last head: checkpoints of 2 and 3 entries.
    bundle = tmp_path / "run-cover.json"
    exported = await invoke(cli, "export", "run-cover", "--tenant", "acme", "-o", str(bundle))
    assert exported.exit_code == 0, exported.output
    data = bundle.read_bytes()

    async def check(name: str, forged: bytes, *extra: str) -> tuple[int, str]:
        path = tmp_path / f"{name}.json"
        path.write_bytes(forged)
        result = await invoke(
            cli, "verify", "--bundle", str(path), "--public-key", str(public), *extra
        )
        return result.exit_code, result.output

    def edit_result(content: dict[str, Any]) -> None:
        entry = content["entries"][2]
        entry["body"] = entry["body"].replace("call-2", "FORGED")

    def drop_checkpoints(content: dict[str, Any]) -> None:
        edit_result(content)
        content["checkpoints"] = []

    def drop_checkpoints_and_key(content: dict[str, Any]) -> None:
        drop_checkpoints(content)
        content["public_key"] = None

    def drop_last_checkpoint(content: dict[str, Any]) -> None:
        content["checkpoints"] = content["checkpoints"][:1]

    def truncate(content: dict[str, Any]) -> None:
        content["entries"] = content["entries"][:2]
        drop_last_checkpoint(content)

    for name, edit in (("edited", drop_checkpoints), ("keyless", drop_checkpoints_and_key)):
        code, output = await check(name, forge_bundle(data, edit=edit))
        assert code == 1, (name, output)
        assert "NOT VERIFIED: 3 of 3 entries (positions 1 to 3) are not covered" in output

    good = await check("good", data)
    assert good[0] == 0, good[1]
    assert "every entry covered" in good[1]
    assert "last signed head: 3 entries at" in good[1]

    tail = running.read_bytes()
    code, output = await check("tail", tail)
    assert code == 1, output
    assert "NOT VERIFIED: 1 of 3 entries (positions 3 to 3) are not covered" in output
    # The witness the auditor holds covers the entry no checkpoint does.
    code, output = await check("tail-witnessed", tail, "--witness", str(witness))
    assert code == 0, output
    assert "every entry covered" in output
    code, output = await check(
        "forged-tail", forge_bundle(tail, edit=edit_result), "--witness", str(witness)
    )
    assert code == 1, output
    assert "the witness disagrees: position 3:" in output

    # What a bundle cannot show is that nothing came after its last signed head: it says
    # which head that is.
    code, output = await check("truncated", forge_bundle(data, edit=truncate), "--json")
    report = json.loads(output)
    assert (code, report["ok"], report["entries"], report["signed_length"]) == (0, True, 2, 2)
