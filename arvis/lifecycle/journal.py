"""The journal: per-run hash chains, appended under the run's row lock (DESIGN §5)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from arvis.domain.artifacts import GENESIS_HASH, entry_hash
from arvis.domain.ids import IdempotencyKey, RunId, TenantId
from arvis.lifecycle.errors import JournalConflict
from arvis.lifecycle.ports import JournalEntry, LifecycleStore, LifecycleUnitOfWork

VERIFY_PAGE = 2000


def hash_of(entry: JournalEntry) -> str:
    return entry_hash(
        tenant_id=entry.tenant_id,
        run_id=entry.run_id,
        position=entry.position,
        kind=entry.kind,
        causal_id=entry.causal_id,
        idempotency_key=entry.idempotency_key,
        attempt=entry.attempt,
        intent_id=entry.intent_id,
        boundary=entry.boundary,
        body=entry.body,
        prev_hash=entry.prev_hash,
        recorded_at=entry.recorded_at,
    )


async def append(
    uow: LifecycleUnitOfWork,
    *,
    tenant_id: TenantId,
    run_id: RunId,
    kind: str,
    causal_id: str,
    idempotency_key: IdempotencyKey,
    attempt: int | None,
    intent_id: str | None,
    boundary: str | None,
    body: dict[str, Any],
    recorded_at: datetime,
) -> JournalEntry:
    """Append one entry to the run's chain and return it.

    Appending the same result for the same attempt again returns the stored
    entry; a different one is a :class:`JournalConflict`, never an overwrite.
    """
    run = await uow.runs.lock(tenant_id, run_id)
    fields: dict[str, Any] = {
        "tenant_id": tenant_id,
        "run_id": run_id,
        "position": run.journal_length + 1,
        "kind": kind,
        "causal_id": causal_id,
        "idempotency_key": idempotency_key,
        "attempt": attempt,
        "intent_id": intent_id,
        "boundary": boundary,
        "body": body,
        "prev_hash": run.journal_head,
        "recorded_at": recorded_at,
    }
    entry = JournalEntry(**fields, entry_hash=entry_hash(**fields))
    if not await uow.journal.insert(entry):
        assert attempt is not None  # only attempt entries have a conflict key
        existing = await uow.journal.for_attempt(tenant_id, idempotency_key, attempt)
        if existing is not None and existing.boundary == boundary and existing.body == body:
            return existing
        raise JournalConflict(
            f"attempt {attempt} of {idempotency_key[:12]}… already has a different result"
        )
    await uow.runs.advance(tenant_id, run_id, entry.position, entry.entry_hash)
    return entry


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    entries: int
    broken_at: int | None
    reason: str | None = None


async def verify(store: LifecycleStore, tenant_id: TenantId, run_id: RunId) -> VerifyReport:
    """Recompute the run's chain; name the first position where it breaks."""
    expected_prev = GENESIS_HASH
    expected_position = 1
    count = 0
    after = 0
    async with store.unit_of_work() as uow:
        run = await uow.runs.get(tenant_id, run_id)
        if run is None:
            raise LookupError(run_id)
        while True:
            page = await uow.journal.page(tenant_id, run_id, after, VERIFY_PAGE)
            for entry in page:
                if entry.position != expected_position:
                    return VerifyReport(False, count, expected_position, "entry missing")
                if entry.prev_hash != expected_prev:
                    return VerifyReport(False, count, entry.position, "prev_hash does not link")
                if hash_of(entry) != entry.entry_hash:
                    return VerifyReport(False, count, entry.position, "entry altered")
                expected_prev = entry.entry_hash
                expected_position += 1
                count += 1
            if len(page) < VERIFY_PAGE:
                break
            after = page[-1].position
    if count != run.journal_length or expected_prev != run.journal_head:
        return VerifyReport(False, count, count + 1, "entries missing at the end of the chain")
    return VerifyReport(True, count, None)
