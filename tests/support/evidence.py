"""Evidence helpers for tests: a signing key on disk, and the rewrite a database writer
could do — every hash recomputed with the project's own SQL hash function."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from psycopg import sql

from arvis.domain.artifacts import GENESIS_HASH
from arvis.evidence.keys import SigningKey

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
