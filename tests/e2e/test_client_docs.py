"""The plain agent loop of docs/client.md, run as written against ``arvis serve``."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arvis.client import ArvisClient
from tests.support.http import mint_keys
from tests.support.reliability import Served

pytestmark = pytest.mark.db

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def _example(marker: str) -> str:
    found = re.search(rf"<!-- example: {marker} -->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert found is not None, f"docs/client.md has no example {marker!r}"
    return found.group(1)


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[Served]:
    server = Served(database_url, tmp_path, instance_id="client-docs")
    server.start()
    try:
        yield server
    finally:
        server.terminate()


def test_the_documented_agent_loop_runs_each_call_once_and_waits_for_consent(
    served: Served, database_url: str
) -> None:
    tokens = asyncio.run(
        mint_keys(database_url, tenants=("acme",), roles=("agent", "approver", "auditor"))
    )
    namespace: dict[str, Any] = {}
    exec(_example("agent-loop"), namespace)

    def model(history: list[dict[str, Any]]) -> dict[str, Any]:
        if len(history) == 1:
            calls = [
                {"id": "doc-1", "tool": "echo", "args": {"n": 1}},
                {"id": "doc-2", "tool": "files.append", "args": {"path": "doc.log", "line": "ok"}},
            ]
            return {"calls": calls}
        return {"text": json.dumps([json.loads(m["content"]) for m in history[1:]])}

    stop = threading.Event()

    def approve_what_is_pending() -> None:
        with ArvisClient(served.base_url, tokens["acme:approver"]) as approver:
            while not stop.is_set():
                for pending in approver.iter_confirmations(state="PENDING"):
                    approver.approve(pending.id)
                stop.wait(0.05)

    approving = threading.Thread(target=approve_what_is_pending)
    approving.start()
    try:
        with ArvisClient(served.base_url, tokens["acme:agent"]) as arvis:
            text = namespace["run_agent"](arvis, "run-docs", model, "go", poll_s=0.05)
    finally:
        stop.set()
        approving.join(timeout=10)

    assert json.loads(text) == [
        {"result": {"n": 1}},
        {"result": {"bytes": 3, "path": "doc.log"}},
    ]
    assert (served.data_dir / "sandbox" / "doc.log").read_text() == "ok\n"
    with ArvisClient(served.base_url, tokens["acme:auditor"]) as auditor:
        kinds = [(e.kind, e.causal_id) for e in auditor.iter_journal("run-docs")]
    assert kinds == [("execution", "doc-1"), ("confirmation", "doc-2"), ("execution", "doc-2")]
