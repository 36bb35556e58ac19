"""The Cedar engine as admission sees it: deny wins, consent in policy, the gates underneath,
the deciding policies recorded, and every payload that Cedar could misread refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cedarpy
import pytest

from arvis.domain.authorization import ApprovalTerms, DenialReason
from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.lifecycle.authorization import ToolAuthorizationService
from arvis.lifecycle.policy.cedar import CedarPolicy
from arvis.lifecycle.policy.cedar.engine import CEDAR_INPUT
from arvis.lifecycle.policy.policy import CAPABILITY_GATE, EGRESS_GATE, PolicyQuery, TenantRules
from arvis.lifecycle.records import NEW_DECISION
from arvis.lifecycle.steps import AuthorizationStep, AwaitConsent, Proceed, Refuse
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.plans import ToolPlan, derive_plan_id
from tests.support.cedar import PERMIT_ALL, cedar_policy
from tests.support.fakes import FakeTool, returns_ok
from tests.support.rules import (
    FOREIGN_AGENT,
    POST,
    PURGE,
    PUT,
    READ,
    SEND,
    SHELL,
    FixedClock,
    acting_for,
    request,
)


def decide(policy: CedarPolicy, tool: str, payload: Any = None, **kw: Any) -> AuthorizationStep:
    return ToolAuthorizationService(policy, FixedClock()).decide(
        request(tool, payload, **kw), NEW_DECISION
    )


def allowed(step: AuthorizationStep) -> Proceed:
    assert isinstance(step, Proceed), step
    return step


def refused(step: AuthorizationStep, reason: DenialReason = DenialReason.POLICY_DENIED) -> Refuse:
    assert isinstance(step, Refuse), step
    assert step.denial.reason is reason, step.denial
    return step


def test_a_permit_allows_and_the_snapshot_names_it_and_the_fingerprint(tmp_path: Path) -> None:
    policy = cedar_policy(tmp_path, PERMIT_ALL)
    snapshot = allowed(decide(policy, READ)).snapshot
    assert snapshot.policy_ids == ("everyone",)
    assert snapshot.policy_engine == "cedar"
    assert snapshot.policy_digest == policy.fingerprint


def test_a_policy_without_an_id_is_named_by_cedars_id(tmp_path: Path) -> None:
    policy = cedar_policy(tmp_path, "permit (principal, action, resource);")
    assert allowed(decide(policy, READ)).snapshot.policy_ids == ("policy0",)


def test_a_forbid_wins_over_every_permit_and_is_named_in_the_denial(tmp_path: Path) -> None:
    policy = cedar_policy(
        tmp_path,
        PERMIT_ALL
        + '@id("no-purge")\nforbid (principal, action, resource == Arvis::Tool::"archive.purge");',
    )
    denial = refused(decide(policy, PURGE)).denial
    assert denial.policy_ids == ("no-purge",)
    assert "no-purge" in denial.detail
    assert denial.policy_digest == policy.fingerprint
    allowed(decide(policy, READ))


def test_no_matching_permit_is_a_refusal(tmp_path: Path) -> None:
    policy = cedar_policy(
        tmp_path, 'permit (principal, action, resource == Arvis::Tool::"notes.read");'
    )
    denial = refused(decide(policy, PUT)).denial
    assert denial.detail == "no policy permits this call"
    assert denial.policy_ids == ()


def test_a_consent_permit_asks_for_consent_even_beside_a_plain_permit(tmp_path: Path) -> None:
    policy = cedar_policy(
        tmp_path,
        PERMIT_ALL + '@id("big-puts")\n@consent("required")\n'
        'permit (principal, action, resource == Arvis::Tool::"ledger.put")\n'
        "when { context.payload has amount && context.payload.amount > 100 };",
    )
    asked = decide(policy, PUT, {"amount": 500})
    assert isinstance(asked, AwaitConsent)
    assert asked.policy is not None
    # The approver is shown which permit asked, beside every policy that allowed.
    assert set(asked.policy.policy_ids) == {"everyone", "big-puts"}
    assert asked.policy.reason == "permitted only with consent by big-puts"
    assert allowed(decide(policy, PUT, {"amount": 5})).snapshot.policy_ids == ("everyone",)


def test_a_consent_permit_freezes_the_tenants_approval_terms_onto_the_request(
    tmp_path: Path,
) -> None:
    terms = ApprovalTerms(approvers=("payments-leads",), quorum=2, ttl_s=600)
    rules = TenantRules(egress_hosts=["api.example.com"], approvals={PUT: terms})
    consent = '@id("puts")\n@consent("required")\npermit (principal, action, resource);'
    step = decide(cedar_policy(tmp_path / "ask", consent, rules=rules), PUT)
    assert isinstance(step, AwaitConsent)
    assert step.terms == terms
    # The terms say who may approve, never whether to ask: a plain permit just allows.
    assert isinstance(
        decide(cedar_policy(tmp_path / "plain", PERMIT_ALL, rules=rules), PUT), Proceed
    )


def test_the_mutating_unsafe_default_rule_is_the_policys_to_say(tmp_path: Path) -> None:
    # Under Cedar, consent is what the policies say: no built-in rule adds it.
    assert isinstance(decide(cedar_policy(tmp_path, PERMIT_ALL), SEND), Proceed)


def test_the_capability_gate_holds_under_a_permit_all(tmp_path: Path) -> None:
    denial = refused(
        decide(cedar_policy(tmp_path, PERMIT_ALL), SHELL), DenialReason.CAPABILITY_DENIED
    ).denial
    assert denial.policy_ids == (CAPABILITY_GATE,)
    assert denial.policy_engine == "cedar"


def test_the_egress_gate_holds_under_a_permit_all(tmp_path: Path) -> None:
    policy = cedar_policy(tmp_path, PERMIT_ALL)
    denial = refused(
        decide(policy, POST, {"url": "https://evil.test/x"}), DenialReason.EGRESS_DENIED
    ).denial
    assert denial.policy_ids == (EGRESS_GATE,)
    allowed(decide(policy, POST, {"url": "https://api.example.com/hook"}))


def test_a_policy_reads_the_normalised_egress_host(tmp_path: Path) -> None:
    policy = cedar_policy(
        tmp_path,
        PERMIT_ALL + '@id("no-hooks")\nforbid (principal, action, resource)\n'
        'when { context has egress_host && context.egress_host == "api.example.com" };',
    )
    denial = refused(decide(policy, POST, {"url": "https://API.example.com./hook"})).denial
    assert denial.policy_ids == ("no-hooks",)


def test_a_policy_reads_the_principal_its_tenant_and_the_attempt(tmp_path: Path) -> None:
    policy = cedar_policy(
        tmp_path,
        '@id("acme-first-tries")\npermit (principal in Arvis::Tenant::"acme", action, resource)\n'
        'when { context.attempt == 1 && principal.roles.contains("agent") };',
    )
    allowed(decide(policy, READ))
    refused(decide(policy, READ, identity=FOREIGN_AGENT))


def test_a_policy_reads_the_time(tmp_path: Path) -> None:
    policy = cedar_policy(
        tmp_path,
        'permit (principal, action, resource) when { context.time < datetime("2026-12-01") };',
    )
    allowed(decide(policy, READ))


def test_a_policy_that_fails_to_evaluate_refuses_even_beside_a_permit(tmp_path: Path) -> None:
    # Cedar skips a policy that errors; were it a forbid, that would let the call through.
    policy = cedar_policy(
        tmp_path,
        PERMIT_ALL + '@id("overflow")\nforbid (principal, action, resource)\n'
        "when { context.payload has amount && context.payload.amount + 9223372036854775807 > 0 };",
    )
    denial = refused(decide(policy, PUT, {"amount": 5})).denial
    assert "could not be evaluated" in denial.detail
    assert denial.policy_ids == ("overflow",)


# -- payloads Cedar could misread ----------------------------------------------------------

MONEY = ToolDefinition(
    name="money.move",
    description="moves money",
    input_schema={
        "type": "object",
        "properties": {
            "amount": {"type": "number"},
            "count": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "to": {
                "type": "object",
                "properties": {"bank": {"type": "string"}, "iban": {"type": "string"}},
            },
            "memo": {"type": "string"},
        },
    },
    effect=Effect.MUTATING,
    replay_safety=ReplaySafety.IDEMPOTENT,
)
MONEY_PLAN = ToolPlan(
    plan_id=derive_plan_id([MONEY]),
    definitions={MONEY.name: MONEY},
    dispatcher=ToolDispatcher([FakeTool(MONEY, returns_ok)]),
)


@pytest.fixture
def money(tmp_path: Path) -> CedarPolicy:
    return cedar_policy(
        tmp_path,
        PERMIT_ALL + '@id("cap")\nforbid (principal, action, resource)\n'
        "when { context.payload has amount\n"
        '  && context.payload.amount.greaterThan(decimal("1000.0")) };\n'
        '@id("no-evil-bank")\nforbid (principal, action, resource)\n'
        "when { context.payload has to && context.payload.to has bank"
        ' && context.payload.to.bank == "evil" };\n'
        '@id("no-big-counts")\nforbid (principal, action, resource)\n'
        "when { context.payload has count && context.payload.count > 10 };",
        definitions=[MONEY],
    )


def decide_money(policy: CedarPolicy, payload: Any) -> AuthorizationStep:
    return ToolAuthorizationService(policy, FixedClock()).decide(
        request(MONEY.name, payload, plan=MONEY_PLAN), NEW_DECISION
    )


@pytest.mark.parametrize(
    ("payload", "decider"),
    [
        ({"amount": 999.9999}, None),
        ({"amount": 1000.5}, "cap"),
        ({"amount": 2000}, "cap"),
        ({"to": {"bank": "evil", "iban": "x"}}, "no-evil-bank"),
        ({"to": {"bank": "good"}, "unknown": {"deep": [1, {"x": None}]}}, None),
        ({"count": 11}, "no-big-counts"),
        ({"tags": ["a", "b", "a"]}, None),
    ],
)
def test_declared_payload_fields_reach_the_policies_with_their_types(
    money: CedarPolicy, payload: dict[str, Any], decider: str | None
) -> None:
    step = decide_money(money, payload)
    if decider is None:
        allowed(step)
    else:
        assert refused(step).denial.policy_ids == (decider,)


@pytest.mark.parametrize(
    "payload",
    [
        {"amount": 1e-05},  # more digits than Cedar's decimal holds
        {"amount": 1e300},  # beyond Cedar's decimal range
        {"count": 1e20},  # canonicalised to an integer beyond 64 bits
        {"count": -1e19},
    ],
    ids=["five-decimals", "huge-decimal", "huge-integer", "below-i64"],
)
def test_a_payload_value_cedar_cannot_hold_is_refused_not_misread(
    money: CedarPolicy, payload: dict[str, Any]
) -> None:
    denial = refused(decide_money(money, payload)).denial
    assert denial.policy_ids == (CEDAR_INPUT,)
    assert "payload field" in denial.detail


def test_a_value_of_another_type_than_declared_is_refused(money: CedarPolicy) -> None:
    # A run bound to an older plan can carry a shape the current schema types otherwise.
    context = request(MONEY.name, {}, plan=MONEY_PLAN)
    from arvis.domain.payload import freeze_payload
    from tests.support.rules import sealed_context

    decision = money.evaluate(
        PolicyQuery(
            sealed_context(context, context.identity),
            MONEY,
            freeze_payload({"amount": "1000000", "to": {"bank": 7}}),
            destination=None,
        )
    )
    assert not decision.allowed
    assert decision.policy_ids == (CEDAR_INPUT,)


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"amount": 12, "count": 3, "tags": [], "to": {}, "memo": "ünïcode \u2028"},
        {"amount": -0.0, "count": -9007199254740991, "to": {"iban": ""}},
        {"amount": 9e14, "count": 9e18, "tags": ["x"] * 50},
    ],
)
def test_the_request_built_for_a_payload_conforms_to_the_schema(
    money: CedarPolicy, payload: dict[str, Any]
) -> None:
    from arvis.domain.payload import freeze_payload
    from tests.support.rules import sealed_context

    admission = request(MONEY.name, payload, plan=MONEY_PLAN)
    built = money.request(
        PolicyQuery(
            sealed_context(admission, admission.identity),
            MONEY,
            freeze_payload(payload),
            destination=None,
        )
    )
    schema = cedarpy.Schema.from_str(money.compiled.schema_text)
    answer = cedarpy.is_authorized(
        built["request"], money.compiled.policy_set, built["entities"], schema
    )
    assert answer.diagnostics.errors == []
    assert answer.decision is not cedarpy.Decision.NoDecision


ALICE_VIA_BOT = acting_for("alice", "rogue-bot", method="api_key")

ACTING = "when { context has actor && %s }"
FORBIDS = {
    "no-rogue-bot": "forbid (principal, action, resource) "
    + ACTING % 'context.actor.id == "rogue-bot"',
    "not-alice": 'forbid (principal == Arvis::Principal::"alice", action, resource) '
    + ACTING % 'context.actor.auth_method == "api_key"',
}


@pytest.mark.parametrize("policy_id", sorted(FORBIDS))
def test_cedar_can_forbid_by_the_person_or_by_the_agent_acting_for_them(
    tmp_path: Path, policy_id: str
) -> None:
    policy = cedar_policy(tmp_path, PERMIT_ALL + f'@id("{policy_id}")\n{FORBIDS[policy_id]};')
    assert refused(decide(policy, READ, identity=ALICE_VIA_BOT)).denial.policy_ids == (policy_id,)
    allowed(decide(policy, READ))  # no actor: the agent called for itself


def test_the_actor_is_sealed_in_the_context_cedar_decides_on(tmp_path: Path) -> None:
    snapshot = allowed(decide(cedar_policy(tmp_path, PERMIT_ALL), READ, identity=ALICE_VIA_BOT))
    assert snapshot.snapshot.context.actor == ALICE_VIA_BOT.actor
