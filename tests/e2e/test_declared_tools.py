"""What `arvis.toml` declares is checked before anything is served."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _arvis(
    tmp_path: Path, *args: str, config: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARVIS_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO)}
    env.pop("ARVIS_DATABASE_URL", None)
    if config is not None:
        path = tmp_path / "arvis.toml"
        path.write_text(config)
        env["ARVIS_CONFIG"] = str(path)
    return subprocess.run(
        [sys.executable, "-m", "arvis", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


CONTRADICTORY = '[tools]\nfactories = ["tests.unit.tools.factories:contradictory"]\n'


def test_a_contradictory_declared_tool_stops_serve_naming_the_tool_and_the_rule(
    tmp_path: Path,
) -> None:
    result = _arvis(tmp_path, "serve", "--port", "0", config=CONTRADICTORY)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "arvis: error: tool 'cache.flush'" in lines[0]
    assert "read_only" in lines[0]
    # Refused before any database was started for it.
    assert not (tmp_path / "data" / "pgdata").exists()


def test_arvis_tools_json_lists_the_builtins_with_stable_fingerprints(tmp_path: Path) -> None:
    first = _arvis(tmp_path, "tools", "--json")
    second = _arvis(tmp_path, "tools", "--json")
    assert first.returncode == 0, first.stderr
    rows = json.loads(first.stdout)
    assert rows == json.loads(second.stdout)
    by_name = {row["name"]: row for row in rows}
    assert set(by_name) == {"echo", "files.read", "files.write", "files.append"}
    assert (by_name["files.append"]["effect"], by_name["files.append"]["replay_safety"]) == (
        "mutating",
        "unsafe",
    )
    assert by_name["files.write"]["capabilities"] == ["filesystem.write"]
    assert len({row["plan_id"] for row in rows}) == 1
    assert all(len(row["fingerprint"]) == 64 for row in rows)
