"""Off by default, the SDK is never imported; asked for without it, start-up says what to
install. Each check runs in a fresh interpreter, since this one has the SDK loaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Makes every ``opentelemetry.sdk`` / exporter import fail, as if not installed.
NO_SDK = """
import importlib.abc, sys

class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Absent())
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )


def test_with_tracing_off_nothing_loads_the_sdk() -> None:
    done = run(
        """
        import sys
        import arvis.serving.app, arvis.bootstrap, arvis.cli, arvis.telemetry
        from arvis.serving.app import create_app
        from arvis.telemetry import load_tracing
        create_app(environment=None)
        assert load_tracing({}, {}) is None
        assert load_tracing({"enabled": False}, {"OTEL_TRACES_EXPORTER": "otlp"}) is None
        loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk",
            "opentelemetry.exporter", "arvis.telemetry.tracing", "arvis.telemetry.propagation")))
        print(loaded)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_tracing_asked_for_without_the_sdk_stops_start_up_saying_what_to_install() -> None:
    done = run(
        NO_SDK
        + """
from arvis.domain.errors import ConfigurationError
from arvis.telemetry import load_tracing
try:
    load_tracing({"enabled": True}, {})
except ConfigurationError as exc:
    print(exc.message)
else:
    raise SystemExit("no error")
"""
    )
    assert done.returncode == 0, done.stderr
    assert "[telemetry]" in done.stdout
    assert "pip install 'arvis[telemetry]'" in done.stdout


def test_without_the_sdk_and_tracing_off_arvis_works_as_before() -> None:
    done = run(
        NO_SDK
        + """
from arvis.serving.app import create_app
from arvis.telemetry import load_tracing
create_app(environment=None)
assert load_tracing({}, {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}) is None
print("ok")
"""
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
