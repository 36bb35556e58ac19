"""Shadow mode: the rules decide, Cedar is evaluated beside them, disagreements are counted."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from arvis.domain.authorization import PolicyDecision
from arvis.lifecycle.authorization import ToolAuthorizationService
from arvis.lifecycle.policy.policy import PolicyQuery
from arvis.lifecycle.policy.shadow import ShadowPolicy
from arvis.lifecycle.records import NEW_DECISION
from arvis.lifecycle.steps import AwaitConsent, Proceed, Refuse
from tests.support.cedar import cedar_policy
from tests.support.rules import POLICY, PURGE, PUT, READ, SEND, FixedClock, request

CEDAR = (
    '@id("reads")\npermit (principal, action, resource) when { resource.effect == "read_only" };\n'
    '@id("purges")\npermit (principal, action, resource == Arvis::Tool::"archive.purge");\n'
    '@id("sends")\npermit (principal, action, resource == Arvis::Tool::"payments.send");\n'
)


@pytest.fixture
def shadow(tmp_path: Path) -> ShadowPolicy:
    return ShadowPolicy(POLICY, cedar_policy(tmp_path, CEDAR))


def decide(policy: ShadowPolicy, tool: str) -> object:
    return ToolAuthorizationService(policy, FixedClock()).decide(request(tool), NEW_DECISION)


def test_the_enforced_rules_decide_whatever_cedar_says(shadow: ShadowPolicy) -> None:
    step = decide(shadow, PUT)  # the rules allow it; no Cedar policy permits it
    assert isinstance(step, Proceed)
    assert step.snapshot.policy_engine == "rules"
    assert step.snapshot.policy_digest == POLICY.digest
    assert isinstance(decide(shadow, PURGE), Refuse)  # the rules deny it; Cedar permits it


def test_every_kind_of_disagreement_is_counted_and_logged(
    shadow: ShadowPolicy, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="arvis.lifecycle.policy.shadow"):
        decide(shadow, READ)  # both allow
        decide(shadow, PUT)  # rules allow, Cedar denies
        decide(shadow, PURGE)  # rules deny, Cedar allows
        assert isinstance(decide(shadow, SEND), AwaitConsent)  # both allow; consent differs
    assert dict(shadow.disagreements) == {
        "enforced_allows_shadow_denies": 1,
        "enforced_denies_shadow_allows": 1,
        "consent": 1,
        "error": 0,
    }
    assert shadow.evaluations == 4
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert any("archive.purge" in line and "[purges]" in line for line in lines)


class Broken:
    def evaluate(self, query: PolicyQuery) -> PolicyDecision:
        raise RuntimeError("the shadow is broken")


def test_a_failing_shadow_is_counted_and_never_changes_a_decision() -> None:
    shadow = ShadowPolicy(POLICY, Broken())  # type: ignore[arg-type]
    assert isinstance(decide(shadow, READ), Proceed)
    assert shadow.disagreements["error"] == 1
