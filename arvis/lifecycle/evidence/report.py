"""Judging a run's evidence (DESIGN §10, issue 23): the chain, each settling entry's
commitment, the signed checkpoints and the witness, into one :class:`EvidenceReport`.

:class:`arvis.lifecycle.evidence.verify.EvidenceService` reads what it judges and
answers every caller; this module decides, and reads nothing itself.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from arvis.domain.checkpoints import Checkpoint, CheckpointReport, check_checkpoints
from arvis.domain.ids import RunId, TenantId
from arvis.lifecycle.evidence.crosscheck import WITNESS_GRACE_S, ChainFacts, TrustedKey, cross_check
from arvis.lifecycle.journal import ChainVisitor, VerifyReport, walk
from arvis.lifecycle.ports import LifecycleReads
from arvis.lifecycle.records import ChainRow, RunRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvidenceReport:
    ok: bool
    entries: int
    broken_at: int | None
    reason: str | None
    checkpoints: int = 0
    """Checkpoints whose signature and head were checked and held."""
    rewritten_before: int | None = None
    witness: str | None = None
    """The first disagreement with the witness; None when none was found (or no
    witness was read)."""
    unsigned: int | None = None
    """Entries after the last checkpoint that held (None: no key to check with)."""
    flagged: str | None = None
    """The run's evidence was found broken before (by the checkpointer, a verify, a
    replay or a deduplicated answer): what was found."""
    audit_incomplete: bool = False
    """The run's audit-incomplete flag as the snapshot read it (for replay's answers)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "entries": self.entries,
            "broken_at": self.broken_at,
            "reason": self.reason,
            "checkpoints": self.checkpoints,
            "rewritten_before": self.rewritten_before,
            "witness": self.witness,
            "unsigned": self.unsigned,
            "flagged": self.flagged,
        }


async def verify_run(
    reads: LifecycleReads,
    tenant_id: TenantId,
    run_id: RunId,
    *,
    key: TrustedKey | None,
    witness: Iterable[Mapping[str, Any]] | None,
    now: datetime,
    visit: ChainVisitor | None = None,
    grace_s: float = WITNESS_GRACE_S,
) -> EvidenceReport:
    """The chain, each entry against its intent, every checkpoint (with ``key``), the
    witness (with ``witness``: its records) and the run's flag, in one snapshot
    (``reads``). ``visit`` sees every verified row, as :func:`walk` says. LookupError:
    no such run."""
    facts = ChainFacts()

    def both(row: ChainRow) -> None:
        facts.visit(row)
        if visit is not None:
            visit(row)

    chain = await walk(reads, tenant_id, run_id, both)
    run = await reads.run(tenant_id, run_id)
    assert run is not None
    report = await _judge(reads, run, chain, facts, key, witness, now, grace_s)
    return dataclasses.replace(report, audit_incomplete=run.audit_incomplete)


async def _judge(
    reads: LifecycleReads,
    run: RunRecord,
    chain: VerifyReport,
    facts: ChainFacts,
    key: TrustedKey | None,
    witness: Iterable[Mapping[str, Any]] | None,
    now: datetime,
    grace_s: float,
) -> EvidenceReport:
    tenant_id, run_id = run.tenant_id, run.run_id
    flagged = _flag_text(run)
    if not chain.ok:
        return EvidenceReport(False, chain.entries, chain.broken_at, chain.reason, flagged=flagged)
    if facts.unfaithful is not None:
        position, problem = facts.unfaithful
        return EvidenceReport(False, chain.entries, position, problem, flagged=flagged)
    checkpoints = await reads.checkpoints(tenant_id, run_id)
    checked, unsigned = 0, None
    if key is not None:
        report = checkpoints_hold(checkpoints, tenant_id, run_id, chain, facts, key)
        if not report.ok:
            return EvidenceReport(
                False,
                chain.entries,
                report.rewritten_before,
                report.problem,
                report.checked,
                report.rewritten_before,
                flagged=flagged,
            )
        checked = report.checked
        unsigned = chain.entries - max((c.length for c in checkpoints), default=0)
    if witness is not None:
        in_flight = await reads.in_flight_intents(tenant_id, run_id)
        disagreement = cross_check(
            witness,
            tenant_id,
            run_id,
            facts,
            checkpoints,
            key,
            length=chain.entries,
            in_flight=in_flight,
            now=now,
            grace_s=grace_s,
        )
        if disagreement is not None:
            position, problem = disagreement
            return EvidenceReport(
                False, chain.entries, position, problem, checked, None, problem, unsigned, flagged
            )
    if run.evidence_broken_at is not None:
        return EvidenceReport(
            False,
            chain.entries,
            run.evidence_broken_at,
            f"flagged: {run.evidence_fault}",
            checked,
            unsigned=unsigned,
            flagged=flagged,
        )
    return EvidenceReport(True, chain.entries, None, None, checked, unsigned=unsigned)


def checkpoints_hold(
    checkpoints: Sequence[Checkpoint],
    tenant_id: str,
    run_id: str,
    chain: VerifyReport,
    facts: ChainFacts,
    key: TrustedKey,
) -> CheckpointReport:
    """A run's signed checkpoints against its verified chain: the one check the server's
    verification and an offline bundle's share."""
    return check_checkpoints(
        checkpoints,
        tenant_id=tenant_id,
        run_id=run_id,
        hashes=facts.hashes,
        length=chain.entries,
        key_id=key.key_id,
        signature_ok=key.verifies,
    )


def _flag_text(run: RunRecord) -> str | None:
    if run.evidence_broken_at is None:
        return None
    return f"position {run.evidence_broken_at}: {run.evidence_fault}"


# A fault that says the key does not fit (a checkpoint of a rotated key), not that the
# run was tampered with: reported, never flagged.
