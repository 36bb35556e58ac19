"""Public calls that would skip the governed path fail closed."""

from __future__ import annotations

import pytest

from arvis.domain.errors import ForbiddenRoute
from arvis.lifecycle.consent.service import ConsentService
from arvis.lifecycle.forbidden import ToolExecutor, ToolManager


@pytest.mark.parametrize(
    "call",
    [
        lambda m, e: m.run("echo", {}),
        lambda m, e: m.execute_authorized(object()),
        lambda m, e: m.activate_authorized(object()),
        lambda m, e: e.execute_invocation(object()),
        lambda m, e: e.execute(object()),
    ],
)
def test_every_route_around_the_syscall_raises_forbidden_route(call: object) -> None:
    manager = ToolManager()
    with pytest.raises(ForbiddenRoute) as caught:
        call(manager, ToolExecutor())  # type: ignore[operator]
    assert caught.value.code == "forbidden_route"
    assert "tool.execute" in caught.value.message


def test_the_consent_service_offers_no_way_around_the_syscall() -> None:
    for name in ("run", "execute_authorized", "activate_authorized", "execute"):
        assert not hasattr(ConsentService, name)
