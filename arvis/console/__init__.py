"""The operator console (DESIGN §7): server-rendered pages at ``/console``.

Runs, a run's journal as a timeline with its chain check, the approvals queue and
(for admins) the keys. Every page reads and decides through the same services the
HTTP routes call (``kernel.lifecycle``, ``kernel.keys``); the console adds no
lifecycle logic of its own. See docs/console.md.
"""

from __future__ import annotations

from fastapi import FastAPI

from arvis.console.routes import router


def mount(app: FastAPI) -> None:
    """Serve the console's pages and static files under ``/console``."""
    app.include_router(router)
