"""Structured JSON logs for the served process: one object per line on stderr."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

_INSTALLED = "_arvis_json_handler"


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", ...}``: the record's ``fields`` when it has them
    (the access log), else its message. Exceptions are logged by type only: their
    text may quote a payload."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        else:
            line["message"] = record.getMessage()
        if record.exc_info and record.exc_info[0] is not None:
            line["exception"] = record.exc_info[0].__name__
        return json.dumps(line, default=str)


def configure_json_logging(level: str) -> None:
    """Send the ``arvis`` and ``uvicorn`` loggers to stderr as JSON lines (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    setattr(handler, _INSTALLED, True)
    for name in ("arvis", "uvicorn.error"):
        logger = logging.getLogger(name)
        if any(getattr(h, _INSTALLED, False) for h in logger.handlers):
            continue
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
