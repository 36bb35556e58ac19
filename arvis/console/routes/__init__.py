"""The console's routes, one module per page group."""

from __future__ import annotations

from fastapi import APIRouter

from arvis.console.routes import approvals, auth, keys, runs, static
from arvis.console.web import ConsoleRoute

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
for module in (auth, runs, approvals, keys, static):
    router.include_router(module.router)
