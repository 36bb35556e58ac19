"""A deployment that switches [policy] to Cedar, runs it in shadow mode, and caps calls with
budgets, over HTTP (issue 18)."""

from __future__ import annotations

from pathlib import Path

import pytest

from arvis.domain.errors import ConfigurationError
from tests.support.cedar import write_policies
from tests.support.http import serve_api

CEDAR = """
[policy]
engine = "cedar"
policies = "policies/*.cedar"
"""
POLICIES = {
    "tools.cedar": (
        "// Reads for everyone of acme; nothing else.\n"
        '@id("acme-reads")\n'
        'permit (principal in Arvis::Tenant::"acme", action, resource)\n'
        'when { resource.effect == "read_only" };\n'
    ),
}


async def test_a_cedar_deployment_journals_the_policy_that_decided(
    database_url: str, tmp_path: Path
) -> None:
    write_policies(tmp_path, POLICIES)
    async with serve_api(database_url, tmp_path, config=CEDAR) as api:
        done = await api.syscall("echo", {"n": 1}, run_id="run-cedar", causal_id="c1")
        refused = await api.syscall(
            "files.write", {"path": "a.txt", "content": "x"}, run_id="run-cedar", causal_id="c2"
        )
        journal = await api.client.get(
            "/v1/runs/run-cedar/journal", headers=api.auth("acme:auditor")
        )
    assert done.json()["outcome"] == "executed"
    assert (refused.json()["reason"], refused.json()["detail"]) == (
        "policy_denied",
        "no policy permits this call",
    )
    bodies = [entry["body"] for entry in journal.json()["entries"]]
    assert bodies[0]["policy"]["policy_ids"] == ["acme-reads"]
    assert bodies[0]["policy"]["engine"] == "cedar"
    assert bodies[1]["denial"]["policy_engine"] == "cedar"


async def test_an_invalid_policy_stops_start_up_naming_its_file_and_line(
    database_url: str, tmp_path: Path
) -> None:
    write_policies(
        tmp_path,
        {
            **POLICIES,
            "broken.cedar": '@id("typo")\nforbid (principal, action, resource)\n'
            'when { resource.efect == "mutating" };\n',
        },
    )
    with pytest.raises(ConfigurationError, match=r"^policies/broken\.cedar:1 \(@id 'typo'\): "):
        async with serve_api(database_url, tmp_path, config=CEDAR):
            raise AssertionError("the app started with an invalid policy")


async def test_shadow_disagreements_are_counted_in_metrics(
    database_url: str, tmp_path: Path
) -> None:
    write_policies(tmp_path, POLICIES)
    config = CEDAR + 'mode = "shadow"\n'
    async with serve_api(database_url, tmp_path, config=config) as api:
        agreed = await api.syscall("echo", {"n": 1}, run_id="run-shadow", causal_id="c1")
        enforced = await api.syscall(
            "files.write", {"path": "s.txt", "content": "x"}, run_id="run-shadow", causal_id="c2"
        )
        metrics = (await api.client.get("/metrics", headers=api.auth("acme:admin"))).text
    assert agreed.json()["outcome"] == "executed"
    # The rules are enforced: they allow the write Cedar would refuse.
    assert enforced.json()["outcome"] == "executed"
    assert 'arvis_policy_shadow_disagreements_total{kind="enforced_allows_shadow_denies"} 1.0' in (
        metrics
    )
    assert 'arvis_policy_shadow_disagreements_total{kind="consent"} 0.0' in metrics


BUDGETS = """
[[budgets]]
name = "echoes"
tools = ["echo"]
limit = 2
per = "1d"
scope = ["principal"]
"""


async def test_budgets_are_refused_over_the_limit_and_shown_to_auditors_per_tenant(
    database_url: str, tmp_path: Path
) -> None:
    async with serve_api(database_url, tmp_path, config=BUDGETS) as api:
        api.sql("DELETE FROM budget_usage")
        answers = [
            (await api.syscall("echo", {"n": n}, run_id="run-budget", causal_id=f"c{n}")).json()
            for n in range(3)
        ]
        shown = await api.client.get("/v1/budgets", headers=api.auth("acme:auditor"))
        by_admin = await api.client.get("/v1/budgets", headers=api.auth("acme:admin"))
        by_agent = await api.client.get("/v1/budgets", headers=api.auth("acme:agent"))
        elsewhere = await api.client.get("/v1/budgets", headers=api.auth("globex:auditor"))
    assert [a["outcome"] for a in answers] == ["executed", "executed", "refused"]
    assert answers[2]["reason"] == "budget_exceeded"
    assert "budget 'echoes'" in answers[2]["detail"]
    assert shown.status_code == 200
    (echoes,) = shown.json()["budgets"]
    assert (echoes["name"], echoes["unit"], echoes["limit"], echoes["per"]) == (
        "echoes",
        "calls",
        2,
        "1d",
    )
    assert echoes["usage"] == [{"scope": {"principal": "agent-of-acme"}, "used": 2, "remaining": 0}]
    assert by_admin.json() == shown.json()
    assert by_agent.status_code == 403
    # Nothing is counted across tenants: globex sees the budget and none of acme's use.
    assert elsewhere.json()["tenant_id"] == "globex"
    assert elsewhere.json()["budgets"][0]["usage"] == []
