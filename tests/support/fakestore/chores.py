"""What the sweepers and the lease read and write in the fake store: uncertain attempts
due for a reconcile ask, expirable consents, in-flight attempts, leases by the database's
clock, and the checkpoint store with the evidence flags."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from arvis.domain.checkpoints import Checkpoint
from arvis.domain.ids import IdempotencyKey, RunId, TenantId
from arvis.lifecycle.ports import (
    ConfirmationRecord,
    InFlightAttempt,
    UncertainAttempt,
)
from tests.support.fakestore.base import StoreBase, in_flight_of
from tests.support.fakestore.reads import confirmation_record, uncertain_attempt
from tests.support.fakestore.tables import (
    LeaseRow,
    Tables,
)


class ChoreSteps(StoreBase):
    async def open_uncertain(self, *, limit: int, max_asks: int) -> list[UncertainAttempt]:
        await self._enter()
        t = self.tables
        now = self.now()
        due = [
            (row.next_ask_at or now, (tenant, key, attempt))
            for (tenant, key, attempt), row in t.resolutions.items()
            if row.boundary is None and (row.next_ask_at or now) <= now and row.asks < max_asks
        ]
        due.sort(key=lambda item: item[0])
        found = [uncertain_attempt(t, *where) for _, where in due[:limit]]
        return [attempt for attempt in found if attempt is not None]

    async def record_ask(
        self, tenant_id: TenantId, key: str, attempt: int, next_in_s: float
    ) -> None:
        await self._enter()
        t = self.tables.copy()
        row = t.resolutions.get((tenant_id, key, attempt))
        if row is not None and row.boundary is None:
            t.resolutions[(tenant_id, key, attempt)] = replace(
                row, asks=row.asks + 1, next_ask_at=self.now() + timedelta(seconds=next_in_s)
            )
        self._commit("record_ask", t)

    async def expirable(self, *, limit: int) -> list[ConfirmationRecord]:
        await self._enter()
        t = self.tables
        now = self.now()
        rows = sorted(
            (
                row
                for row in t.confirmations.values()
                if row.state in ("PENDING", "APPROVED") and row.expires_at <= now
            ),
            key=lambda row: row.expires_at,
        )
        return [confirmation_record(t, row) for row in rows[:limit]]

    async def in_flight(self, *, limit: int, owner: str | None = None) -> list[InFlightAttempt]:
        await self._enter()
        t = self.tables
        now = self.now()
        if owner is None:
            rows = [a for a in t.attempts.values() if not self._live(t, a.owner, now)]
        else:
            rows = [a for a in t.attempts.values() if a.owner == owner]
        rows.sort(key=lambda a: a.admitted_at)
        return [in_flight_of(t, row) for row in rows[:limit]]

    @staticmethod
    def _live(t: Tables, name: str, now: datetime) -> bool:
        lease = t.leases.get(name)
        return lease is not None and not lease.released and lease.expires_at > now

    async def attempt(self, tenant_id: TenantId, key: IdempotencyKey) -> InFlightAttempt | None:
        await self._enter()
        row = self.tables.attempts.get((tenant_id, key))
        return None if row is None else in_flight_of(self.tables, row)

    async def claim_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        await self._enter()
        t = self.tables.copy()
        now = self.now()
        lease = t.leases.get(name)
        if lease is not None and not lease.released and lease.expires_at > now:
            return False
        t.leases[name] = LeaseRow(holder=holder, expires_at=now + timedelta(seconds=ttl_s))
        self._commit("claim_lease", t)
        return True

    async def beat_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        await self._enter()
        t = self.tables.copy()
        lease = t.leases.get(name)
        if lease is None or lease.holder != holder or lease.released:
            return False
        t.leases[name] = replace(lease, expires_at=self.now() + timedelta(seconds=ttl_s))
        self._commit("beat_lease", t)
        return True

    async def release_lease(self, name: str, holder: str) -> bool:
        await self._enter()
        t = self.tables.copy()
        lease = t.leases.get(name)
        if lease is None or lease.holder != holder or lease.released:
            return False
        t.leases[name] = replace(lease, released=True, expires_at=self.now())
        self._commit("release_lease", t)
        return True

    async def live_leases(self, instance_id: str) -> list[tuple[str, str]]:
        await self._enter()
        now = self.now()
        return sorted(
            (name, lease.holder)
            for name, lease in self.tables.leases.items()
            if name.startswith(instance_id + "/") and self._live(self.tables, name, now)
        )

    def expire_lease(self, name: str) -> None:
        """The lease ``name`` lapsed, as if its holder stopped beating (a crash)."""
        lease = self.tables.leases[name]
        t = self.tables.copy()
        t.leases[name] = replace(lease, expires_at=self.now())
        self.tables = t

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        await self._enter()
        t = self.tables.copy()
        t.checkpoints.setdefault(
            (checkpoint.tenant_id, checkpoint.run_id, checkpoint.length), checkpoint
        )
        self._commit("save_checkpoint", t)

    async def flag_run(self, tenant_id: str, run_id: str, position: int, fault: str) -> None:
        await self._enter()
        t = self.tables.copy()
        run = t.runs.get((tenant_id, run_id))
        if run is not None and run.evidence_broken_at is None:
            t.runs[(tenant_id, run_id)] = replace(
                run, evidence_broken_at=position, evidence_fault=fault
            )
        self._commit("flag_run", t)

    async def checkpoints(self, tenant_id: TenantId, run_id: RunId) -> list[Checkpoint]:
        await self._enter()
        return [
            c
            for (tenant, run, _), c in sorted(self.tables.checkpoints.items())
            if (tenant, run) == (tenant_id, run_id)
        ]
