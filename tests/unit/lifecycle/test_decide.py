"""``ToolAuthorizationService.decide`` as a pure function (DESIGN §4): the retry table, consent
bound to its requester, the causal id's binding and the consent gate, without a database.

The same rules run through the handler in tests/unit/lifecycle/rules/ (on the in-memory
store) and on PostgreSQL in tests/integration/lifecycle/test_confirmations.py; here every
row of the tables gets a case of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import pytest

from arvis.domain.authorization import ConsentPolicy, DenialReason
from arvis.domain.boundary import EffectBoundary
from arvis.domain.definitions import ReplaySafety, ToolDefinition
from arvis.domain.identity import Identity
from arvis.domain.ids import IdempotencyKey
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.authorization import budget_refusal, needs_earlier
from arvis.lifecycle.policy.budgets import BudgetConfig, Budgets
from arvis.lifecycle.records import NEW_DECISION, DecisionHistory
from arvis.lifecycle.steps import (
    AdmissionRequest,
    AnotherPrincipal,
    AuthorizationStep,
    AwaitConsent,
    Deduplicated,
    Earlier,
    InFlight,
    Proceed,
    Refuse,
)
from arvis.tools.plans import ToolPlan, derive_plan_id
from tests.support.rules import (
    AGENT,
    BUDGETS,
    FOREIGN_AGENT,
    NOW,
    OTHER_AGENT,
    PLAN,
    POLICY,
    POST,
    PURGE,
    PUT,
    READ,
    ROTATE,
    SEND,
    SHELL,
    FixedClock,
    History,
    acting_for,
    authorization,
    request,
    sealed_context,
)

B = EffectBoundary
S = ConfirmationState
SERVICE = authorization()


def decide(req: AdmissionRequest, history: DecisionHistory | History) -> AuthorizationStep:
    built = history.build() if isinstance(history, History) else history
    return SERVICE.decide(req, built)


def proceeds(step: AuthorizationStep, req: AdmissionRequest, attempt: int) -> Proceed:
    assert isinstance(step, Proceed), step
    assert step.snapshot.attempt == attempt
    # A retry is the same logical action: same key, whichever attempt it is.
    assert step.snapshot.idempotency_key == req.idempotency_key
    return step


def refused(step: AuthorizationStep, reason: DenialReason, attempt: int | None) -> Refuse:
    assert isinstance(step, Refuse), step
    assert step.denial.reason is reason
    assert step.attempt == attempt
    return step


# -- the retry table ---------------------------------------------------------------------


@pytest.mark.parametrize("tool", [READ, PUT, POST])
def test_a_new_decision_is_admitted_as_attempt_one(tool: str) -> None:
    req = request(tool)
    step = proceeds(decide(req, NEW_DECISION), req, 1)
    assert step.confirmation is None
    assert step.reserve is False


def test_an_admitted_attempt_carries_the_sealed_snapshot() -> None:
    req = request(PUT)
    snapshot = proceeds(decide(req, NEW_DECISION), req, 1).snapshot
    assert snapshot.context == sealed_context(req, AGENT)
    assert snapshot.tool == PUT
    assert snapshot.definition_fingerprint == PLAN.definitions[PUT].fingerprint
    assert snapshot.payload_digest == req.payload.digest
    assert (snapshot.policy_version, snapshot.policy_digest) == (POLICY.version, POLICY.digest)
    assert snapshot.confirmation_id is None


@pytest.mark.parametrize("tool", [READ, PUT, SEND])
def test_a_completed_decision_answers_its_recorded_position(tool: str) -> None:
    req = request(tool)
    history = History(req).after(B.EFFECT_COMPLETED, attempt=2, position=17)
    if tool == SEND:
        history = history.with_consent(S.CONSUMED)
    assert decide(req, history) == Deduplicated(17)


@pytest.mark.parametrize(
    ("boundary", "retryable"),
    [(B.PRE_EFFECT_REFUSAL, False), (B.EFFECT_NOT_STARTED, False), (B.EFFECT_FAILED, True)],
)
@pytest.mark.parametrize("tool", [READ, PUT, POST])
def test_a_retry_after_nothing_happened_or_advised_is_the_next_attempt(
    tool: str, boundary: EffectBoundary, retryable: bool
) -> None:
    req = request(tool)
    history = History(req).after(boundary, attempt=2, retryable=retryable)
    proceeds(decide(req, history), req, 3)


@pytest.mark.parametrize("tool", [READ, PUT, SEND])
def test_a_retry_after_a_failure_without_advice_is_refused(tool: str) -> None:
    req = request(tool)
    history = History(req).after(B.EFFECT_FAILED, retryable=False)
    if tool == SEND:
        history = history.with_consent(S.CONSUMED)
    step = refused(decide(req, history), DenialReason.RETRY_NOT_ADVISED, None)
    assert step.denial.idempotency_key == req.idempotency_key


@pytest.mark.parametrize("boundary", [B.EFFECT_STARTED, B.EFFECT_STATE_UNKNOWN])
@pytest.mark.parametrize("tool", [SEND, SHELL])
def test_a_retry_after_an_uncertain_outcome_of_an_unsafe_tool_is_refused(
    tool: str, boundary: EffectBoundary
) -> None:
    req = request(tool)
    history = History(req).after(boundary).with_consent(S.CONSUMED)
    step = refused(decide(req, history), DenialReason.RETRY_PROHIBITED_UNCERTAIN, None)
    assert "new causal id" in step.denial.detail


@pytest.mark.parametrize("boundary", [B.EFFECT_STARTED, B.EFFECT_STATE_UNKNOWN])
def test_an_uncertain_attempt_of_a_tool_that_left_the_plan_is_refused_as_uncertain(
    boundary: EffectBoundary,
) -> None:
    # Nothing tells whether the tool dedupes any more: the table fails closed.
    req = request("gone.tool", {})
    step = decide(req, History(req).after(boundary))
    refused(step, DenialReason.RETRY_PROHIBITED_UNCERTAIN, None)


@pytest.mark.parametrize("boundary", [B.EFFECT_STARTED, B.EFFECT_STATE_UNKNOWN])
@pytest.mark.parametrize("tool", [READ, PUT, POST])
def test_a_retry_after_an_uncertain_outcome_of_a_tool_that_dedupes_is_the_next_attempt(
    tool: str, boundary: EffectBoundary
) -> None:
    req = request(tool)
    proceeds(decide(req, History(req).after(boundary, attempt=1)), req, 2)


@pytest.mark.parametrize(
    "history",
    [
        lambda h: h.running(1),
        lambda h: h.after(B.EFFECT_NOT_STARTED, attempt=1).running(2),
        lambda h: h.after(B.EFFECT_COMPLETED, attempt=1).running(2),
    ],
    ids=["first", "after-not-started", "after-completed"],
)
@pytest.mark.parametrize("tool", [READ, PUT, SEND])
def test_a_post_while_an_attempt_is_in_flight_waits_for_it(
    tool: str, history: Callable[[History], History]
) -> None:
    req = request(tool)
    assert decide(req, history(History(req))) == InFlight()


# -- consent is bound to its requester ---------------------------------------------------

EARLIER: dict[str, Callable[[History], History]] = {
    "none": lambda h: h,
    "completed": lambda h: h.after(B.EFFECT_COMPLETED),
    "in-flight": lambda h: h.running(1),
    "uncertain": lambda h: h.after(B.EFFECT_STATE_UNKNOWN),
}


@pytest.mark.parametrize("earlier", sorted(EARLIER))
@pytest.mark.parametrize("state", list(ConfirmationState))
@pytest.mark.parametrize("requester", [OTHER_AGENT, FOREIGN_AGENT], ids=["other", "foreign"])
def test_consent_asked_by_another_principal_refuses_the_post_in_every_state(
    requester: Identity, state: ConfirmationState, earlier: str
) -> None:
    req = request(SEND)
    history = EARLIER[earlier](History(req).with_consent(state, requested_by=requester))
    step = refused(decide(req, history), DenialReason.IDENTITY_MISMATCH, None)
    # The stranger's post changes nothing about the requester's consent.
    assert step.expire is None


def test_consent_of_another_principal_is_never_expired_by_a_strangers_post() -> None:
    req = request(SEND)
    history = History(req).with_consent(
        S.APPROVED, requested_by=OTHER_AGENT, expires_at=NOW - timedelta(seconds=1)
    )
    step = refused(decide(req, history), DenialReason.IDENTITY_MISMATCH, None)
    assert step.expire is None


@pytest.mark.parametrize("state", list(ConfirmationState))
@pytest.mark.parametrize(
    "poster",
    [acting_for("alice", "bot-b"), acting_for("alice", None)],
    ids=["another-agent", "the-person"],
)
def test_consent_asked_by_an_agent_for_a_person_is_bound_to_both(
    poster: Identity, state: ConfirmationState
) -> None:
    asked_by = acting_for("alice", "bot-a")
    req = request(SEND, identity=poster)
    history = History(req).with_consent(state, requested_by=asked_by)
    refused(decide(req, history), DenialReason.IDENTITY_MISMATCH, None)
    # The agent that asked, for the person it asked for, is its requester.
    own = request(SEND, identity=asked_by)
    step = decide(own, History(own).with_consent(state, requested_by=asked_by))
    assert not (isinstance(step, Refuse) and step.denial.reason is DenialReason.IDENTITY_MISMATCH)


@pytest.mark.parametrize("tool", [PUT, SEND])
def test_a_causal_id_bound_to_another_decision_is_refused(tool: str) -> None:
    req = request(tool)
    other = IdempotencyKey("f" * 64)
    step = refused(decide(req, History(req).bound_to(other)), DenialReason.CAUSAL_ID_CONFLICT, None)
    assert "new causal id" in step.denial.detail


def test_a_corrected_payload_under_the_same_causal_id_is_a_conflict() -> None:
    first = request(PUT, {"amount": 5})
    corrected = request(PUT, {"amount": 6})
    history = History(corrected).bound_to(first.idempotency_key)
    refused(decide(corrected, history), DenialReason.CAUSAL_ID_CONFLICT, None)


# -- the consent gate --------------------------------------------------------------------


def test_an_unsafe_call_without_consent_asks_for_it_naming_the_rule_and_why() -> None:
    req = request(SEND)
    step = decide(req, NEW_DECISION)
    assert step == AwaitConsent(
        sealed_context(req, AGENT),
        None,
        definition_fingerprint=PLAN.definitions[SEND].fingerprint,
        policy_digest=POLICY.digest,
        policy=ConsentPolicy(
            engine="rules",
            version=POLICY.version,
            digest=POLICY.digest,
            policy_ids=("default.consent_for_mutating_unsafe",),
            reason=f"tool {SEND!r} is mutating and replay-unsafe",
        ),
    )


def test_a_pending_consent_keeps_waiting_for_the_approver() -> None:
    req = request(SEND)
    history = History(req).with_consent(S.PENDING)
    step = decide(req, history)
    assert step == AwaitConsent(sealed_context(req, AGENT), history.consent)


def test_approved_consent_is_reserved_by_the_attempt_it_admits() -> None:
    req = request(SEND)
    history = History(req).with_consent(S.APPROVED)
    step = proceeds(decide(req, history), req, 1)
    assert step.reserve is True
    assert step.confirmation == history.consent
    assert step.snapshot.confirmation_id == "cf_1"


def test_consent_released_after_a_refused_attempt_is_reserved_again() -> None:
    req = request(SEND)
    history = History(req).after(B.EFFECT_NOT_STARTED, attempt=1).with_consent(S.APPROVED)
    assert proceeds(decide(req, history), req, 2).reserve is True


@pytest.mark.parametrize(
    ("state", "expires_in"),
    [
        (S.APPROVED, timedelta(seconds=-1)),
        (S.APPROVED, timedelta(0)),  # the moment of expiry is already too late
        (S.PENDING, timedelta(seconds=-1)),
    ],
)
def test_consent_that_expired_only_now_is_refused_and_marked_expired(
    state: ConfirmationState, expires_in: timedelta
) -> None:
    req = request(SEND)
    history = History(req).with_consent(state, expires_at=NOW + expires_in)
    step = refused(decide(req, history), DenialReason.CONFIRMATION_EXPIRED, 1)
    assert step.expire == history.consent


@pytest.mark.parametrize("process_clock_ahead_by", [timedelta(days=400), timedelta(days=-400)])
def test_consent_expiry_is_judged_by_the_databases_clock_alone(
    process_clock_ahead_by: timedelta,
) -> None:
    # One clock (issue 24): the process's clock may say anything; a consent the
    # database says is live at the read is live, one it says has lapsed has lapsed.
    service = authorization(FixedClock(NOW + process_clock_ahead_by))
    req = request(SEND)
    live = History(req).with_consent(S.APPROVED, expires_at=NOW + timedelta(seconds=1))
    assert proceeds(service.decide(req, live.build()), req, 1).reserve is True
    lapsed = History(req).with_consent(S.APPROVED, expires_at=NOW - timedelta(seconds=1))
    refused(service.decide(req, lapsed.build()), DenialReason.CONFIRMATION_EXPIRED, 1)


def test_a_history_read_without_the_databases_clock_leaves_expiry_to_the_store() -> None:
    # The admitting statement re-checks expiry by the database's clock ('stale'), and
    # the history read again carries that clock: nothing is judged by the process's.
    req = request(SEND)
    history = History(req).with_consent(S.APPROVED, expires_at=NOW - timedelta(days=1))
    assert proceeds(decide(req, history.read(None)), req, 1).reserve is True


@pytest.mark.parametrize(
    ("state", "reason"),
    [(S.DENIED, DenialReason.CONFIRMATION_DENIED), (S.EXPIRED, DenialReason.CONFIRMATION_EXPIRED)],
)
@pytest.mark.parametrize("expires_in", [timedelta(hours=1), timedelta(hours=-1)])
def test_denied_or_expired_consent_is_refused_without_changing_it(
    state: ConfirmationState, reason: DenialReason, expires_in: timedelta
) -> None:
    req = request(SEND)
    history = History(req).with_consent(state, expires_at=NOW + expires_in)
    step = refused(decide(req, history), reason, 1)
    assert step.expire is None


def test_reserved_consent_means_an_attempt_is_under_way() -> None:
    req = request(SEND)
    assert decide(req, History(req).with_consent(S.RESERVED)) == InFlight()


def test_consumed_consent_admits_a_retry_the_table_allows_without_reserving() -> None:
    req = request(ROTATE)
    history = History(req).after(B.EFFECT_STARTED, attempt=1).with_consent(S.CONSUMED)
    step = proceeds(decide(req, history), req, 2)
    assert step.reserve is False
    assert step.confirmation == history.consent
    assert step.snapshot.confirmation_id == "cf_1"


def test_consent_on_a_call_that_needs_none_is_not_reserved() -> None:
    req = request(PUT)
    step = proceeds(decide(req, History(req).with_consent(S.APPROVED)), req, 1)
    assert step.confirmation is None
    assert step.reserve is False
    assert step.snapshot.confirmation_id is None


# -- which refusals are attempts ---------------------------------------------------------


@dataclass(frozen=True)
class Case:
    reason: DenialReason
    make: Callable[[], tuple[AdmissionRequest, History]]
    attempt: int | None
    """The attempt number the refusal takes after attempt 2, or None: not an attempt."""
    decide: Callable[[AdmissionRequest, History], AuthorizationStep] = decide


def _over_budget(req: AdmissionRequest, history: History) -> AuthorizationStep:
    """What admission refuses when the store finds the authorized attempt over a budget."""
    step = authorization(budgets=BUDGETS).decide(req, history.build())
    assert isinstance(step, Proceed), step
    return budget_refusal(step, "puts")


def _after_two(req: AdmissionRequest, boundary: EffectBoundary = B.EFFECT_NOT_STARTED) -> History:
    return History(req).after(boundary, attempt=2)


def _case(
    reason: DenialReason,
    req: Callable[[], AdmissionRequest],
    history: Callable[[AdmissionRequest], History] = _after_two,
    attempt: int | None = 3,
) -> Case:
    def make() -> tuple[AdmissionRequest, History]:
        made = req()
        return made, history(made)

    return Case(reason, make, attempt)


R = DenialReason
CASES = [
    _case(R.UNKNOWN_TOOL, lambda: request("nope.tool", {})),
    _case(R.PLAN_UNAVAILABLE, lambda: request(PUT, plan=None)),
    _case(R.PAYLOAD_INVALID, lambda: request(PUT, {"amount": "five"})),
    _case(R.POLICY_DENIED, lambda: request(PURGE)),
    _case(R.CAPABILITY_DENIED, lambda: request(SHELL)),
    _case(R.EGRESS_DENIED, lambda: request(POST, {"url": "https://evil.test/x"})),
    _case(
        R.CONFIRMATION_DENIED,
        lambda: request(SEND),
        lambda req: _after_two(req).with_consent(S.DENIED),
    ),
    _case(
        R.CONFIRMATION_EXPIRED,
        lambda: request(SEND),
        lambda req: _after_two(req).with_consent(S.EXPIRED),
    ),
    _case(
        R.APPROVAL_STALE,
        lambda: request(SEND),
        lambda req: _after_two(req).with_consent(S.APPROVED, asked_for=("0" * 64, POLICY.digest)),
    ),
    _case(
        R.RETRY_NOT_ADVISED,
        lambda: request(PUT),
        lambda req: _after_two(req, B.EFFECT_FAILED),
        None,
    ),
    _case(
        R.RETRY_PROHIBITED_UNCERTAIN,
        lambda: request(SEND),
        lambda req: _after_two(req, B.EFFECT_STATE_UNKNOWN).with_consent(S.CONSUMED),
        None,
    ),
    _case(
        R.CAUSAL_ID_CONFLICT,
        lambda: request(PUT),
        lambda req: History(req).bound_to(IdempotencyKey("f" * 64)),
        None,
    ),
    Case(
        R.BUDGET_EXCEEDED,
        lambda: (req := request(PUT), _after_two(req)),
        3,
        _over_budget,
    ),
    _case(
        R.IDENTITY_MISMATCH,
        lambda: request(SEND),
        lambda req: _after_two(req).with_consent(S.APPROVED, requested_by=OTHER_AGENT),
        None,
    ),
    Case(
        R.PLAN_RETIRED,
        lambda: (
            req := request(PUT),
            History(req).after(B.EFFECT_FAILED, attempt=2, retryable=True),
        ),
        None,
        lambda req, history: SERVICE.decide(req, history.build(), Earlier(changed(PUT))),
    ),
]


# -- a plan change (the decision's latest attempt decided under another plan) -------------


def changed(tool: str, *, replay_safety: ReplaySafety | None = None) -> ToolDefinition:
    """``tool`` of :data:`PLAN` as another plan defines it (another fingerprint)."""
    now = PLAN.definitions[tool]
    return ToolDefinition(
        name=now.name,
        description="changed since",
        input_schema=now.input_schema,
        effect=now.effect,
        replay_safety=replay_safety or now.replay_safety,
        capabilities=now.capabilities,
    )


def test_a_changed_definition_keeps_a_decided_record_recorded() -> None:
    req = request(PUT)
    history = History(req).after(B.EFFECT_COMPLETED, position=7).build()
    assert SERVICE.decide(req, history, Earlier(changed(PUT))) == Deduplicated(7)


def test_the_table_reads_the_definition_the_uncertain_attempt_ran_under() -> None:
    # Unsafe when it ran; a definition that says it dedupes now cannot make it retryable.
    req = request(PUT)
    history = History(req).after(B.EFFECT_STATE_UNKNOWN).build()
    ran_under = changed(PUT, replay_safety=ReplaySafety.UNSAFE)
    step = SERVICE.decide(req, history, Earlier(ran_under))
    refused(step, DenialReason.RETRY_PROHIBITED_UNCERTAIN, None)


MAY_HAVE_TAKEN_EFFECT = [
    pytest.param(lambda h: h.after(B.EFFECT_FAILED, retryable=True), id="failed-retryable"),
    pytest.param(lambda h: h.after(B.EFFECT_STATE_UNKNOWN), id="unknown"),
    pytest.param(lambda h: h.after(B.EFFECT_STARTED), id="started"),
]


@pytest.mark.parametrize("history", MAY_HAVE_TAKEN_EFFECT)
def test_an_attempt_that_may_have_taken_effect_is_not_run_under_another_definition(
    history: Callable[[History], History],
) -> None:
    req = request(PUT)
    built = history(History(req)).build()
    step = refused(SERVICE.decide(req, built, Earlier(changed(PUT))), R.PLAN_RETIRED, None)
    assert "new causal id" in step.denial.detail


def test_a_retryable_failure_of_a_tool_that_left_the_plan_is_not_run_again() -> None:
    empty = ToolPlan(plan_id=derive_plan_id([]), definitions={}, dispatcher=PLAN.dispatcher)
    req = request(PUT, plan=empty)
    built = History(req).after(B.EFFECT_FAILED, retryable=True).build()
    refused(SERVICE.decide(req, built, Earlier(PLAN.definitions[PUT])), R.PLAN_RETIRED, None)


def test_an_unchanged_definition_under_another_plan_retries_as_before() -> None:
    req = request(PUT)
    built = History(req).after(B.EFFECT_FAILED, retryable=True).build()
    proceeds(SERVICE.decide(req, built, Earlier(PLAN.definitions[PUT])), req, 2)


@pytest.mark.parametrize(
    "boundary", [B.PRE_EFFECT_REFUSAL, B.EFFECT_NOT_STARTED], ids=lambda b: b.value
)
def test_what_provably_never_ran_is_decided_under_the_current_definition(
    boundary: EffectBoundary,
) -> None:
    req = request(PUT)
    built = History(req).after(boundary).build()
    proceeds(SERVICE.decide(req, built, Earlier(changed(PUT))), req, 2)


def test_an_uncertain_attempt_resolved_not_started_is_decided_under_the_current_definition() -> (
    None
):
    req = request(PUT)
    built = History(req).after(B.EFFECT_STATE_UNKNOWN, resolved=B.EFFECT_NOT_STARTED).build()
    proceeds(SERVICE.decide(req, built, Earlier(changed(PUT))), req, 2)


@pytest.mark.parametrize(
    ("history", "needed"),
    [
        pytest.param(lambda h: h, False, id="new"),
        pytest.param(lambda h: h.after(B.EFFECT_COMPLETED), False, id="completed"),
        pytest.param(lambda h: h.after(B.PRE_EFFECT_REFUSAL), False, id="refused"),
        pytest.param(lambda h: h.after(B.EFFECT_NOT_STARTED), False, id="not-started"),
        pytest.param(lambda h: h.after(B.EFFECT_FAILED), False, id="failed"),
        pytest.param(lambda h: h.after(B.EFFECT_FAILED, retryable=True), True, id="failed-retry"),
        pytest.param(lambda h: h.after(B.EFFECT_STARTED), True, id="started"),
        pytest.param(lambda h: h.after(B.EFFECT_STATE_UNKNOWN), True, id="unknown"),
        pytest.param(
            lambda h: h.after(B.EFFECT_STATE_UNKNOWN, resolved=B.EFFECT_COMPLETED),
            False,
            id="resolved",
        ),
    ],
)
def test_the_earlier_definition_is_read_only_where_it_decides(
    history: Callable[[History], History], needed: bool
) -> None:
    req = request(PUT)
    built = history(History(req)).build()
    assert needs_earlier(built) is needed
    if not needed:
        # Decided the same whatever the earlier definition was.
        assert SERVICE.decide(req, built, Earlier(changed(PUT))) == SERVICE.decide(req, built)


# -- a run belongs to its principal (DESIGN §10) ---------------------------------------------


@pytest.mark.parametrize(
    "history",
    [
        lambda h: h,
        lambda h: h.after(B.EFFECT_COMPLETED),
        lambda h: h.running(1),
        lambda h: h.with_consent(S.APPROVED),
        lambda h: h.bound_to(IdempotencyKey("f" * 64)),
    ],
    ids=["new", "completed", "in-flight", "consented", "causal-id-taken"],
)
@pytest.mark.parametrize("tool", [READ, PUT, SEND, PURGE])
def test_another_principals_post_on_a_bound_run_decides_nothing(
    tool: str, history: Callable[[History], History]
) -> None:
    req = request(tool, identity=OTHER_AGENT)
    built = history(History(req)).of_run_bound_to(AGENT)
    assert decide(req, built) == AnotherPrincipal()


def test_the_runs_own_principal_under_any_key_is_decided_as_before() -> None:
    rotated = AGENT.model_copy(update={"key_id": "k_rotated"})
    req = request(PUT, identity=rotated)
    built = History(req).after(B.EFFECT_COMPLETED, position=4).of_run_bound_to(AGENT)
    assert decide(req, built) == Deduplicated(4)


def test_every_refusal_reason_has_a_case() -> None:
    # A new reason must say here whether it is an attempt.
    assert sorted(case.reason for case in CASES) == sorted(DenialReason)


@pytest.mark.parametrize("case", CASES, ids=[case.reason.value for case in CASES])
def test_a_refusal_takes_the_next_attempt_number_only_when_it_is_an_attempt(case: Case) -> None:
    req, history = case.make()
    step = refused(case.decide(req, history), case.reason, case.attempt)
    assert case.reason.is_attempt is (case.attempt is not None)
    assert step.denial.tool == req.tool
    assert step.denial.idempotency_key == req.idempotency_key


@pytest.mark.parametrize(
    "reason", [R.POLICY_DENIED, R.CAPABILITY_DENIED, R.EGRESS_DENIED], ids=lambda r: r.value
)
def test_a_policy_refusal_names_the_policy_that_refused(reason: DenialReason) -> None:
    case = next(case for case in CASES if case.reason is reason)
    req, history = case.make()
    denial = refused(decide(req, history), reason, 3).denial
    assert (denial.policy_version, denial.policy_digest) == (POLICY.version, POLICY.digest)


# -- resolutions (issue 16) ----------------------------------------------------------------


@pytest.mark.parametrize("uncertain", [B.EFFECT_STATE_UNKNOWN, B.EFFECT_STARTED])
def test_an_uncertain_attempt_resolved_not_started_allows_a_fresh_attempt(
    uncertain: EffectBoundary,
) -> None:
    req = request(SEND)
    history = (
        History(req)
        .after(uncertain, attempt=1, resolved=B.EFFECT_NOT_STARTED)
        .with_consent(S.CONSUMED)
    )
    proceeds(decide(req, history), req, 2)


def test_an_uncertain_attempt_resolved_completed_answers_its_record_and_the_resolution() -> None:
    req = request(SEND)
    history = (
        History(req)
        .after(B.EFFECT_STATE_UNKNOWN, attempt=1, position=7, resolved=B.EFFECT_COMPLETED)
        .with_consent(S.CONSUMED)
    )
    assert decide(req, history) == Deduplicated(7, 8)


@pytest.mark.parametrize("tool", [SEND, PUT])
def test_an_uncertain_attempt_resolved_failed_is_refused_without_retry_advice(tool: str) -> None:
    req = request(tool)
    history = History(req).after(B.EFFECT_STATE_UNKNOWN, attempt=1, resolved=B.EFFECT_FAILED)
    if tool == SEND:
        history = history.with_consent(S.CONSUMED)
    refused(decide(req, history), R.RETRY_NOT_ADVISED, None)


def test_an_unresolved_uncertain_attempt_of_an_unsafe_tool_stays_prohibited() -> None:
    req = request(SEND)
    history = History(req).after(B.EFFECT_STATE_UNKNOWN).with_consent(S.CONSUMED)
    refused(decide(req, history), R.RETRY_PROHIBITED_UNCERTAIN, None)


# -- approvals re-checked at the moment of use (issue 16) --------------------------------


@pytest.mark.parametrize(
    "asked_for",
    [("0" * 64, POLICY.digest), (PLAN.definitions[SEND].fingerprint, "1" * 64)],
    ids=["definition_changed", "policy_changed"],
)
def test_an_approval_for_another_definition_or_policy_is_stale_and_expires(
    asked_for: tuple[str, str],
) -> None:
    req = request(SEND)
    history = History(req).with_consent(S.APPROVED, asked_for=asked_for)
    step = refused(decide(req, history), R.APPROVAL_STALE, 1)
    assert step.expire == history.consent


def test_a_stale_approval_once_expired_is_still_refused_as_stale() -> None:
    req = request(SEND)
    history = (
        History(req).after(B.PRE_EFFECT_REFUSAL).with_consent(S.EXPIRED, reason="approval_stale")
    )
    step = refused(decide(req, history), R.APPROVAL_STALE, 2)
    assert step.expire is None


def test_an_approval_the_database_clock_says_expired_is_refused() -> None:
    req = request(SEND)
    built = History(req).with_consent(S.APPROVED, expires_at=NOW + timedelta(minutes=1)).build()
    later = DecisionHistory(
        bound_key=built.bound_key,
        latest=None,
        in_flight=None,
        confirmation=built.confirmation,
        read_at=NOW + timedelta(minutes=2),
    )
    step = refused(decide(req, later), R.CONFIRMATION_EXPIRED, 1)
    assert step.expire == built.confirmation


def test_approval_terms_of_the_policy_go_with_the_consent_request() -> None:
    from arvis.domain.authorization import ApprovalTerms
    from arvis.lifecycle.authorization import ToolAuthorizationService
    from arvis.lifecycle.policy.policy import PolicyConfig, RulePolicy, TenantRules

    terms = ApprovalTerms(approvers=("payments-leads",), quorum=2, ttl_s=600)
    policy = RulePolicy(PolicyConfig(default=TenantRules(approvals={PUT: terms})))
    req = request(PUT)
    step = ToolAuthorizationService(policy, SERVICE.clock).decide(req, NEW_DECISION)
    assert isinstance(step, AwaitConsent)
    assert step.terms == terms
    assert step.policy_digest == policy.digest


# -- budgets -------------------------------------------------------------------------------


def test_an_authorized_attempt_carries_its_budget_charges_in_lock_order() -> None:
    req = request(PUT, {"amount": 7})
    step = proceeds(authorization(budgets=BUDGETS).decide(req, NEW_DECISION), req, 1)
    charges = [(c.budget, c.scope_key, c.amount, c.window_start, c.resets_at) for c in step.charges]
    day, hour = NOW.replace(hour=0), NOW.replace(minute=0)
    assert charges == [
        ("amounts", "{}", 7, hour, hour + timedelta(hours=1)),
        ("puts", '{"principal":"agent-7"}', 1, day, day + timedelta(days=1)),
    ]


def test_a_tool_no_budget_names_is_charged_nothing() -> None:
    req = request(READ)
    assert proceeds(authorization(budgets=BUDGETS).decide(req, NEW_DECISION), req, 1).charges == ()


def test_a_deduplicated_post_is_charged_nothing() -> None:
    req = request(PUT)
    history = History(req).after(B.EFFECT_COMPLETED)
    assert isinstance(authorization(budgets=BUDGETS).decide(req, history.build()), Deduplicated)


COSTS = Budgets([BudgetConfig(name="costs", limit=Decimal(10), per="1h", field="order.cost")])


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ({"note": "n"}, "has no field 'order.cost'"),
        ({"order": {"cost": "5"}}, "is not a number"),
        ({"order": {"cost": True}}, "is not a number"),
        ({"order": {"cost": -0.5}}, "is negative"),
        ({"order": [1]}, "has no field"),
    ],
)
def test_a_payload_a_budget_cannot_count_is_refused_naming_the_budget(
    payload: dict[str, object], why: str
) -> None:
    step = refused(
        authorization(budgets=COSTS).decide(request(READ, payload), NEW_DECISION),
        R.PAYLOAD_INVALID,
        1,
    )
    assert step.denial.detail.startswith("budget 'costs' counts it: ")
    assert why in step.denial.detail


def test_an_amount_is_counted_exactly() -> None:
    req = request(READ, {"order": {"cost": 0.1}})
    step = proceeds(authorization(budgets=COSTS).decide(req, NEW_DECISION), req, 1)
    assert step.charges[0].amount == Decimal("0.1")


def test_a_refusal_over_budget_names_it_its_reset_and_the_policy_that_allowed() -> None:
    req = request(PUT)
    step = authorization(budgets=BUDGETS).decide(req, NEW_DECISION)
    assert isinstance(step, Proceed)
    denial = budget_refusal(step, "puts").denial
    assert denial.budget == "puts"
    assert denial.resets_at == NOW.replace(hour=0) + timedelta(days=1)
    assert denial.detail == (
        "budget 'puts' (at most 20 calls per principal per 1d) is spent; "
        "it resets at 2026-12-01T00:00:00Z"
    )
    assert (denial.policy_version, denial.policy_digest) == (POLICY.version, POLICY.digest)


def test_the_rules_name_the_rule_that_decided() -> None:
    denial = refused(decide(request(PURGE), NEW_DECISION), R.POLICY_DENIED, 1).denial
    assert denial.policy_ids == ("default.deny_tools",)
    assert denial.policy_engine == "rules"
    req = request(ROTATE)
    step = proceeds(decide(req, History(req).with_consent(S.APPROVED)), req, 1)
    assert step.snapshot.policy_ids == ("default.consent_tools",)
