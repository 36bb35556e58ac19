"""The journal: per-run hash chains, appended under the run's row lock (DESIGN §5).

Entry hash, version 1: SHA-256 over ``arvis-journal-v1``, the previous entry's
hash, the header fields and the canonical (RFC 8785) body text, joined by
newlines. No header field can hold a newline and the body comes last, so the
preimage is unambiguous. The store computes it when it appends (in the same
statement that takes the run's lock); :func:`chain_hash` recomputes it here, so
verification never trusts the database's arithmetic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from arvis.domain.artifacts import GENESIS_HASH, as_utc
from arvis.domain.boundary import EffectBoundary
from arvis.domain.canonical import canonical_bytes
from arvis.domain.ids import ConfirmationId, IdempotencyKey, IntentId, RunId, TenantId
from arvis.lifecycle.ports import ChainRow, JournalEntry, LifecycleStore, LifecycleUnitOfWork

VERIFY_PAGE = 5000
HASH_VERSION = "arvis-journal-v1"


def recorded_text(moment: datetime) -> str:
    """The timestamp as it enters the hash: UTC, microseconds, ISO 8601."""
    return as_utc(moment).isoformat(timespec="microseconds")


def body_text(body: dict[str, Any]) -> str:
    return canonical_bytes(body).decode()


def chain_hash(
    *,
    prev_hash: str,
    tenant_id: str,
    run_id: str,
    position: int,
    kind: str,
    causal_id: str,
    idempotency_key: str,
    attempt: int | None,
    intent_id: str | None,
    boundary: str | None,
    recorded_at: str,
    body_text: str,
) -> str:
    preimage = "\n".join(
        (
            HASH_VERSION,
            prev_hash,
            tenant_id,
            run_id,
            str(position),
            kind,
            causal_id,
            idempotency_key,
            "" if attempt is None else str(attempt),
            intent_id or "",
            boundary or "",
            recorded_at,
            body_text,
        )
    )
    return hashlib.sha256(preimage.encode()).hexdigest()


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
    """Append one entry to the run's chain and return it (see the store's contract)."""
    return await uow.journal.append(
        tenant_id=tenant_id,
        run_id=run_id,
        kind=kind,
        causal_id=causal_id,
        idempotency_key=idempotency_key,
        attempt=attempt,
        intent_id=intent_id,
        boundary=boundary,
        body_text=body_text(body),
        recorded_at=recorded_at,
    )


async def record_attempt(
    uow: LifecycleUnitOfWork,
    *,
    tenant_id: TenantId,
    run_id: RunId,
    kind: str,
    causal_id: str,
    idempotency_key: IdempotencyKey,
    attempt: int,
    intent_id: IntentId,
    boundary: EffectBoundary,
    body: dict[str, Any],
    recorded_at: datetime,
    retryable: bool,
    confirmation_id: ConfirmationId | None,
) -> JournalEntry:
    """Journal an attempt's result and settle it: the intent, the action's latest
    attempt, and the consent, released only when the effect provably did not start.

    The general path's form of ``arvis_journal_append`` with ``p_settle``
    (arvis/migrations/sql/0003_functions.sql); the dispatcher's settlement and the
    recovery sweeper both end an attempt here.
    """
    entry = await append(
        uow,
        tenant_id=tenant_id,
        run_id=run_id,
        kind=kind,
        causal_id=causal_id,
        idempotency_key=idempotency_key,
        attempt=attempt,
        intent_id=intent_id,
        boundary=boundary.value,
        body=body,
        recorded_at=recorded_at,
    )
    await uow.intents.settle(tenant_id, intent_id, boundary)
    await uow.actions.settle(
        tenant_id, idempotency_key, attempt, boundary, retryable, entry.position
    )
    if confirmation_id is not None:
        settled = "APPROVED" if boundary.retry_is_free else "CONSUMED"
        await uow.confirmations.transition(tenant_id, confirmation_id, ("RESERVED",), settled)
    return entry


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    entries: int
    broken_at: int | None
    reason: str | None = None


ChainVisitor = Callable[[ChainRow], None]


async def walk(
    uow: LifecycleUnitOfWork,
    tenant_id: TenantId,
    run_id: RunId,
    visit: ChainVisitor | None = None,
) -> VerifyReport:
    """Recompute the run's chain page by page, handing each verified row to ``visit``;
    name the first position where it breaks. Raises LookupError for no such run.

    A row is handed on only after it verified, so a visitor never sees an entry
    that is not part of an intact prefix; the caller must still look at the report
    before trusting what it collected (the break may come later, or at the end).
    """
    run = await uow.runs.get(tenant_id, run_id)
    if run is None:
        raise LookupError(run_id)
    expected_prev = GENESIS_HASH
    expected_position = 1
    count = 0
    after = 0
    while True:
        rows = await uow.journal.chain(run_id, tenant_id, after, VERIFY_PAGE)
        for row in rows:
            position, prev, stored, kind, causal, key, attempt, intent, boundary = row[:9]
            if position != expected_position:
                return VerifyReport(False, count, expected_position, "entry missing")
            if prev != expected_prev:
                return VerifyReport(False, count, position, "prev_hash does not link")
            computed = chain_hash(
                prev_hash=prev,
                tenant_id=tenant_id,
                run_id=run_id,
                position=position,
                kind=kind,
                causal_id=causal,
                idempotency_key=key,
                attempt=attempt,
                intent_id=intent,
                boundary=boundary,
                recorded_at=recorded_text(row[9]),
                body_text=row[10],
            )
            if computed != stored:
                return VerifyReport(False, count, position, "entry altered")
            if visit is not None:
                visit(row)
            expected_prev = stored
            expected_position += 1
            count += 1
        if len(rows) < VERIFY_PAGE:
            break
        after = rows[-1][0]
    if count != run.journal_length or expected_prev != run.journal_head:
        return VerifyReport(False, count, count + 1, "entries missing at the end of the chain")
    return VerifyReport(True, count, None)


async def verify(store: LifecycleStore, tenant_id: TenantId, run_id: RunId) -> VerifyReport:
    """Recompute the run's chain; name the first position where it breaks."""
    async with store.unit_of_work() as uow:
        return await walk(uow, tenant_id, run_id)
