"""Replay: recorded results, in causal order. Never mints, activates or dispatches.

Replay verifies what it reads (DESIGN §4, §10 "What is served is verified"): the
run's whole chain in the same pass that collects the answer, each entry against the
intent it settles, the signed checkpoints with the deployment's key, the witness when
one can be read, and the run's flag — the one verification of
:class:`arvis.lifecycle.evidence.verify.EvidenceService`, which ``verify`` answers too. A run
that does not verify is refused with :class:`ChainBroken`, naming the position, never
handed to a resumed agent. Answers are paged by causal id so a long run never becomes
one unbounded answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from arvis.domain.boundary import EffectBoundary
from arvis.domain.identity import Identity
from arvis.domain.ids import RunId, TenantId
from arvis.domain.journal import JournalKind
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.clock import SystemClock
from arvis.lifecycle.errors import ChainBroken, NotFound, RunOfAnotherPrincipal
from arvis.lifecycle.evidence.verify import EvidenceService
from arvis.lifecycle.ports import LifecycleStore
from arvis.lifecycle.records import ChainRow, ConfirmationRecord, JournalEntry
from arvis.lifecycle.results import SyscallResult, result_from_entry
from arvis.lifecycle.runs import RunQuery, RunsPage, page_of

MAX_PENDING_SHOWN = 100


@dataclass(frozen=True, slots=True)
class RunDetails:
    pending: list[ConfirmationRecord]
    """The run's confirmations still waiting for consent, oldest first."""
    arguments: dict[str, Any]
    """The frozen arguments by causal id, as stored (``[journal] redact`` applied)."""


RESULT_KINDS = frozenset({"execution", "refusal", "recovery"})
MAX_REPLAY_PAGE = 1000
# Bodies are canonical JSON, so a refusal's reason appears exactly so.
_CAUSAL_CONFLICT = '"reason":"causal_id_conflict"'


def _is_result(kind: str, boundary: str | None) -> bool:
    # A consent denied or expired is journaled with PRE_EFFECT_REFUSAL: the decision's
    # result until it is posted again (issue 16: a refused call provably never ran).
    return kind in RESULT_KINDS or (kind == "confirmation" and boundary is not None)


@dataclass(frozen=True, slots=True)
class ReplayPage:
    results: list[SyscallResult]
    """The latest recorded result of each causal id, ordered by its first entry."""
    next_after: int | None
    """Pass as ``after`` for the next page; None on the last page."""


@dataclass
class _Collector:
    """Keeps the latest entry of the first ``limit`` causal ids first seen after ``after``."""

    tenant_id: TenantId
    run_id: RunId
    after: int
    limit: int | None
    seen: set[str] = field(default_factory=set)
    page: dict[str, tuple[int, ChainRow]] = field(default_factory=dict)
    more: bool = False
    resolutions: dict[tuple[str, int], ChainRow] = field(default_factory=dict)
    """(causal id, resolved position) → the resolution entry, shown beside that result."""

    def __call__(self, row: ChainRow) -> None:
        position, causal, kind = row[0], row[4], row[3]
        if kind == "resolution":
            resolved = json.loads(row[10])["resolves"]["position"]
            self.resolutions[(causal, resolved)] = row
            return
        if not _is_result(kind, row[8]):
            return
        if kind == "refusal" and _CAUSAL_CONFLICT in row[10]:
            # Another decision posted under this causal id, refused: not a result of
            # the decision the causal id names, which a resumed agent must see.
            return
        if causal in self.page:
            self.page[causal] = (self.page[causal][0], row)
            return
        if causal in self.seen:
            return
        self.seen.add(causal)
        if position <= self.after:
            return
        if self.limit is not None and len(self.page) >= self.limit:
            self.more = True
            return
        self.page[causal] = (position, row)

    def entries(self) -> list[tuple[JournalEntry, JournalEntry | None]]:
        """Each result's entry, and the resolution of it when there is one."""
        found: list[tuple[JournalEntry, JournalEntry | None]] = []
        for _, row in self.page.values():
            resolution = self.resolutions.get((row[4], row[0]))
            found.append(
                (self._entry(row), None if resolution is None else self._entry(resolution))
            )
        return found

    def _entry(self, row: ChainRow) -> JournalEntry:
        position, prev, stored, kind, causal, key, attempt, intent, boundary, at, body = row
        return JournalEntry(
            tenant_id=self.tenant_id,
            run_id=self.run_id,
            position=position,
            kind=JournalKind(kind),
            causal_id=causal,
            idempotency_key=key,
            attempt=attempt,
            intent_id=intent,
            boundary=None if boundary is None else EffectBoundary(boundary),
            body_text=body,
            prev_hash=prev,
            entry_hash=stored,
            recorded_at=at,
        )


class ReplayService:
    """Read-only views of a run's journal for auditors and resumed agents."""

    def __init__(self, store: LifecycleStore, evidence: EvidenceService | None = None) -> None:
        self.store = store
        self.evidence = evidence or EvidenceService(store, SystemClock())
        """The one verification of a run (its chain, checkpoints, witness and flag)."""

    async def replay_page(
        self,
        tenant_id: TenantId,
        run_id: RunId,
        after: int = 0,
        limit: int = 100,
        *,
        reader: Identity | None = None,
    ) -> ReplayPage:
        """One page of the recorded results, after the causal id first seen at ``after``.

        ``reader``: who asks (None: an operator, who reads every run); see
        :meth:`may_read`."""
        await self.may_read(tenant_id, run_id, reader)
        collector = _Collector(tenant_id, run_id, after, min(limit, MAX_REPLAY_PAGE))
        audit_incomplete = await self._collect(collector)
        last_first_seen = max((first for first, _ in collector.page.values()), default=None)
        return ReplayPage(
            results=[
                result_from_entry(e, audit_incomplete=audit_incomplete, resolution=r)
                for e, r in collector.entries()
            ],
            next_after=last_first_seen if collector.more else None,
        )

    async def replay(
        self, tenant_id: TenantId, run_id: RunId, *, reader: Identity | None = None
    ) -> list[SyscallResult]:
        """Every recorded result of the run, verified, in causal order (in-process
        callers; the HTTP route pages)."""
        await self.may_read(tenant_id, run_id, reader)
        collector = _Collector(tenant_id, run_id, 0, None)
        audit_incomplete = await self._collect(collector)
        return [
            result_from_entry(e, audit_incomplete=audit_incomplete, resolution=r)
            for e, r in collector.entries()
        ]

    async def may_read(self, tenant_id: TenantId, run_id: RunId, reader: Identity | None) -> None:
        """Raise :class:`RunOfAnotherPrincipal` unless ``reader`` may read the run: an
        auditor (or admin) reads every run of its tenant, an agent only the runs bound
        to its own principal (DESIGN §10). A run bound to nobody yet (from before
        revision 0010, with nothing recorded of a principal) is anyone's to read."""
        if reader is None or reader.has_role("auditor"):
            return
        async with self.store.reading() as reads:
            run = await reads.run(tenant_id, run_id)
        if run is not None and run.principal_id not in (None, reader.principal_id):
            raise RunOfAnotherPrincipal(run_id)

    async def _collect(self, collector: _Collector) -> bool:
        """Verify the run into ``collector``; answer the run's audit-incomplete flag."""
        report = await self.evidence.verify(collector.tenant_id, collector.run_id, collector)
        if not report.ok:
            raise ChainBroken(
                collector.run_id,
                report.entries + 1 if report.broken_at is None else report.broken_at,
                report.reason or "broken",
            )
        return report.audit_incomplete

    async def journal(
        self, tenant_id: TenantId, run_id: RunId, after: int = 0, limit: int = 100
    ) -> list[JournalEntry]:
        async with self.store.reading() as reads:
            if await reads.run(tenant_id, run_id) is None:
                raise NotFound(f"no run {run_id}")
            return await reads.page(tenant_id, run_id, after, limit)

    async def run_details(
        self, tenant_id: TenantId, run_id: RunId, causal_ids: Sequence[str]
    ) -> RunDetails:
        """What a run's page shows beside its entries, in one snapshot: the calls waiting
        for consent, and the frozen arguments of the decisions named (as stored)."""
        async with self.store.reading() as reads:
            pending = await reads.run_confirmations(
                tenant_id, run_id, ConfirmationState.PENDING, MAX_PENDING_SHOWN
            )
            wanted = {*causal_ids, *(c.causal_id for c in pending)}
            return RunDetails(pending, await reads.payloads(tenant_id, run_id, sorted(wanted)))

    async def runs(self, tenant_id: TenantId, query: RunQuery) -> RunsPage:
        """One page of the tenant's runs, newest first, with their status and flags."""
        async with self.store.reading() as reads:
            return page_of(await reads.runs(tenant_id, query), query.limit)
