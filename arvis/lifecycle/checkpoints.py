"""Signed checkpoints, taken off the governed path (docs/journal-format.md).

Where checkpointing runs, and why: never inside the admission or journal
statement, and never on the caller's way to its answer. The store tells the
:class:`Checkpointer` of each entry it appended (:meth:`Checkpointer.note`, a
dictionary update and nothing else); when an entry's position is a multiple of
``every``, a background task signs that head and writes the checkpoint, so the
syscall that appended it answers without waiting for the signature or the extra
statement. A run this process appended to and that has stayed quiet for
``idle_s`` is checkpointed by the periodic chore the instance's recovery runtime
drives (:meth:`Checkpointer.checkpoint_idle`), and a clean shutdown checkpoints
every run still unsigned (:meth:`Checkpointer.flush`). With no signing key there
is no checkpointer at all: nothing is noted, nothing runs.

The head signed is the one the append returned (position and entry hash), so no
read is needed; a checkpoint is keyed by (tenant, run, length) and written with
``ON CONFLICT DO NOTHING``, so two processes checkpointing one head agree.
Checkpoints also go to the witness; a witness that cannot take one is logged and
the checkpoint stays in the database (the effect it covers already happened).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from arvis.domain.checkpoints import Checkpoint, checkpoint_preimage, signed_text
from arvis.domain.clock import Clock
from arvis.domain.ids import RunId, TenantId
from arvis.lifecycle.ports import JournalEntry

log = logging.getLogger(__name__)


class CheckpointSigner(Protocol):
    key_id: str

    def sign(self, data: bytes) -> str: ...


class CheckpointStore(Protocol):
    async def save_checkpoint(self, checkpoint: Checkpoint) -> None: ...

    async def checkpoints(self, tenant_id: TenantId, run_id: RunId) -> list[Checkpoint]: ...


class CheckpointWitness(Protocol):
    async def witness_checkpoint(self, checkpoint: Checkpoint) -> None: ...


@dataclass(frozen=True)
class CheckpointPolicy:
    every: int = 100
    """Checkpoint when an append's position is a multiple of this; 0: never."""
    idle_s: float = 30.0
    """Checkpoint a run quiet this long with an unsigned head; 0: never."""


@dataclass
class _Head:
    length: int
    head_hash: str
    noted: float


class Checkpointer:
    """Signs run heads in the background: every ``every`` entries, and when idle."""

    def __init__(
        self,
        signer: CheckpointSigner,
        store: CheckpointStore,
        clock: Clock,
        policy: CheckpointPolicy,
        witness: CheckpointWitness | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.signer = signer
        self.store = store
        self.clock = clock
        self.policy = policy
        self.witness = witness
        self._monotonic = monotonic
        self._unsigned: dict[tuple[str, str], _Head] = {}
        self._tasks: set[asyncio.Task[int]] = set()

    def note(self, entry: JournalEntry) -> None:
        """An entry was appended (called by the store; must not block)."""
        key = (entry.tenant_id, entry.run_id)
        head = self._unsigned.get(key)
        if head is not None and head.length >= entry.position:
            return
        self._unsigned[key] = _Head(entry.position, entry.entry_hash, self._monotonic())
        every = self.policy.every
        if every and entry.position % every == 0:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop: left for the idle chore or the flush
                return
            task = loop.create_task(self._sign(key))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def checkpoint_idle(self) -> int:
        """Checkpoint every noted run quiet for ``idle_s``; how many were signed."""
        if not self.policy.idle_s:
            return 0
        cutoff = self._monotonic() - self.policy.idle_s
        due = [key for key, head in self._unsigned.items() if head.noted <= cutoff]
        signed = 0
        for key in due:
            signed += await self._sign(key)
        return signed

    async def flush(self) -> None:
        """Finish the signing in flight and sign every head still unsigned (shutdown)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for key in list(self._unsigned):
            await self._sign(key)

    async def checkpoint(self, tenant_id: str, run_id: str, length: int, head_hash: str) -> None:
        """Sign and store one head now."""
        moment: datetime = self.clock.now()
        preimage = checkpoint_preimage(
            tenant_id=tenant_id,
            run_id=run_id,
            length=length,
            head_hash=head_hash,
            signed_at=signed_text(moment),
        )
        checkpoint = Checkpoint(
            tenant_id=tenant_id,
            run_id=run_id,
            length=length,
            head_hash=head_hash,
            signed_at=moment,
            key_id=self.signer.key_id,
            signature=self.signer.sign(preimage),
        )
        await self.store.save_checkpoint(checkpoint)
        if self.witness is not None:
            try:
                await self.witness.witness_checkpoint(checkpoint)
            except Exception:
                log.exception(
                    "the witness did not take the checkpoint of run %s at %d", run_id, length
                )

    async def _sign(self, key: tuple[str, str]) -> int:
        head = self._unsigned.get(key)
        if head is None:
            return 0
        try:
            await self.checkpoint(key[0], key[1], head.length, head.head_hash)
        except Exception:
            # Kept unsigned: the next idle round or the flush tries again.
            log.exception("checkpoint of run %s at %d failed", key[1], head.length)
            return 0
        if self._unsigned.get(key) is head:
            del self._unsigned[key]
        return 1
