"""Replay: recorded results, in causal order. Never mints, activates or dispatches."""

from __future__ import annotations

from arvis.domain.ids import RunId, TenantId
from arvis.lifecycle.errors import NotFound
from arvis.lifecycle.journal import VerifyReport, verify
from arvis.lifecycle.ports import JournalEntry, LifecycleStore
from arvis.lifecycle.results import SyscallResult, result_from_entry

PAGE = 2000
RESULT_KINDS = ("execution", "refusal", "recovery")


class ReplayService:
    """Read-only views of a run's journal for auditors and resumed agents."""

    def __init__(self, store: LifecycleStore) -> None:
        self.store = store

    async def replay(self, tenant_id: TenantId, run_id: RunId) -> list[SyscallResult]:
        """The latest recorded result of each causal id, ordered by its first entry.

        A resumed agent reads the answer it would have got for each decision,
        in the order the decisions were first settled.
        """
        first_seen: dict[str, int] = {}
        latest: dict[str, JournalEntry] = {}
        audit_incomplete = False
        async with self.store.unit_of_work() as uow:
            run = await uow.runs.get(tenant_id, run_id)
            if run is None:
                raise NotFound(f"no run {run_id}")
            audit_incomplete = run.audit_incomplete
            after = 0
            while True:
                page = await uow.journal.page(tenant_id, run_id, after, PAGE)
                for entry in page:
                    if entry.kind not in RESULT_KINDS:
                        continue
                    first_seen.setdefault(entry.causal_id, entry.position)
                    latest[entry.causal_id] = entry
                if len(page) < PAGE:
                    break
                after = page[-1].position
        ordered = sorted(latest.values(), key=lambda e: first_seen[e.causal_id])
        return [result_from_entry(e, audit_incomplete=audit_incomplete) for e in ordered]

    async def journal(
        self, tenant_id: TenantId, run_id: RunId, after: int = 0, limit: int = 100
    ) -> list[JournalEntry]:
        async with self.store.unit_of_work() as uow:
            if await uow.runs.get(tenant_id, run_id) is None:
                raise NotFound(f"no run {run_id}")
            return await uow.journal.page(tenant_id, run_id, after, limit)

    async def verify(self, tenant_id: TenantId, run_id: RunId) -> VerifyReport:
        try:
            return await verify(self.store, tenant_id, run_id)
        except LookupError:
            raise NotFound(f"no run {run_id}") from None
