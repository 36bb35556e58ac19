"""The routes around the governed path that do not exist (DESIGN §2).

Code that reaches for the seed's direct runners — a manager that runs a tool, an
executor that executes an invocation — finds these names and fails closed with
``forbidden_route``: the one way to run a tool is a ``tool.execute`` syscall.
"""

from __future__ import annotations

from typing import Any, NoReturn

from arvis.domain.errors import ForbiddenRoute


class ToolManager:
    """Exists only so that code reaching for a manager that runs tools fails closed.
    Approvers' decisions are :class:`arvis.lifecycle.consent.service.ConsentService`."""

    def run(self, *_: Any, **__: Any) -> NoReturn:
        raise ForbiddenRoute("ToolManager.run")

    def execute_authorized(self, *_: Any, **__: Any) -> NoReturn:
        raise ForbiddenRoute("ToolManager.execute_authorized")

    def activate_authorized(self, *_: Any, **__: Any) -> NoReturn:
        raise ForbiddenRoute("ToolManager.activate_authorized")


class ToolExecutor:
    """Exists only so that code reaching for a direct executor fails closed."""

    def execute_invocation(self, *_: Any, **__: Any) -> NoReturn:
        raise ForbiddenRoute("ToolExecutor.execute_invocation")

    def execute(self, *_: Any, **__: Any) -> NoReturn:
        raise ForbiddenRoute("ToolExecutor.execute")
