"""What a tenant's budgets have used in their current windows (``GET /v1/budgets``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from arvis.domain.clock import Clock
from arvis.domain.ids import TenantId
from arvis.lifecycle.policy.budgets import BudgetConfig, Budgets, window_of
from arvis.lifecycle.ports import LifecycleStore


@dataclass(frozen=True, slots=True)
class ScopeUse:
    scope: dict[str, str]
    """``{}`` for the whole tenant, else the principal and/or tool counted."""
    used: Decimal
    remaining: Decimal


@dataclass(frozen=True, slots=True)
class BudgetView:
    config: BudgetConfig
    window_start: datetime
    resets_at: datetime
    usage: list[ScopeUse]
    """Every scope with a row in the current window; a scope not listed has used nothing."""


async def budget_report(
    store: LifecycleStore, budgets: Budgets, tenant_id: TenantId, now: datetime
) -> list[BudgetView]:
    """The tenant's budgets with their use in the window holding ``now``: one snapshot."""
    applying = budgets.applying(tenant_id)
    windows = {budget.name: window_of(now, budget.window_s) for budget in applying}
    if not applying:
        return []
    async with store.reading() as reads:
        rows = await reads.budget_usage(
            tenant_id, [(name, start) for name, (start, _) in windows.items()]
        )
    views = []
    for budget in applying:
        start, end = windows[budget.name]
        usage = [
            ScopeUse(
                scope=json.loads(row.scope_key),
                used=row.used,
                remaining=max(budget.limit - row.used, Decimal(0)),
            )
            for row in rows
            if row.budget == budget.name
        ]
        views.append(BudgetView(budget, start, end, usage))
    return views


@dataclass(eq=False)
class BudgetReports:
    """The deployment's budgets and their use, for auditors and admins."""

    store: LifecycleStore
    budgets: Budgets
    clock: Clock

    async def report(self, tenant_id: TenantId) -> list[BudgetView]:
        return await budget_report(self.store, self.budgets, tenant_id, self.clock.now())
