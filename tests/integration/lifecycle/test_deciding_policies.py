"""Under Cedar, every journal entry of a decision names the policies that decided it and the
fingerprint of the set: executions, refusals, recoveries, and consent asked by a policy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId, TenantId
from arvis.lifecycle.policy.cedar import CedarPolicy
from arvis.lifecycle.policy.policy import PolicyConfig, RulePolicy
from arvis.lifecycle.policy.shadow import ShadowPolicy
from tests.support.cedar import write_policies
from tests.support.lifecycle import (
    APPROVER,
    Harness,
    crash_during_dispatch,
    make_harness,
    standard_tools,
)

AUDITOR = Identity(
    tenant_id=TenantId("acme"),
    principal_id=PrincipalId("auditor-1"),
    method="api_key",
    key_id="k_aud",
    roles=("auditor",),
)
POLICIES = {
    "base.cedar": (
        '@id("acme-agents")\n'
        'permit (principal in Arvis::Tenant::"acme", action, resource)\n'
        'when { principal.roles.contains("agent") };\n'
    ),
    "guards.cedar": (
        '@id("no-secrets")\nforbid (principal, action, resource == Arvis::Tool::"write")\n'
        'when { context.payload has text && context.payload.text like "*secret*" };\n\n'
        '@id("appends-need-consent")\n@consent("required")\n'
        'permit (principal, action, resource == Arvis::Tool::"append");\n'
    ),
}


def cedar(directory: Path) -> CedarPolicy:
    write_policies(directory, POLICIES)
    config = PolicyConfig(engine="cedar", policies="policies/*.cedar")
    return CedarPolicy.load(config, directory, (t.definition for t in standard_tools().values()))


@pytest.fixture
async def harness(database_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    built = await make_harness(database_url, tool_policy=cedar(tmp_path))
    try:
        yield built
    finally:
        await built.close()


def body(harness: Harness, causal_id: str, kind: str) -> dict[str, Any]:
    rows = harness.sql(
        "SELECT body::jsonb FROM journal_entries WHERE run_id = %s AND causal_id = %s"
        " AND kind = %s ORDER BY position DESC LIMIT 1",
        harness.run_id,
        causal_id,
        kind,
    )
    found: dict[str, Any] = rows[0][0]
    return found


async def test_an_execution_records_the_permit_that_allowed_it(harness: Harness) -> None:
    assert (await harness.execute("write", {"text": "x"}, causal_id="w")).outcome == "executed"
    fingerprint = harness.tool_policy.fingerprint  # type: ignore[union-attr]
    assert body(harness, "w", "execution")["policy"] == {
        "engine": "cedar",
        "version": "default",
        "digest": fingerprint,
        "policy_ids": ["acme-agents"],
    }


async def test_a_refusal_records_the_forbid_that_won(harness: Harness) -> None:
    result = await harness.execute("write", {"text": "my secret"}, causal_id="s")
    assert (result.reason, result.detail) == ("policy_denied", "forbidden by policy no-secrets")
    denial = body(harness, "s", "refusal")["denial"]
    assert (denial["policy_engine"], denial["policy_ids"]) == ("cedar", ["no-secrets"])
    assert harness.tools["write"].calls == 0


async def test_a_consent_permit_routes_the_call_through_the_confirmation_flow(
    harness: Harness,
) -> None:
    asked = await harness.execute("append", {"line": "a"}, causal_id="a")
    assert asked.outcome == "confirmation_required"
    assert asked.confirmation is not None
    assert harness.tools["append"].calls == 0
    await harness.approve(asked.confirmation.id, APPROVER)
    done = await harness.execute("append", {"line": "a"}, causal_id="a")
    assert done.outcome == "executed"
    assert body(harness, "a", "execution")["policy"]["policy_ids"] == [
        "acme-agents",
        "appends-need-consent",
    ]


async def test_a_recovered_attempt_records_the_policy_that_admitted_it(harness: Harness) -> None:
    await crash_during_dispatch(harness, "write", {"text": "x"}, causal_id="lost")
    await harness.lifecycle.sweeper.sweep()
    recovered = body(harness, "lost", "recovery")
    assert recovered["policy"]["policy_ids"] == ["acme-agents"]
    assert recovered["policy"]["engine"] == "cedar"


async def test_in_shadow_mode_the_rules_are_enforced_and_recorded(
    database_url: str, tmp_path: Path
) -> None:
    shadow = ShadowPolicy(RulePolicy(), cedar(tmp_path))
    harness = await make_harness(database_url, tool_policy=shadow)
    try:
        result = await harness.execute("shell", {"cmd": "ls"}, causal_id="s")
        assert result.reason == "capability_denied"  # the same gate under both engines
        done = await harness.execute("write", {"text": "x"}, causal_id="w")
        assert done.outcome == "executed"
        assert body(harness, "w", "execution")["policy"]["engine"] == "rules"
        asked = await harness.execute("append", {"line": "a"}, causal_id="a")
        assert asked.outcome == "confirmation_required"  # both ask: no disagreement
        assert sum(shadow.disagreements.values()) == 0
        read = await harness.execute(
            "read", {"q": 1}, causal_id="r", identity=AUDITOR, run_id="run-of-the-auditor"
        )
        assert read.outcome == "executed"  # the rules allow; no Cedar permit matches
        assert shadow.disagreements["enforced_allows_shadow_denies"] == 1
    finally:
        await harness.close()
