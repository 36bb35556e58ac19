"""``[[budgets]]`` as start-up reads it, and the fixed windows budgets count in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from arvis.domain.errors import ConfigurationError
from arvis.lifecycle.policy.budgets import Budgets, parse_budgets_config, window_of

CALLS = {"name": "charges", "limit": 20, "per": "1d", "tools": ["payments.charge"]}


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"per": "0s"}, "longer than zero"),
        ({"per": "0d"}, "longer than zero"),
        ({"per": "1w"}, "is not a duration"),
        ({"per": "367d"}, "at most 366 days"),
        ({"per": ""}, "is not a duration"),
        ({"limit": -1}, "limit"),
        ({"limit": "nan"}, "limit"),
        ({"limit": 2.5}, "a limit on calls is a whole number"),
        ({"name": "Bad Name"}, "name"),
        ({"scope": ["principal", "principal"]}, "names a scope twice"),
        ({"scope": ["tenant"]}, "scope"),
        ({"field": "a..b"}, "field"),
        ({"by": "principal"}, "by"),
    ],
)
def test_an_unusable_budget_stops_start_up_naming_it(
    change: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(ConfigurationError, match=r"\[\[budgets\]\]") as raised:
        parse_budgets_config([{**CALLS, **change}])
    assert complaint in raised.value.message


def test_two_budgets_of_one_name_stop_start_up() -> None:
    with pytest.raises(ConfigurationError, match="two budgets of one name"):
        parse_budgets_config([CALLS, CALLS])


def test_an_amount_budget_may_have_a_fractional_limit() -> None:
    (budget,) = parse_budgets_config(
        [{"name": "spend", "limit": 500.25, "per": "1d", "field": "amount"}]
    )
    assert budget.limit == Decimal("500.25")
    assert budget.terms() == "at most 500.25 of payload field 'amount' per 1d"


def _utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[arg-type, misc]


@pytest.mark.parametrize(
    ("moment", "per_s", "start"),
    [
        (_utc(2026, 11, 30, 23, 59, 59, 999999), 86400, _utc(2026, 11, 30)),
        (_utc(2026, 12, 1), 86400, _utc(2026, 12, 1)),
        (_utc(2026, 12, 1, 10, 44), 900, _utc(2026, 12, 1, 10, 30)),
        (_utc(2026, 12, 1, 1).astimezone(), 3600, _utc(2026, 12, 1, 1)),
    ],
)
def test_windows_are_fixed_epoch_aligned_and_in_utc(
    moment: datetime, per_s: int, start: datetime
) -> None:
    assert window_of(moment, per_s) == (start, start + timedelta(seconds=per_s))


def test_a_budget_applies_to_its_tenants_and_tools_only() -> None:
    budgets = Budgets(
        parse_budgets_config([{**CALLS, "tenants": ["acme"], "scope": ["tool", "principal"]}])
    )
    now = datetime(2026, 12, 1, tzinfo=UTC)
    assert budgets.charges("globex", "p", "payments.charge", {}, now) == ()
    assert budgets.charges("acme", "p", "other.tool", {}, now) == ()
    (charge,) = budgets.charges("acme", "p", "payments.charge", {}, now)  # type: ignore[misc]
    assert charge.scope_key == '{"principal":"p","tool":"payments.charge"}'
    assert [b.name for b in budgets.applying("globex")] == []
