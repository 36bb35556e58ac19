"""Signed checkpoints on PostgreSQL (``run_checkpoints``, revision 0008), and the flag
of a run whose evidence was found broken (``runs.evidence_broken_at``, revision 0010).

The rows hold what was signed and the signature; the key that signed them is
never in the database. A checkpoint is keyed by (tenant, run, length): the same
head signed twice (two processes, a retried flush) keeps the first row.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from arvis.domain.checkpoints import Checkpoint
from arvis.store.connections import write

_SAVE = text(
    "INSERT INTO run_checkpoints (tenant_id, run_id, length, head_hash, signed_at, key_id,"
    " signature) VALUES (:t, :r, :n, :h, :at, :k, :s)"
    " ON CONFLICT (tenant_id, run_id, length) DO NOTHING"
)
# The first finding stays: a later one does not overwrite what was found first.
_FLAG = text(
    "UPDATE runs SET evidence_broken_at = :p, evidence_fault = :f"
    " WHERE tenant_id = :t AND run_id = :r AND evidence_broken_at IS NULL"
)


class PgCheckpoints:
    """Implements ``CheckpointStore`` of :mod:`arvis.lifecycle.evidence.checkpoints` (the reads of
    checkpoints are the lifecycle store's, in a verify's snapshot)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        await write(
            self._engine,
            _SAVE,
            {
                "t": checkpoint.tenant_id,
                "r": checkpoint.run_id,
                "n": checkpoint.length,
                "h": checkpoint.head_hash,
                "at": checkpoint.signed_at,
                "k": checkpoint.key_id,
                "s": checkpoint.signature,
            },
        )

    async def flag_run(self, tenant_id: str, run_id: str, position: int, fault: str) -> None:
        """Keep, once, that the run's evidence was found broken at ``position`` (issue 23)."""
        params = {"t": tenant_id, "r": run_id, "p": position, "f": fault}
        await write(self._engine, _FLAG, params)
