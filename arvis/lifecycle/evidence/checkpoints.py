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

The head signed is the one the append returned (position and entry hash), and only
when it descends from the head this process signed last (or, at first, from the
run's newest checkpoint the key verifies; else from the genesis): the entries
between are read and their hashes recomputed, each must link to the one before, and
every entry this process appended since must still have the hash its append
returned (DESIGN §10: "the checkpointer signs only a head that descends from the head
it last signed"). A head that does not descend — entries deleted, inserted or
rewritten since — is never signed: the checkpointer logs it as an error, flags the
run (``runs.evidence_broken_at``, so served answers of it are refused and no other
process signs it either) and signs nothing of that run again. A checkpoint is keyed
by (tenant, run, length) and written with ``ON CONFLICT DO NOTHING``, so two
processes checkpointing one head agree. Checkpoints also go to the witness; a
witness that cannot take one is logged and the checkpoint stays in the database
(the effect it covers already happened).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime
from typing import Protocol

from arvis.domain.checkpoints import Checkpoint, checkpoint_preimage, signed_text
from arvis.domain.clock import Clock
from arvis.domain.ids import RunId, TenantId
from arvis.domain.intent import GENESIS_HASH
from arvis.lifecycle.journal import VERIFY_PAGE, row_hash
from arvis.lifecycle.ports import LifecycleReads, LifecycleStore
from arvis.lifecycle.records import JournalEntry

log = logging.getLogger(__name__)


class CheckpointSigner(Protocol):
    key_id: str

    def sign(self, data: bytes) -> str: ...

    def verifies(self, checkpoint: Checkpoint) -> bool:
        """True when ``checkpoint`` is signed by this signer's key."""
        ...


class CheckpointStore(Protocol):
    async def save_checkpoint(self, checkpoint: Checkpoint) -> None: ...

    async def flag_run(self, tenant_id: str, run_id: str, position: int, fault: str) -> None:
        """Keep, once, that the run's evidence is broken at ``position``."""
        ...


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
    appended: dict[int, str] = field(default_factory=dict)
    """position → entry hash of every entry this process appended since it last signed."""


_STORED_LOOKBACK = 8
# Newest stored checkpoints looked at for a base to descend from: a checkpoint of
# another key (rotated) or a forged row is skipped, not trusted.


@dataclass(eq=False)
class Checkpointer:
    """Signs run heads in the background: every ``every`` entries, and when idle."""

    signer: CheckpointSigner
    store: CheckpointStore
    clock: Clock
    policy: CheckpointPolicy
    _: KW_ONLY
    journal: LifecycleStore
    """Where the entries between two signed heads are read back from."""
    witness: CheckpointWitness | None = None
    monotonic: Callable[[], float] = time.monotonic
    _unsigned: dict[tuple[str, str], _Head] = field(default_factory=dict, init=False)
    _signed: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict, init=False)
    _refused: set[tuple[str, str]] = field(default_factory=set, init=False)
    _tasks: set[asyncio.Task[int]] = field(default_factory=set, init=False)

    def note(self, entry: JournalEntry) -> None:
        """An entry was appended (called by the store; must not block)."""
        key = (entry.tenant_id, entry.run_id)
        if key in self._refused:
            return
        head = self._unsigned.get(key)
        if head is None:
            head = self._unsigned[key] = _Head(entry.position, entry.entry_hash, 0.0)
        head.appended[entry.position] = entry.entry_hash
        if entry.position < head.length:
            return
        head.length, head.head_hash, head.noted = (
            entry.position,
            entry.entry_hash,
            self.monotonic(),
        )
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
        cutoff = self.monotonic() - self.policy.idle_s
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

    async def sign_head(self, tenant_id: str, run_id: str) -> bool:
        """Sign the run's current head now, if it descends from the last signed one
        (``arvis export`` does, so a bundle's last entry is covered). True when the head
        is signed (now or before)."""
        key = (tenant_id, run_id)
        if key in self._refused:
            return False
        async with self.journal.reading() as reads:
            run = await reads.run(TenantId(tenant_id), RunId(run_id))
        if run is None or run.journal_length == 0:
            return run is not None
        verdict = await self._descends(key, run.journal_length, run.journal_head, {})
        if isinstance(verdict, _Refusal):
            await self._refuse(key, verdict)
            return False
        if verdict == "sign":
            await self.checkpoint(tenant_id, run_id, run.journal_length, run.journal_head)
            self._signed[key] = (run.journal_length, run.journal_head)
        return True

    async def checkpoint(self, tenant_id: str, run_id: str, length: int, head_hash: str) -> None:
        """Sign and store one head now (the caller checked that it descends)."""
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
        length, head_hash, appended = head.length, head.head_hash, dict(head.appended)
        try:
            verdict = await self._descends(key, length, head_hash, appended)
            if isinstance(verdict, _Refusal):
                await self._refuse(key, verdict)
                return 0
            if verdict == "sign":
                await self.checkpoint(key[0], key[1], length, head_hash)
                self._signed[key] = (length, head_hash)
        except Exception:
            # Kept unsigned: the next idle round or the flush tries again.
            log.exception("checkpoint of run %s at %d failed", key[1], length)
            return 0
        if head.length == length:
            self._unsigned.pop(key, None)
        else:  # appended to meanwhile: what is left to sign is after this head
            head.appended = {p: h for p, h in head.appended.items() if p > length}
        return 1 if verdict == "sign" else 0

    async def _descends(
        self, key: tuple[str, str], length: int, head_hash: str, appended: dict[int, str]
    ) -> str | _Refusal:
        """``"sign"``, ``"signed"`` (that head is signed already) or why not to sign."""
        tenant_id, run_id = TenantId(key[0]), RunId(key[1])
        async with self.journal.reading() as reads:
            run = await reads.run(tenant_id, run_id)
            if run is None:
                return _Refusal(length, "the run is not in the database", flag=False)
            if run.evidence_broken_at is not None:
                return _Refusal(
                    run.evidence_broken_at, f"the run is flagged: {run.evidence_fault}", flag=False
                )
            base = self._signed.get(key, (0, GENESIS_HASH))
            for stored in reversed(
                await reads.checkpoints(tenant_id, run_id, last=_STORED_LOOKBACK)
            ):
                if stored.key_id == self.signer.key_id and self.signer.verifies(stored):
                    if stored.length > base[0]:
                        base = (stored.length, stored.head_hash)
                    break
            if base[0] >= length:
                if base[0] == length and base[1] != head_hash:
                    return _Refusal(length, "its head differs from the one signed at that length")
                return "signed"
            return await self._link(reads, tenant_id, run_id, base, length, head_hash, appended)

    async def _link(
        self,
        reads: LifecycleReads,
        tenant_id: TenantId,
        run_id: RunId,
        base: tuple[int, str],
        length: int,
        head_hash: str,
        appended: dict[int, str],
    ) -> str | _Refusal:
        """Read the entries after ``base`` up to ``length`` and check they lead to ``head_hash``."""
        expected, prev = base[0] + 1, base[1]
        while expected <= length:
            rows = await reads.chain(
                tenant_id, run_id, expected - 1, min(VERIFY_PAGE, length - expected + 1)
            )
            if not rows:
                return _Refusal(expected, f"entry {expected} is missing (deleted?)")
            for row in rows:
                position = row[0]
                if position != expected:
                    return _Refusal(expected, f"entry {expected} is missing (deleted?)")
                if row[1] != prev:
                    return _Refusal(position, "its prev_hash does not link to the entry before")
                if row_hash(tenant_id, run_id, row) != row[2]:
                    return _Refusal(position, "its hash does not recompute (altered)")
                mine = appended.get(position)
                if mine is not None and mine != row[2]:
                    return _Refusal(
                        position,
                        f"this process appended it with hash {mine[:16]}, the database now has"
                        f" {row[2][:16]} (rewritten)",
                    )
                prev, expected = row[2], expected + 1
        if prev != head_hash:
            return _Refusal(length, "the head differs from the one its append returned")
        return "sign"

    async def _refuse(self, key: tuple[str, str], refusal: _Refusal) -> None:
        self._refused.add(key)
        self._unsigned.pop(key, None)
        log.error(
            "REFUSING to sign run %s: position %d: %s; the chain does not descend from the head"
            " last signed. Nothing of this run will be signed again; verify names what changed.",
            key[1],
            refusal.position,
            refusal.reason,
        )
        if refusal.flag:
            fault = f"the checkpointer refused to sign: {refusal.reason}"
            await self.store.flag_run(key[0], key[1], refusal.position, fault)


@dataclass(frozen=True)
class _Refusal:
    position: int
    reason: str
    flag: bool = True
