"""One verification of a run's evidence, for every caller (DESIGN §10, issue 23).

The chain alone proves a run was not edited by someone who did not recompute the
hashes. Each entry that settles an intent must also still commit to that intent:
its receipt's commitment is recomputed from the entry's own fields (tool, plan,
payload digest, attempt, capability, principal), so a rewritten payload under a
kept receipt shows. The signed checkpoints prove more: the chain read must contain
the head each one signed, at its length, or the run was rewritten before that
position — however well the rewrite linked. The witness is a second account kept
outside the database: every intent, every appended entry (position and hash) and
every checkpoint in it must agree with what the database says, so a deleted,
inserted or rewritten entry shows even after the last checkpoint.

:class:`EvidenceService` is the one verify service: the API's verify, ``arvis verify``,
the console's run page and replay call ``verify`` (the deployment's key and witness; a
run found broken is flagged); ``arvis verify --public-key K --witness W`` calls
``verify_with`` (it flags nothing); a deduplicated answer calls ``check_served``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from arvis.domain.checkpoints import Checkpoint, signed_text
from arvis.domain.clock import Clock
from arvis.domain.ids import RunId, TenantId
from arvis.lifecycle.errors import ChainBroken, NotFound
from arvis.lifecycle.evidence.crosscheck import WITNESS_GRACE_S, TrustedKey
from arvis.lifecycle.evidence.report import (
    EvidenceReport,
    verify_run,
)
from arvis.lifecycle.journal import ChainVisitor, recomputes, row_hash
from arvis.lifecycle.ports import LifecycleReads, LifecycleStore
from arvis.lifecycle.records import JournalEntry, RunRecord

log = logging.getLogger(__name__)


class WitnessSource(Protocol):
    """A witness whose records can be read back (the file witness)."""

    async def records(self, tenant_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every record of the run, in the order written; OSError/ValueError when
        the witness cannot be read."""
        ...


class EvidenceFlags(Protocol):
    async def flag_run(self, tenant_id: str, run_id: str, position: int, fault: str) -> None:
        """Keep, once, that the run's evidence is broken at ``position``."""
        ...


_NOT_TAMPER = ("not by the key given",)
_REMEMBERED_SIGNATURES = 4096
_REMEMBERED_COVERED = 65_536


@dataclasses.dataclass(eq=False)
class EvidenceService:
    """Verification with the deployment's own evidence, and the check of what is served.

    ``key``: the trusted public key (None: checkpoints are not checked); ``witness``: a
    witness that can be read back (None: none, or an HTTP witness); ``flags``: where a
    run found broken is flagged. Each of ``before_witness`` is awaited before the
    witness is read (this process hands the witness its last entries first).
    """

    store: LifecycleStore
    clock: Clock
    _: dataclasses.KW_ONLY
    key: TrustedKey | None = None
    witness: WitnessSource | None = None
    flags: EvidenceFlags | None = None
    grace_s: float = WITNESS_GRACE_S
    before_witness: tuple[Callable[[], Awaitable[object]], ...] = ()
    pending: tuple[Callable[[str, str], list[dict[str, object]]], ...] = ()
    """Records of entries this process appended that the witness will take: read
    with the witness's own."""
    _verified: OrderedDict[tuple[str, bytes], None] = dataclasses.field(
        default_factory=OrderedDict, init=False
    )
    _covered: OrderedDict[tuple[str, str, int], str] = dataclasses.field(
        default_factory=OrderedDict, init=False
    )
    """(tenant, run, position) → the hash a signed checkpoint was shown to cover
    there: a later answer from that window recomputes its entry and compares."""

    async def verify(
        self, tenant_id: TenantId, run_id: RunId, visit: ChainVisitor | None = None
    ) -> EvidenceReport:
        """Verify the run with the deployment's key and witness; flag it when broken.
        NotFound: no such run (in this tenant).

        A witness that cannot be read makes the report not ok (nothing is known to
        agree) without flagging the run: that is the witness's fault, not the run's.
        """
        records: list[dict[str, Any]] | None = None
        unreadable: str | None = None
        if self.witness is not None:
            for settle in self.before_witness:
                await settle()
            try:
                records = await self.witness.records(tenant_id, run_id)
                for pending in self.pending:
                    records += pending(tenant_id, run_id)
            except (OSError, ValueError) as exc:
                log.error("the witness could not be read for run %s: %s", run_id, exc)
                unreadable = f"the witness cannot be read: {exc}"
        report = await self.verify_with(
            tenant_id, run_id, key=self.key, witness=records, visit=visit
        )
        if not report.ok:
            await self._flag(tenant_id, run_id, report)
        elif unreadable is not None:
            return dataclasses.replace(report, ok=False, reason=unreadable, witness=unreadable)
        return report

    async def verify_with(
        self,
        tenant_id: TenantId,
        run_id: RunId,
        *,
        key: TrustedKey | None,
        witness: Iterable[Mapping[str, Any]] | None,
        visit: ChainVisitor | None = None,
    ) -> EvidenceReport:
        """Verify the run with ``key`` and ``witness`` records (an auditor's own: nothing
        is flagged). NotFound: no such run (in this tenant)."""
        async with self.store.reading() as reads:
            try:
                return await verify_run(
                    reads,
                    tenant_id,
                    run_id,
                    key=key,
                    witness=witness,
                    now=self.clock.now(),
                    visit=visit,
                    grace_s=self.grace_s,
                )
            except LookupError:
                raise NotFound(f"no run {run_id}") from None

    async def checkpoints(self, tenant_id: TenantId, run_id: RunId) -> list[Checkpoint]:
        """The run's signed checkpoints, oldest first. NotFound: no such run."""
        async with self.store.reading() as reads:
            if await reads.run(tenant_id, run_id) is None:
                raise NotFound(f"no run {run_id}")
            return await reads.checkpoints(tenant_id, run_id)

    async def check_served(
        self, reads: LifecycleReads, run: RunRecord, entries: Sequence[JournalEntry]
    ) -> None:
        """Refuse (ChainBroken) to serve ``entries`` of ``run`` unless the run is not
        flagged and each entry recomputes its own hash and links to the signed
        checkpoint that covers it. Reads only the entries between each and its
        checkpoint."""
        if run.evidence_broken_at is not None:
            raise ChainBroken(run.run_id, run.evidence_broken_at, f"{run.evidence_fault}")
        for entry in entries:
            problem = await self._served_problem(reads, entry)
            if problem is not None:
                position, reason = problem
                await self._flag_fault(entry.tenant_id, entry.run_id, position, reason)
                raise ChainBroken(entry.run_id, position, reason)

    async def _served_problem(
        self, reads: LifecycleReads, entry: JournalEntry
    ) -> tuple[int, str] | None:
        if not recomputes(entry):
            return entry.position, "entry altered"
        key = self.key
        if key is None:
            return None
        known = self._covered.get((entry.tenant_id, entry.run_id, entry.position))
        if known is not None:
            self._covered.move_to_end((entry.tenant_id, entry.run_id, entry.position))
            if known != entry.entry_hash:
                return entry.position, "entry altered since its checkpoint covered it"
            return None
        covering = await reads.checkpoints(
            entry.tenant_id, entry.run_id, at_least=entry.position, first=1
        )
        if not covering:
            return None  # the tail, after the last checkpoint: verify checks it on the witness
        checkpoint = covering[0]
        at = signed_text(checkpoint.signed_at)
        if checkpoint.key_id != key.key_id or not self._signed(checkpoint, key):
            return checkpoint.length, (
                f"checkpoint of {checkpoint.length} entries at {at} does not verify"
                " with the trusted key"
            )
        rows = await reads.chain(
            entry.tenant_id,
            entry.run_id,
            entry.position - 1,
            checkpoint.length - entry.position + 1,
        )
        expected_prev, expected = entry.prev_hash, entry.position
        for row in rows:
            if row[0] != expected or row[1] != expected_prev:
                return expected, "prev_hash does not link"
            if row_hash(entry.tenant_id, entry.run_id, row) != row[2]:
                return row[0], "entry altered"
            expected_prev, expected = row[2], expected + 1
        if expected != checkpoint.length + 1 or expected_prev != checkpoint.head_hash:
            before = checkpoint.length + 1
            return before, (
                f"rewritten before position {before} (checkpoint of {checkpoint.length}"
                f" entries at {at})"
            )
        for row in rows:
            self._covered[(entry.tenant_id, entry.run_id, row[0])] = row[2]
        while len(self._covered) > _REMEMBERED_COVERED:
            self._covered.popitem(last=False)
        return None

    def _signed(self, checkpoint: Checkpoint, key: TrustedKey) -> bool:
        """The signature check, remembered for the checkpoints seen lately: the
        deduplicated answers of one run check the same checkpoint again and again."""
        seen = (checkpoint.signature, checkpoint.preimage)
        if seen in self._verified:
            self._verified.move_to_end(seen)
            return True
        if not key.verifies(checkpoint):
            return False
        self._verified[seen] = None
        if len(self._verified) > _REMEMBERED_SIGNATURES:
            self._verified.popitem(last=False)
        return True

    async def _flag(self, tenant_id: str, run_id: str, report: EvidenceReport) -> None:
        if report.flagged is not None or report.broken_at is None or report.reason is None:
            return
        if any(marker in report.reason for marker in _NOT_TAMPER):
            return
        await self._flag_fault(tenant_id, run_id, report.broken_at, report.reason)

    async def _flag_fault(self, tenant_id: str, run_id: str, position: int, reason: str) -> None:
        log.error("the evidence of run %s is broken at position %d: %s", run_id, position, reason)
        if self.flags is None:
            return
        at = self.clock.now().isoformat(timespec="seconds")
        try:
            await self.flags.flag_run(tenant_id, run_id, position, f"{reason} (found {at})")
        except Exception:  # the refusal stands; the flag is a shortcut for later answers
            log.exception("could not flag run %s", run_id)
