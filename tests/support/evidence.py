"""Evidence helpers for tests: a signing key on disk, the rewrite a database writer could
do — every hash recomputed with the project's own SQL hash function — and the rewrite a
bundle forger could do, in Python."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from psycopg import sql
from typer.testing import CliRunner, Result

from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.intent import GENESIS_HASH
from arvis.evidence.keys import SigningKey
from arvis.evidence.witness import read_witness
from arvis.lifecycle.journal import chain_hash

Sql = Callable[..., list[tuple[Any, ...]]]


def signing_key(directory: Path) -> tuple[Path, Path]:
    """A new signing key file and its public key file."""
    key_file = directory / "signing.pem"
    key = SigningKey.create(key_file)
    public = directory / "signing.pub.pem"
    public.write_text(key.public.pem)
    return key_file, public


# Rewrites the body of one entry, then recomputes every entry's prev_hash and
# entry_hash in chain order with arvis_entry_hash (the function the journal itself
# uses), and moves the run's head: a chain that links perfectly.
_REWRITE = """
DO $rewrite$
DECLARE e record; prev text := {genesis}; h text;
BEGIN
    UPDATE journal_entries SET body = replace(body, {old}, {new})
     WHERE tenant_id = {tenant} AND run_id = {run} AND position = {position};
    FOR e IN SELECT * FROM journal_entries WHERE tenant_id = {tenant} AND run_id = {run}
             ORDER BY position LOOP
        h := arvis_entry_hash(prev, e.tenant_id, e.run_id, e.position, e.kind, e.causal_id,
            e.idempotency_key, e.attempt, e.intent_id, e.boundary,
            to_char(e.recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '+00:00',
            e.body);
        UPDATE journal_entries SET prev_hash = prev, entry_hash = h
         WHERE tenant_id = e.tenant_id AND run_id = e.run_id AND position = e.position;
        prev := h;
    END LOOP;
    UPDATE runs SET journal_head = prev WHERE tenant_id = {tenant} AND run_id = {run};
END
$rewrite$
"""


def rewrite_run(run_sql: Sql, tenant: str, run: str, position: int, old: str, new: str) -> None:
    statement = sql.SQL(_REWRITE).format(
        genesis=sql.Literal(GENESIS_HASH),
        old=sql.Literal(old),
        new=sql.Literal(new),
        tenant=sql.Literal(tenant),
        run=sql.Literal(run),
        position=sql.Literal(position),
    )
    run_sql(statement)


async def wait_for(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.05)


def witnessed(witness: Path, run: str, position: int) -> bool:
    """The file witness holds the entry at ``position`` of ``run``."""
    if not witness.exists():
        return False
    return any(
        record.get("type") == "entry"
        and record.get("run_id") == run
        and record.get("position") == position
        for _, _, record in read_witness(witness)
    )


def forge_bundle(
    data: bytes,
    *,
    edit: Callable[[dict[str, Any]], None],
) -> bytes:
    """A bundle edited by ``edit`` (which changes ``content`` in place), then made to link
    again as a forger would: every entry hash recomputed, the run's head moved, the
    digest recomputed and the canonical form kept."""
    content = json.loads(data)
    content.pop("digest")
    edit(content)
    prev = GENESIS_HASH
    for entry in content["entries"]:
        entry["prev_hash"] = prev
        entry["entry_hash"] = chain_hash(
            prev_hash=prev,
            tenant_id=content["tenant_id"],
            run_id=content["run_id"],
            position=entry["position"],
            kind=entry["kind"],
            causal_id=entry["causal_id"],
            idempotency_key=entry["idempotency_key"],
            attempt=entry["attempt"],
            intent_id=entry["intent_id"],
            boundary=entry["boundary"],
            recorded_at=entry["recorded_at"],
            body_text=entry["body"],
        )
        prev = entry["entry_hash"]
    content["run"]["journal_length"] = len(content["entries"])
    content["run"]["journal_head"] = prev
    content["digest"] = sha256_hex(canonical_bytes(content))
    return canonical_bytes(content) + b"\n"


# Appends an entry the way the journal would — the previous entry's body under a new
# causal id, an hour old, linked to the head and hashed with arvis_entry_hash — and
# moves the run's head to it: an insertion no chain check can see.
_INSERT = """
DO $forge$
DECLARE r record; b text; n bigint; h text; at timestamptz := now() - interval '1 hour';
BEGIN
    SELECT journal_length, journal_head INTO r FROM runs
     WHERE tenant_id = {tenant} AND run_id = {run};
    SELECT body INTO b FROM journal_entries
     WHERE tenant_id = {tenant} AND run_id = {run} AND position = r.journal_length;
    n := r.journal_length + 1;
    h := arvis_entry_hash(r.journal_head, {tenant}, {run}, n, 'execution', {causal},
        repeat('f', 64), NULL, NULL, 'EFFECT_COMPLETED',
        to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '+00:00', b);
    INSERT INTO journal_entries (tenant_id, run_id, position, kind, causal_id, idempotency_key,
        attempt, intent_id, boundary, body, prev_hash, entry_hash, recorded_at)
    VALUES ({tenant}, {run}, n, 'execution', {causal}, repeat('f', 64), NULL, NULL,
        'EFFECT_COMPLETED', b, r.journal_head, h, at);
    UPDATE runs SET journal_length = n, journal_head = h
     WHERE tenant_id = {tenant} AND run_id = {run};
END
$forge$
"""


def insert_entry(run_sql: Sql, tenant: str, run: str, causal_id: str) -> None:
    statement = sql.SQL(_INSERT).format(
        tenant=sql.Literal(tenant), run=sql.Literal(run), causal=sql.Literal(causal_id)
    )
    run_sql(statement)


def delete_tail(run_sql: Sql, tenant: str, run: str, keep: int) -> None:
    """Deletes the run's entries after position ``keep`` and moves its head back to it."""
    run_sql(
        "DELETE FROM journal_entries WHERE tenant_id = %s AND run_id = %s AND position > %s",
        tenant,
        run,
        keep,
    )
    run_sql(
        "UPDATE runs SET journal_length = %s, journal_head = (SELECT entry_hash FROM"
        " journal_entries WHERE tenant_id = %s AND run_id = %s AND position = %s)"
        " WHERE tenant_id = %s AND run_id = %s",
        keep,
        tenant,
        run,
        keep,
        tenant,
        run,
    )


def cli_runner(database_url: str, data_dir: Path, **env: str | None) -> CliRunner:
    """The ``arvis`` command on the deployment of ``data_dir`` (its arvis.toml), with no
    signing key unless ``env`` names one."""
    return CliRunner(
        env={
            "ARVIS_DATABASE_URL": database_url,
            "ARVIS_DATA_DIR": str(data_dir),
            "ARVIS_CONFIG": str(data_dir / "arvis.toml"),
            "ARVIS_SIGNING_KEY_FILE": None,
            **env,
        }
    )


async def invoke(runner: CliRunner, *args: str) -> Result:
    """Run ``arvis ARGS`` off the event loop (the command runs its own)."""
    from arvis.cli import app

    return await asyncio.to_thread(runner.invoke, app, list(args))
