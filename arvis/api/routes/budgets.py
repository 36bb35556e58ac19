"""``GET /v1/budgets``: the caller's tenant's budgets, their limits and current use."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from arvis.lifecycle.policy.budget_report import BudgetView
from arvis.web.identity import AuditorIdentity, KernelDep
from arvis.web.problems import problem_responses

router = APIRouter(tags=["budgets"])


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class ScopeUseOut(_Out):
    scope: dict[str, str]
    """``{}``: the whole tenant; else the principal and/or tool this row counts."""
    used: int | float
    remaining: int | float


class BudgetOut(_Out):
    name: str
    unit: Literal["calls", "field"]
    field: str | None
    """The payload field summed, when ``unit`` is ``field``."""
    limit: int | float
    per: str
    scope: list[str]
    tools: list[str] | None
    """The tools charged; null: every tool."""
    window_start: datetime
    resets_at: datetime
    usage: list[ScopeUseOut]
    """Each scope that has used some of the current window (others have used nothing)."""


class BudgetsOut(_Out):
    tenant_id: str
    budgets: list[BudgetOut]


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def _out(view: BudgetView) -> BudgetOut:
    config = view.config
    return BudgetOut(
        name=config.name,
        unit="calls" if config.field is None else "field",
        field=config.field,
        limit=_number(config.limit),
        per=config.per,
        scope=list(config.scope),
        tools=config.tools,
        window_start=view.window_start,
        resets_at=view.resets_at,
        usage=[
            ScopeUseOut(scope=u.scope, used=_number(u.used), remaining=_number(u.remaining))
            for u in view.usage
        ],
    )


@router.get("/v1/budgets", response_model=BudgetsOut, responses=problem_responses(401, 403, 503))
async def list_budgets(identity: AuditorIdentity, kernel: KernelDep) -> BudgetsOut:
    """The budgets that apply to this tenant, with what each scope used this window
    (auditor or admin)."""
    views = await kernel.lifecycle.budgets.report(identity.tenant_id)
    return BudgetsOut(tenant_id=identity.tenant_id, budgets=[_out(view) for view in views])
