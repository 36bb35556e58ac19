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
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from arvis.domain.boundary import UNCERTAIN_BOUNDARIES
from arvis.domain.ids import RunId, TenantId
from arvis.domain.intent import GENESIS_HASH, as_utc
from arvis.lifecycle.ports import ChainRow, JournalEntry, LifecycleReads

VERIFY_PAGE = 5000
HASH_VERSION = "arvis-journal-v1"


def recorded_text(moment: datetime) -> str:
    """The timestamp as it enters the hash: UTC, microseconds, ISO 8601."""
    return as_utc(moment).isoformat(timespec="microseconds")


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


def row_hash(tenant_id: str, run_id: str, row: ChainRow) -> str:
    """The entry hash a chain row's fields give (not the hash it stores)."""
    position, prev, _stored, kind, causal, key, attempt, intent, boundary, at, body = row
    return chain_hash(
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
        recorded_at=recorded_text(at),
        body_text=body,
    )


def entry_row(entry: JournalEntry) -> ChainRow:
    """The chain row of an entry read whole."""
    return (
        entry.position,
        entry.prev_hash,
        entry.entry_hash,
        entry.kind,
        entry.causal_id,
        entry.idempotency_key,
        entry.attempt,
        entry.intent_id,
        entry.boundary,
        entry.recorded_at,
        entry.body_text,
    )


def recomputes(entry: JournalEntry) -> bool:
    """True when the entry's own fields give the hash it stores (issue 23: what is
    served is verified)."""
    return row_hash(entry.tenant_id, entry.run_id, entry_row(entry)) == entry.entry_hash


@dataclass(frozen=True)
class VerifyReport:
    ok: bool
    entries: int
    broken_at: int | None
    reason: str | None = None


ChainVisitor = Callable[[ChainRow], None]


async def walk(
    reads: LifecycleReads,
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
    run = await reads.run(tenant_id, run_id)
    if run is None:
        raise LookupError(run_id)
    expected_prev = GENESIS_HASH
    expected_position = 1
    uncertain: dict[int, str] = {}
    count = 0
    after = 0
    while True:
        rows = await reads.chain(tenant_id, run_id, after, VERIFY_PAGE)
        for row in rows:
            position, prev, stored, kind = row[0], row[1], row[2], row[3]
            attempt, boundary = row[6], row[8]
            if position != expected_position:
                return VerifyReport(False, count, expected_position, "entry missing")
            if prev != expected_prev:
                return VerifyReport(False, count, position, "prev_hash does not link")
            if row_hash(tenant_id, run_id, row) != stored:
                return VerifyReport(False, count, position, "entry altered")
            if boundary in _UNCERTAIN and attempt is not None:
                uncertain[position] = stored
            elif kind == "resolution" and not _resolves(row[10], uncertain):
                return VerifyReport(False, count, position, "resolution of no uncertain entry")
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


# Chain rows carry the boundary as text: StrEnum members hash and compare as their values.
_UNCERTAIN = frozenset(UNCERTAIN_BOUNDARIES)


def _resolves(body_text: str, uncertain: dict[int, str]) -> bool:
    """A resolution names an earlier uncertain entry of its chain, by position and hash."""
    try:
        resolves = json.loads(body_text)["resolves"]
        return bool(uncertain.get(resolves["position"]) == resolves["entry_hash"])
    except (ValueError, KeyError, TypeError):
        return False
