"""The journal: per-run hash chains, appended under the run's row lock (DESIGN §5).

Entry hash, version 1: SHA-256 over ``arvis-journal-v1``, the previous entry's
hash, the header fields and the canonical (RFC 8785) body text, joined by
newlines. No header field can hold a newline and the body comes last, so the
preimage is unambiguous. The store computes it when it appends (in the same
statement that takes the run's lock); :func:`hash_of` recomputes it here, so
verification never trusts the database's arithmetic.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from arvis.domain.artifacts import GENESIS_HASH, as_utc
from arvis.domain.canonical import canonical_bytes
from arvis.domain.ids import IdempotencyKey, RunId, TenantId
from arvis.lifecycle.ports import JournalEntry, LifecycleStore, LifecycleUnitOfWork

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


def hash_of(entry: JournalEntry) -> str:
    return chain_hash(
        prev_hash=entry.prev_hash,
        tenant_id=entry.tenant_id,
        run_id=entry.run_id,
        position=entry.position,
        kind=entry.kind,
        causal_id=entry.causal_id,
        idempotency_key=entry.idempotency_key,
        attempt=entry.attempt,
        intent_id=entry.intent_id,
        boundary=entry.boundary,
        recorded_at=recorded_text(entry.recorded_at),
        body_text=entry.body_text,
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
