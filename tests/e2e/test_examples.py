"""``examples/arvis.toml`` is a deployment ``arvis serve`` accepts as it is: its HTTP tool,
its (optional, here absent) upstream MCP server, its Cedar policies, approvals with a
group and a quorum, a budget and the witness, all in force."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from arvis.store.database import PgStore
from arvis.store.keys import PgKeyStore
from tests.support.reliability import Served, auth, syscall_body

pytestmark = pytest.mark.db

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def _keys(database_url: str) -> dict[str, str]:
    store = await PgStore.open(database_url)
    try:
        keys = PgKeyStore(store.engine, store.ops)
        _, agent = await keys.create("acme", "bot", ["agent"])
        _, lead = await keys.create("acme", "lead-a", ["approver"], ["support-leads"])
        _, auditor = await keys.create("acme", "audit", ["auditor"])
        return {"agent": agent.token, "lead": lead.token, "auditor": auditor.token}
    finally:
        await store.close()


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # The folder as shipped, copied: its relative paths (policies, the witness) resolve
    # next to the copy, and nothing is written into the checkout.
    folder = tmp_path_factory.mktemp("example") / "examples"
    shutil.copytree(EXAMPLES, folder)
    server = Served(database_url, folder, instance_id="example", env={"ARVIS_LOG_LEVEL": "INFO"})
    server.env["ARVIS_CONFIG"] = str(folder / "arvis.toml")
    server.start()
    try:
        yield server
    finally:
        server.terminate()


def test_the_example_serves_its_tools_under_its_policies_budget_and_witness(
    served: Served, database_url: str
) -> None:
    tokens = asyncio.run(_keys(database_url))
    agent = auth(tokens["agent"])

    def post(causal_id: str, tool: str, payload: dict[str, object]) -> httpx.Response:
        body = syscall_body("run-example", causal_id, tool, payload)
        return httpx.post(f"{served.base_url}/v1/syscalls", json=body, headers=agent, timeout=30)

    plan = httpx.get(f"{served.base_url}/v1/tools", headers=agent, timeout=30).json()
    assert "tickets.create" in {t["name"] for t in plan["tools"]}

    read = post("c-1", "echo", {"hello": "example"})
    assert (read.status_code, read.json()["outcome"]) == (200, "executed")
    assert read.json()["journal_position"] == 1

    ticket = post("c-2", "tickets.create", {"title": "printer on fire"})
    assert ticket.json()["outcome"] == "confirmation_required", ticket.text
    pending = httpx.get(
        f"{served.base_url}/v1/confirmations?state=PENDING",
        headers=auth(tokens["lead"]),
        timeout=30,
    ).json()["confirmations"]
    [confirmation] = [c for c in pending if c["tool"] == "tickets.create"]
    assert confirmation["quorum"] == 2
    assert confirmation["approvers"] == ["support-leads"]

    secret = post("c-3", "files.write", {"path": "secrets/key", "content": "x"})
    assert (secret.json()["outcome"], secret.json()["reason"]) == ("refused", "policy_denied")

    witness = served.data_dir / "witness" / "arvis.jsonl"
    assert witness.exists()
    assert "run-example" in witness.read_text()
    budgets = httpx.get(
        f"{served.base_url}/v1/budgets", headers=auth(tokens["auditor"]), timeout=30
    )
    assert "tickets-per-principal" in budgets.text
