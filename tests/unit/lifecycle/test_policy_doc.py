"""The worked examples of docs/policy.md are a policy set that loads, and decides as it says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from arvis.domain.authorization import DenialReason
from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.lifecycle.authorization import ToolAuthorizationService
from arvis.lifecycle.policy.cedar import CedarPolicy
from arvis.lifecycle.records import NEW_DECISION
from arvis.lifecycle.steps import AwaitConsent, Proceed, Refuse
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.plans import ToolPlan, derive_plan_id
from tests.support.cedar import cedar_policy
from tests.support.fakes import FakeTool, returns_ok
from tests.support.rules import FixedClock, request

DOC = Path(__file__).resolve().parents[3] / "docs" / "policy.md"


def _definition(name: str, properties: dict[str, Any], **kw: Any) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=name,
        input_schema={"type": "object", "properties": properties},
        effect=kw.get("effect", Effect.MUTATING),
        replay_safety=kw.get("replay_safety", ReplaySafety.IDEMPOTENT),
        capabilities=kw.get("capabilities", ()),
    )


UNSAFE = ReplaySafety.UNSAFE
TOOLS = [
    _definition("payments.charge", {"amount": {"type": "number"}}, replay_safety=UNSAFE),
    _definition("files.write", {"path": {"type": "string"}, "content": {"type": "string"}}),
    _definition("deploy.run", {}),
    _definition("notes.read", {}, effect=Effect.READ_ONLY, replay_safety=ReplaySafety.SAFE),
]
PLAN = ToolPlan(
    plan_id=derive_plan_id(TOOLS),
    definitions={d.name: d for d in TOOLS},
    dispatcher=ToolDispatcher(FakeTool(d, returns_ok) for d in TOOLS),
)


def _examples() -> dict[str, str]:
    section = DOC.read_text().split("## Worked examples", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```cedar\n(.*?)```", section, re.S)
    return {f"example{n}.cedar": block for n, block in enumerate(blocks)}


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> CedarPolicy:
    return cedar_policy(tmp_path_factory.mktemp("doc"), _examples(), definitions=TOOLS)


def decide(policy: CedarPolicy, tool: str, payload: dict[str, Any]) -> object:
    return ToolAuthorizationService(policy, FixedClock()).decide(
        request(tool, payload, plan=PLAN), NEW_DECISION
    )


def test_the_worked_examples_load_as_one_policy_set(policy: CedarPolicy) -> None:
    assert len(_examples()) == 3
    assert len(policy.compiled.policies) == 9


def test_charges_are_decided_as_the_doc_says(policy: CedarPolicy) -> None:
    small = decide(policy, "payments.charge", {"amount": 50})
    assert isinstance(small, Proceed)
    assert small.snapshot.policy_ids == ("charges",)
    assert isinstance(decide(policy, "payments.charge", {"amount": 250.0}), AwaitConsent)
    huge = decide(policy, "payments.charge", {"amount": 9000})
    assert isinstance(huge, Refuse)
    assert huge.denial.policy_ids == ("no-huge-charges",)
    typed = decide(policy, "payments.charge", {"amount": "9000"})
    assert isinstance(typed, Refuse)
    assert typed.denial.reason is DenialReason.PAYLOAD_INVALID


def test_the_guards_hold_over_the_permits(policy: CedarPolicy) -> None:
    secret = decide(policy, "files.write", {"path": "secrets/k", "content": "x"})
    assert isinstance(secret, Refuse)
    assert secret.denial.policy_ids == ("no-secret-paths",)
    assert isinstance(decide(policy, "files.write", {"path": "notes/k", "content": "x"}), Proceed)
