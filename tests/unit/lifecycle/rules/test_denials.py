"""Each denial reason: a PRE_EFFECT_REFUSAL artifact, nothing minted, nothing run; on the
in-memory store, which the contract test holds to PostgreSQL's answers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.lifecycle.results import SyscallResult
from tests.support.fakelifecycle import FakeHarness as Harness
from tests.support.fakelifecycle import make_fake_harness

POLICY = PolicyConfig(
    version="test-7",
    default=TenantRules(deny_tools=["append"], egress_hosts=["api.example.com", "*.example.org"]),
)


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    built = await make_fake_harness(policy=POLICY)
    try:
        yield built
    finally:
        await built.close()


def assert_refused(harness: Harness, result: SyscallResult, reason: str) -> None:
    assert result.outcome == "refused"
    assert result.reason == reason
    assert result.boundary is EffectBoundary.PRE_EFFECT_REFUSAL
    assert result.receipt is None
    assert result.journal_position is not None
    assert harness.capability_states(result.idempotency_key) == []
    entry = harness.store.tables.entry(
        harness.entries()[0].tenant_id, result.run_id, result.journal_position
    )
    assert entry is not None
    assert (entry.kind, entry.boundary, entry.body["reason"]) == (
        "refusal",
        "PRE_EFFECT_REFUSAL",
        reason,
    )
    assert all(tool.calls == 0 for tool in harness.tools.values())


async def test_an_unknown_tool_is_refused(harness: Harness) -> None:
    assert_refused(harness, await harness.execute("teleport", {}), "unknown_tool")


async def test_a_payload_that_violates_the_schema_is_refused_with_its_path(
    harness: Harness,
) -> None:
    result = await harness.execute("write", {"text": 42})
    assert_refused(harness, result, "payload_invalid")
    assert result.detail is not None
    assert "text" in result.detail


async def test_a_tool_the_policy_denies_is_refused_with_the_policy_version(
    harness: Harness,
) -> None:
    result = await harness.execute("append", {"line": "x"})
    assert_refused(harness, result, "policy_denied")
    assert [e.body["denial"]["policy_version"] for e in harness.entries()] == ["test-7"]


async def test_a_process_execute_tool_is_refused_unless_policy_allows_it(
    harness: Harness,
) -> None:
    assert_refused(harness, await harness.execute("shell", {"cmd": "ls"}), "capability_denied")


@pytest.mark.parametrize(
    "url",
    ["https://evil.example.net/x", "http://api.example.com.evil.net/", "not a url", None],
)
async def test_egress_to_a_host_off_the_allow_list_is_refused(
    harness: Harness, url: str | None
) -> None:
    payload = {} if url is None else {"url": url}
    assert_refused(harness, await harness.execute("fetch", payload), "egress_denied")


@pytest.mark.parametrize("url", ["https://api.example.com/v1", "https://a.b.example.org/"])
async def test_egress_to_an_allowed_host_runs(harness: Harness, url: str) -> None:
    result = await harness.execute("fetch", {"url": url})
    assert result.outcome == "executed"
    assert harness.tools["fetch"].calls == 1


async def test_a_refusal_is_an_attempt_and_the_next_try_is_attempt_two(harness: Harness) -> None:
    first = await harness.execute("teleport", {}, causal_id="c")
    second = await harness.execute("teleport", {}, causal_id="c")
    assert (first.attempt, second.attempt) == (1, 2)
    assert second.journal_position == (first.journal_position or 0) + 1
