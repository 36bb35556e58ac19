"""Every appended journal entry, handed to the witness after its statement committed.

Why after, and off the caller's way (DESIGN §10 "Evidence covers the tail"): the
entry's hash is known only once the journal statement placed it, and by then the
effect happened and the entry is durable in the database. A witness that fails now
must not lose the entry or fail the call, so the store tells the :class:`WitnessFeed`
of each entry it appended (:meth:`WitnessFeed.note`: a list append, nothing else)
and one background pump writes what has gathered: one write and one fsync for all
the entries noted since the last one (a group commit, so a busy process pays one
fsync per batch, not per entry). A write that fails is logged, counted and retried
with backoff, the entries kept in order; the governed call stays at two statements.

What can still be lost: the entries pending when the process dies (at most one
batch, plus the backlog of a witness that was failing). ``verify`` then reports
those positions as not witnessed — honestly a gap, since it cannot tell them from
entries inserted into the database — and the log names them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from arvis.lifecycle.receipts import IntentWitness
from arvis.lifecycle.records import JournalEntry

log = logging.getLogger(__name__)

MAX_BATCH = 512
_BACKOFF_S = (0.05, 0.2, 1.0, 5.0)


class EntryWitness(Protocol):
    async def witness_entries(self, entries: Sequence[JournalEntry]) -> None:
        """Keep the records of ``entries`` durably, in order, or raise."""
        ...


class Witness(IntentWitness, EntryWitness, Protocol):
    """A witness of intents and of appended entries (both built-in witnesses are)."""


class WitnessFeed:
    """Hands appended entries to the witness in batches, in the background."""

    def __init__(self, witness: EntryWitness, *, max_batch: int = MAX_BATCH) -> None:
        self.witness = witness
        self.max_batch = max_batch
        self._pending: list[JournalEntry] = []
        self._pump: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.witnessed = 0
        """Entries the witness took."""
        self.failures = 0
        """Writes the witness refused (each retried)."""
        self.writes = 0
        """Batches the witness took: ``witnessed / writes`` entries per write (and fsync)."""

    @property
    def pending(self) -> int:
        """Entries appended and not witnessed yet."""
        return len(self._pending)

    def pending_records(self, tenant_id: str, run_id: str) -> list[dict[str, object]]:
        """The run's entries this process appended and the witness has not taken yet,
        as the witness will hold them: ``verify`` counts them as witnessed (their hash
        is the one the append returned), so a slow or failing witness is no gap."""
        return [
            {
                "type": "entry",
                "tenant_id": entry.tenant_id,
                "run_id": entry.run_id,
                "position": entry.position,
                "entry_hash": entry.entry_hash,
            }
            for entry in self._pending
            if entry.run_id == run_id and entry.tenant_id == tenant_id
        ]

    def note(self, entry: JournalEntry) -> None:
        """An entry was appended and committed (called by the store; must not block)."""
        self._pending.append(entry)
        self._idle.clear()
        if self._pump is None or self._pump.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop: the next note or drain writes it
                return
            self._pump = loop.create_task(self._run())

    async def drain(self, timeout_s: float = 10.0) -> bool:
        """Wait until every entry noted so far is witnessed; False when the time ran out
        (the rest is logged: verify will show those positions as not witnessed)."""
        if self._pending and (self._pump is None or self._pump.done()):
            self._pump = asyncio.get_running_loop().create_task(self._run())
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def abandon(self) -> None:
        """Stop (shutdown after :meth:`drain`); name what the witness never took."""
        if self._pump is not None:
            self._pump.cancel()
        if self._pending:
            for entry in self._pending:
                log.error(
                    "the witness never took entry %d of run %s (hash %s): verify will report"
                    " it as not witnessed",
                    entry.position,
                    entry.run_id,
                    entry.entry_hash,
                )
            self._pending.clear()

    async def _run(self) -> None:
        failed = 0
        while self._pending:
            batch = self._pending[: self.max_batch]
            try:
                await self.witness.witness_entries(batch)
            except Exception as exc:  # a witness's failure must not end the pump
                self.failures += 1
                delay = _BACKOFF_S[min(failed, len(_BACKOFF_S) - 1)]
                failed += 1
                log.error(
                    "the witness did not take %d journal entries (first: run %s position %d):"
                    " %r; retrying in %.2fs",
                    len(batch),
                    batch[0].run_id,
                    batch[0].position,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            failed = 0
            del self._pending[: len(batch)]
            self.witnessed += len(batch)
            self.writes += 1
        self._idle.set()
