"""What a stub did: one JSON line per effect, appended before it answers (however it answers).

Every stub of the suite performs its effect first and only then answers its hostile way,
so the line count for a cell's token is the number of times the tool body really ran.
The stdio stub is another process: small ``O_APPEND`` writes keep lines whole.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class EffectLog:
    """A JSON-lines file of effects: ``{"mode", "token", "key"}`` per line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, mode: str, token: object, key: object) -> None:
        line = json.dumps({"mode": mode, "token": token, "key": key}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def count(self, token: str) -> int:
        """How many times an effect carrying ``token`` was performed."""
        return sum(1 for entry in self.entries() if entry["token"] == token)
