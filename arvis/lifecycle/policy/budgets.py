"""Durable budgets (``[[budgets]]`` in ``arvis.toml``, docs/policy.md).

A budget caps calls, or the sum of a numeric payload field, per tenant — and,
when its ``scope`` says so, per principal and/or per tool — over fixed windows
of ``per`` (aligned to the Unix epoch, in UTC: ``per = "1d"`` resets at UTC
midnight). Python decides which budgets a call is charged to and how much
(:meth:`Budgets.charges`); the admitting statement adds each charge to its
window's row only while the sum stays within the limit, in the same commit as
the attempt, or admits nothing (``budget_exceeded``). The attempt's row keeps
what it was charged, and the entry that settles it gives the charge back when
the effect provably did not start (``EFFECT_NOT_STARTED``); an uncertain
outcome keeps holding it. A deduplicated call, a refusal and a request for
consent are never charged.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arvis.domain.errors import ConfigurationError
from arvis.domain.sections import parse_section

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DURATION = re.compile(r"^([0-9]{1,6})([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_WINDOW_S = 366 * 86400
# Amounts and limits are exact decimals: these bound their text, not their meaning.
_MAX_DIGITS = 30
Scope = Literal["principal", "tool"]


def parse_duration(text: str) -> int:
    """``"90s"``, ``"15m"``, ``"1h"``, ``"7d"`` in seconds: positive, at most 366 days."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration like '30m', '1h' or '1d'")
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise ValueError(f"{text!r}: a budget's window must be longer than zero")
    if seconds > MAX_WINDOW_S:
        raise ValueError(f"{text!r}: a budget's window is at most 366 days")
    return seconds


class BudgetConfig(BaseModel):
    """One ``[[budgets]]`` entry."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,62}$")
    """Named in refusals, in ``GET /v1/budgets`` and in the database."""
    limit: Decimal = Field(ge=0)
    """Calls (an integer), or the sum of ``field``, allowed in one window."""
    per: str
    """The window: ``"1h"``, ``"1d"``, ``"30m"``…"""
    field: str | None = Field(
        default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
    )
    """A numeric payload field to sum (``amount``, ``order.total``); unset: count calls."""
    tools: list[str] | None = None
    """The tools charged; unset: every tool."""
    tenants: list[str] | None = None
    """The tenants it applies to; unset: every tenant (each counted on its own)."""
    scope: list[Scope] = Field(default_factory=list)
    """Count per principal and/or per tool within the tenant; empty: per tenant."""

    @field_validator("per")
    @classmethod
    def _window(cls, value: str) -> str:
        parse_duration(value)
        return value

    @field_validator("limit")
    @classmethod
    def _finite(cls, value: Decimal) -> Decimal:
        if not value.is_finite() or len(value.as_tuple().digits) > _MAX_DIGITS:
            raise ValueError("must be a finite number of at most 30 digits")
        return value

    @field_validator("scope")
    @classmethod
    def _distinct(cls, value: list[Scope]) -> list[Scope]:
        if len(set(value)) != len(value):
            raise ValueError("names a scope twice")
        return sorted(value)

    @property
    def window_s(self) -> int:
        return parse_duration(self.per)

    def applies(self, tenant_id: str, tool: str) -> bool:
        return (self.tenants is None or tenant_id in self.tenants) and (
            self.tools is None or tool in self.tools
        )

    def terms(self) -> str:
        what = "calls" if self.field is None else f"of payload field {self.field!r}"
        scope = "".join(f" per {name}" for name in self.scope)
        return f"at most {self.limit} {what}{scope} per {self.per}"


def parse_budgets_config(raw: Sequence[Mapping[str, Any]]) -> tuple[BudgetConfig, ...]:
    """The ``[[budgets]]`` entries; a bad one stops start-up naming it."""
    budgets: list[BudgetConfig] = []
    for index, entry in enumerate(raw):
        budget = parse_section(BudgetConfig, entry, f"[[budgets]] #{index + 1}")
        if budget.field is None and budget.limit != budget.limit.to_integral_value():
            raise ConfigurationError(
                f"[[budgets]] {budget.name}: a limit on calls is a whole number"
            )
        if any(b.name == budget.name for b in budgets):
            raise ConfigurationError(f"[[budgets]] {budget.name}: two budgets of one name")
        budgets.append(budget)
    return tuple(budgets)


@dataclass(frozen=True, slots=True)
class BudgetCharge:
    """What one admitted attempt adds to one budget's window (if it stays within the limit)."""

    budget: str
    scope_key: str
    """The canonical JSON of the scope within the tenant: ``{}``, ``{"principal":"a"}``…"""
    window_start: datetime
    resets_at: datetime
    amount: Decimal
    limit: Decimal
    terms: str = ""
    """The budget in words (``at most 20 calls per 1d``), for a refusal's detail."""

    def row(self) -> dict[str, str]:
        return {
            "budget": self.budget,
            "scope": self.scope_key,
            "window_start": self.window_start.isoformat(),
            "amount": str(self.amount),
            "limit": str(self.limit),
        }


def charges_text(charges: Sequence[BudgetCharge]) -> str | None:
    """The charges as the admitting statement takes them (JSON), None for none."""
    if not charges:
        return None
    return json.dumps([charge.row() for charge in charges], separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class AmountProblem:
    """The payload cannot be charged to a budget that counts one of its fields."""

    budget: str
    detail: str


def window_of(now: datetime, window_s: int) -> tuple[datetime, datetime]:
    """The fixed window (start, end) holding ``now``: epoch-aligned, in UTC."""
    micros = (now.astimezone(UTC) - EPOCH) // timedelta(microseconds=1)
    length = window_s * 1_000_000
    start = EPOCH + timedelta(microseconds=micros - micros % length)
    return start, start + timedelta(seconds=window_s)


def field_amount(payload: Any, path: str) -> Decimal | str:
    """The non-negative number at ``path`` (dotted) of ``payload``, or why there is none."""
    value = payload
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return f"the payload has no field {path!r}"
        value = value[part]
    if type(value) not in (int, float):
        return f"payload field {path!r} is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"payload field {path!r} is not a finite number"
    try:
        amount = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        return f"payload field {path!r} is not a number"
    if amount < 0:
        return f"payload field {path!r} is negative"
    return amount


class Budgets:
    """The deployment's budgets, and which of them a call is charged to."""

    def __init__(self, configs: Iterable[BudgetConfig] = ()) -> None:
        self.configs = tuple(configs)

    def __bool__(self) -> bool:
        return bool(self.configs)

    def applying(self, tenant_id: str) -> list[BudgetConfig]:
        return [b for b in self.configs if b.tenants is None or tenant_id in b.tenants]

    def charges(
        self, tenant_id: str, principal_id: str, tool: str, payload: Any, now: datetime
    ) -> tuple[BudgetCharge, ...] | AmountProblem:
        """The charges of one admission, sorted as the store takes their rows' locks."""
        found: list[BudgetCharge] = []
        for budget in self.configs:
            if not budget.applies(tenant_id, tool):
                continue
            amount = Decimal(1)
            if budget.field is not None:
                counted = field_amount(payload, budget.field)
                if isinstance(counted, str):
                    return AmountProblem(
                        budget.name, f"budget {budget.name!r} counts it: {counted}"
                    )
                amount = counted
            start, end = window_of(now, budget.window_s)
            found.append(
                BudgetCharge(
                    budget=budget.name,
                    scope_key=scope_key(budget, principal_id, tool),
                    window_start=start,
                    resets_at=end,
                    amount=amount,
                    limit=budget.limit,
                    terms=budget.terms(),
                )
            )
        return tuple(sorted(found, key=lambda c: (c.budget, c.scope_key)))

    def config(self, name: str) -> BudgetConfig | None:
        return next((b for b in self.configs if b.name == name), None)


def scope_key(budget: BudgetConfig, principal_id: str, tool: str) -> str:
    values = {"principal": principal_id, "tool": tool}
    return json.dumps(
        {name: values[name] for name in budget.scope}, separators=(",", ":"), sort_keys=True
    )
