"""Verification beyond the chain: signed checkpoints, and a witness's account.

The chain alone proves a run was not edited by someone who did not recompute the
hashes. The checkpoints prove more: the chain read must contain the head each
one signed, at its length, or the run was rewritten before that position —
however well the rewrite linked. The witness is a second account kept outside
the database; every receipt and checkpoint in it must agree with what the
database says, and the first disagreement is named.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from arvis.domain.checkpoints import Checkpoint, check_checkpoints, signed_text
from arvis.domain.ids import RunId, TenantId
from arvis.evidence.keys import PublicKey
from arvis.lifecycle.checkpoints import CheckpointStore
from arvis.lifecycle.journal import VerifyReport, walk
from arvis.lifecycle.ports import ChainRow, LifecycleReads, LifecycleStore


@dataclass
class ChainFacts:
    """What a verified walk of the chain saw: the hash at each position, and the
    intent commitment each receipt-bearing entry recorded."""

    hashes: dict[int, str] = field(default_factory=dict)
    commitments: dict[str, tuple[int, str]] = field(default_factory=dict)
    """intent id → (position, intent commitment in the entry's receipt)."""

    def visit(self, row: ChainRow) -> None:
        position, _prev, entry_hash = row[0], row[1], row[2]
        self.hashes[position] = entry_hash
        intent_id = row[7]
        if intent_id is not None and '"receipt"' in row[10]:
            receipt = json.loads(row[10]).get("receipt")
            if isinstance(receipt, dict) and isinstance(receipt.get("intent_commitment"), str):
                self.commitments[intent_id] = (position, receipt["intent_commitment"])


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
    witness was given)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "entries": self.entries,
            "broken_at": self.broken_at,
            "reason": self.reason,
            "checkpoints": self.checkpoints,
            "rewritten_before": self.rewritten_before,
            "witness": self.witness,
        }


async def verify_evidence(
    reads: LifecycleReads,
    tenant_id: TenantId,
    run_id: RunId,
    checkpoints: list[Checkpoint],
    public_key: PublicKey | None,
    witness: Iterable[Mapping[str, Any]] | None = None,
) -> EvidenceReport:
    """The chain, then every checkpoint (with ``public_key``), then the witness."""
    facts = ChainFacts()
    chain: VerifyReport = await walk(reads, tenant_id, run_id, facts.visit)
    if not chain.ok:
        return EvidenceReport(False, chain.entries, chain.broken_at, chain.reason)
    checked = 0
    if public_key is not None:
        report = check_checkpoints(
            checkpoints,
            tenant_id=tenant_id,
            run_id=run_id,
            hashes=facts.hashes,
            length=chain.entries,
            key_id=public_key.key_id,
            signature_ok=public_key.verifies,
        )
        if not report.ok:
            return EvidenceReport(
                False,
                chain.entries,
                report.rewritten_before,
                report.problem,
                report.checked,
                report.rewritten_before,
            )
        checked = report.checked
    if witness is not None:
        disagreement = cross_check(witness, tenant_id, run_id, facts, checkpoints, public_key)
        if disagreement is not None:
            return EvidenceReport(
                False,
                chain.entries,
                disagreement[0],
                disagreement[1],
                checked,
                None,
                disagreement[1],
            )
    return EvidenceReport(True, chain.entries, None, None, checked)


def cross_check(
    records: Iterable[Mapping[str, Any]],
    tenant_id: str,
    run_id: str,
    facts: ChainFacts,
    checkpoints: list[Checkpoint],
    public_key: PublicKey | None,
) -> tuple[int, str] | None:
    """The first (lowest position) disagreement between the database and the witness."""
    intents: dict[str, str] = {}
    witnessed: dict[int, Checkpoint] = {}
    seen = False
    for record in records:
        if record.get("tenant_id") != tenant_id or record.get("run_id") != run_id:
            continue
        seen = True
        if record.get("type") == "intent":
            # The last record of an intent is what was admitted: an earlier one may be
            # of a round the store answered 'stale' (decided again, same intent id).
            intents[str(record.get("intent_id"))] = str(record.get("intent_commitment"))
        elif record.get("type") == "checkpoint":
            try:
                checkpoint = Checkpoint.from_record(record)
            except ValueError as exc:
                return 0, f"the witness holds an unreadable checkpoint: {exc}"
            witnessed[checkpoint.length] = checkpoint
    if not seen:
        return (1, f"the witness has no record of run {run_id}") if facts.hashes else None
    problems: list[tuple[int, str]] = []
    for intent_id, (position, commitment) in facts.commitments.items():
        if intent_id not in intents:
            problems.append(
                (position, f"position {position}: the witness has no intent {intent_id}")
            )
        elif intents[intent_id] != commitment:
            problems.append(
                (
                    position,
                    f"position {position}: intent {intent_id} commits to {commitment[:16]} in the"
                    f" database, to {intents[intent_id][:16]} in the witness",
                )
            )
    stored = {c.length: c for c in checkpoints}
    for length, checkpoint in witnessed.items():
        at = signed_text(checkpoint.signed_at)
        if public_key is not None and not public_key.verifies(checkpoint):
            problems.append(
                (length, f"the witness's checkpoint of {length} entries at {at} is not signed")
            )
        elif facts.hashes.get(length) != checkpoint.head_hash:
            problems.append(
                (
                    length,
                    f"position {length}: the database's chain differs from the witness's"
                    f" checkpoint of {length} entries at {at}",
                )
            )
        elif length not in stored or stored[length] != checkpoint:
            problems.append(
                (length, f"the checkpoint of {length} entries at {at} is missing from the database")
            )
    for length in stored.keys() - witnessed.keys():
        problems.append(
            (length, f"the database's checkpoint of {length} entries is not in the witness")
        )
    return min(problems) if problems else None


async def verify_stored_run(
    store: LifecycleStore,
    checkpoints: CheckpointStore,
    tenant_id: TenantId,
    run_id: RunId,
    public_key: PublicKey | None,
    witness: Iterable[Mapping[str, Any]] | None = None,
) -> EvidenceReport:
    """Verify a run in the store. LookupError: no such run.

    The checkpoints are read before the chain: every one of them was signed over a
    head the chain (which only grows) already had, so a checkpoint newer than the
    chain read cannot be mistaken for a rewrite.
    """
    signed = await checkpoints.checkpoints(tenant_id, run_id)
    async with store.reading() as reads:
        return await verify_evidence(reads, tenant_id, run_id, signed, public_key, witness)
