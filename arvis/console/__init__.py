"""The operator console (DESIGN §7): server-rendered pages at ``/console``.

Runs, a run's journal as a timeline with its chain check, the approvals queue and
(for admins) the keys. Every page reads and decides through the same services the
HTTP routes call (``kernel.lifecycle``, ``kernel.keys``); the console adds no
lifecycle logic of its own. See docs/console.md.
"""

from __future__ import annotations

from fastapi import FastAPI

from arvis.console.routes import router
from arvis.console.web import ConsoleHeaders, install_error_pages


def mount(app: FastAPI) -> None:
    """Serve the console's pages and static files under ``/console``, and its error page
    for an address under it that names no page (after the API's problem handlers are
    installed: it keeps them for every other path).

    Add :class:`ConsoleHeaders` as the application's outermost middleware as well, so
    every answer under ``/console`` carries the console's security headers.
    """
    app.include_router(router)
    install_error_pages(app)


__all__ = ["ConsoleHeaders", "mount"]
