"""The console's own stylesheet and script: vendored files, nothing from elsewhere."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import Response

from arvis.console.web import HERE, ConsoleRoute
from arvis.lifecycle.errors import NotFound

router = APIRouter(route_class=ConsoleRoute)

_TYPES = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8"}
_FILES = {name: (HERE / "static" / name).read_bytes() for name in _TYPES}


@router.get("/console/static/{name}")
async def static_file(name: Annotated[str, Path(max_length=64)]) -> Response:
    if name not in _FILES:
        raise NotFound(f"no static file {name}")
    # Static files may be cached (a new version ships with a new process anyway).
    response = Response(_FILES[name], media_type=_TYPES[name])
    return response
