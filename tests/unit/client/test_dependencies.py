"""The client and the integration import nothing of the kernel: an agent runtime uses them
without running ARVIS."""

from __future__ import annotations

import json
import subprocess
import sys

KERNEL = ("arvis.lifecycle", "arvis.store", "arvis.api", "arvis.tools", "arvis.bootstrap")
SERVER_LIBRARIES = ("sqlalchemy", "psycopg", "fastapi", "alembic", "uvicorn")


def _loaded_after(*modules: str) -> list[str]:
    probe = f"import json, sys\nimport {', '.join(modules)}\nprint(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    loaded: list[str] = json.loads(run.stdout)
    return loaded


def _under(loaded: list[str], roots: tuple[str, ...]) -> list[str]:
    return [n for n in loaded if any(n == r or n.startswith(r + ".") for r in roots)]


def test_the_client_imports_no_kernel_and_no_server_library() -> None:
    assert _under(_loaded_after("arvis.client"), KERNEL + SERVER_LIBRARIES) == []


def test_the_agents_integration_imports_no_kernel() -> None:
    # The SDK brings its own dependencies; ARVIS's side is the client only.
    assert _under(_loaded_after("arvis.integrations.openai_agents"), KERNEL) == []


def test_the_langgraph_integration_imports_no_kernel() -> None:
    assert _under(_loaded_after("arvis.integrations.langgraph"), KERNEL) == []
