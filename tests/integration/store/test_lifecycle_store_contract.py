"""One contract, two stores: every case runs on the in-memory store the lifecycle's rule
tests use (tests/support/fakestore) and on PostgreSQL (arvis.store.operations), and
both must answer alike, status for status, through the Python protocol only
(``LifecycleStore``, ``LifecycleReads``). A case that passes on one and fails on the
other is a fake that lies, or SQL that changed its answers."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest

from arvis.domain.authorization import DenialReason, DenialSnapshot
from arvis.domain.boundary import EffectBoundary
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.errors import StoreError
from arvis.domain.identity import Actor
from arvis.domain.ids import (
    CapabilityId,
    CausalId,
    ConfirmationId,
    IdempotencyKey,
    InstanceId,
    IntentId,
    PlanId,
    PrincipalId,
    RunId,
    TenantId,
)
from arvis.domain.intent import GENESIS_HASH, AuditReceipt, Intent
from arvis.domain.journal import (
    ConsentArtifact,
    ConsentRound,
    Decider,
    ExecutionArtifact,
    RefusalArtifact,
    ResolutionArtifact,
    ResolvedEntry,
)
from arvis.domain.payload import freeze_payload
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.journal import chain_hash, recomputes, recorded_text
from arvis.lifecycle.policy.budgets import BudgetCharge
from arvis.lifecycle.ports import LifecycleStore
from arvis.lifecycle.records import ConfirmationRecord
from arvis.lifecycle.runs import RunQuery
from arvis.lifecycle.writes import (
    Admission,
    ApprovalStep,
    Binding,
    ConfirmationChange,
    ConsentRenewal,
    ConsentRequest,
    JournalAppend,
    Resolution,
)
from arvis.store.database import PgStore
from tests.support.fakestore import FakeLifecycleStore

T = TenantId("t")
PLAN = PlanId("p" * 64)
_n = itertools.count()


@pytest.fixture(params=["fake", "postgres"])
async def ops(request: pytest.FixtureRequest) -> AsyncIterator[LifecycleStore]:
    if request.param == "fake":
        yield FakeLifecycleStore()
        return
    url = request.getfixturevalue("database_url")
    store = await PgStore.open(url)
    async with store.engine.begin() as conn:
        await conn.exec_driver_sql(
            "INSERT INTO tool_plans (plan_id, definitions) VALUES (%s, '[]')"
            " ON CONFLICT DO NOTHING",
            (PLAN,),
        )
    try:
        yield store.ops
    finally:
        await store.close()


def now() -> datetime:
    # Both clocks are the wall clock here: the server's now(), the fake's default clock.
    return datetime.now(UTC).replace(microsecond=0)


def fresh(prefix: str) -> str:
    """Names unique in the module's database (the PostgreSQL cases share it)."""
    return f"{prefix}-{next(_n)}"


def intent(
    run: str,
    *,
    causal: str | None = None,
    attempt: int = 1,
    key: str | None = None,
    confirmation: str | None = None,
    principal: str = "p",
    actor: str | None = None,
) -> Intent:
    n = next(_n)
    causal = causal or f"c-{n}"
    return Intent(
        intent_id=IntentId(f"int-{n}"),
        context=AuthorizedEffectContext(
            tenant_id=T,
            principal_id=PrincipalId(principal),
            auth_method="api_key",
            run_id=RunId(run),
            causal_id=CausalId(causal),
            plan_id=PLAN,
            instance_id=InstanceId("i/1"),
            actor=None if actor is None else Actor(principal_id=PrincipalId(actor), method="oidc"),
        ),
        tool="echo",
        plan_id=PLAN,
        payload=freeze_payload({"n": n}),
        idempotency_key=IdempotencyKey(key or f"key-{run}-{causal}"),
        attempt=attempt,
        capability_id=CapabilityId(f"cap-{n}"),
        confirmation_id=None if confirmation is None else ConfirmationId(confirmation),
        admitted_at=now(),
    )


def redo(it: Intent, **changes: object) -> Intent:
    return it.model_copy(update=changes)


def admission(
    it: Intent,
    *,
    receipt: int | None = None,
    reserve: bool = False,
    charges: tuple[BudgetCharge, ...] = (),
) -> Admission:
    return Admission(
        intent=it,
        commitment=it.commitment,
        payload_text=it.payload.canonical.decode(),
        reserve=reserve,
        receipt=None
        if receipt is None
        else AuditReceipt(
            intent_commitment=it.commitment,
            run_id=it.context.run_id,
            causal_id=it.context.causal_id,
            position=receipt,
            store_fingerprint="f",
        ),
        charges=charges,
    )


def settle(
    it: Intent,
    boundary: EffectBoundary,
    result: object = "ok",
    *,
    at: datetime | None = None,
    confirmation: ConfirmationChange | None = None,
    release: bool = False,
) -> JournalAppend:
    return JournalAppend(
        key=it.key,
        intent_id=it.intent_id,
        boundary=boundary,
        retryable=False,
        artifact=ExecutionArtifact(
            tool="echo", plan_id=PLAN, payload_digest=it.payload.digest, result=result
        ),
        recorded_at=at or datetime(2026, 12, 1, 12, tzinfo=UTC),
        settle=True,
        confirmation=confirmation,
        release_budgets=release,
    )


def refusal(it: Intent, *, attempt: int, principal: str = "p", bind: bool = False) -> JournalAppend:
    denial = DenialSnapshot(
        reason=DenialReason.POLICY_DENIED,
        detail="no",
        tool="echo",
        idempotency_key=it.idempotency_key,
    )
    return JournalAppend(
        key=replace(it.key, attempt=attempt),
        intent_id=f"refused-{next(_n)}",
        boundary=EffectBoundary.PRE_EFFECT_REFUSAL,
        retryable=False,
        artifact=RefusalArtifact(
            tool="echo",
            plan_id=PLAN,
            payload_digest=it.payload.digest,
            principal_id=principal,
            reason=denial.reason,
            detail="no",
            denial=denial,
        ),
        recorded_at=now(),
        bind=Binding(
            plan_id=PLAN,
            tool="echo",
            payload_digest=it.payload.digest,
            payload_text=it.payload.canonical.decode(),
        )
        if bind
        else None,
    )


def charge(budget: str, amount: int, limit: int) -> BudgetCharge:
    start = datetime(2026, 12, 1, tzinfo=UTC)
    return BudgetCharge(
        budget=budget,
        scope_key="{}",
        window_start=start,
        resets_at=start + timedelta(days=1),
        amount=Decimal(amount),
        limit=Decimal(limit),
    )


async def ask_consent(
    ops: LifecycleStore, it: Intent, *, quorum: int = 1, ttl_s: float = 3600
) -> ConfirmationRecord:
    # The context as admission seals it (the tests' own: tenant, principal, any actor).
    context = {"tenant_id": T, "principal_id": "p"}
    if it.context.actor is not None:
        context["actor"] = it.context.actor.model_dump(mode="json")
    cid = ConfirmationId(fresh("cnf"))
    at = now()
    record = ConfirmationRecord(
        confirmation_id=cid,
        tenant_id=T,
        run_id=it.context.run_id,
        causal_id=it.context.causal_id,
        idempotency_key=it.idempotency_key,
        tool="echo",
        payload=it.payload.value,
        state=ConfirmationState.PENDING,
        context=context,
        decided_by=None,
        decision_reason=None,
        decided_at=None,
        expires_at=at + timedelta(seconds=ttl_s),
        created_at=at,
        quorum=quorum,
    )
    answer = await ops.request_consent(
        ConsentRequest(
            confirmation=record,
            plan_id=PLAN,
            payload_digest=it.payload.digest,
            payload_text=it.payload.canonical.decode(),
        )
    )
    assert (answer.status, answer.confirmation_id) == ("created", cid)
    return await confirmation(ops, cid)


async def confirmation(ops: LifecycleStore, cid: str) -> ConfirmationRecord:
    async with ops.reading() as reads:
        found = await reads.confirmation(T, ConfirmationId(cid))
    assert found is not None
    return found


def approval(
    record: ConfirmationRecord, who: str, seen: int, to: ConfirmationState
) -> ApprovalStep:
    decider = Decider(principal_id=who, auth_method="api_key", key_id=f"k-{who}")
    return ApprovalStep(
        confirmation=record,
        approver_principal=who,
        approver_method="api_key",
        approver_key_id=f"k-{who}",
        approver_groups=(),
        seen=seen,
        to_state=to,
        decided_by=who if to is ConfirmationState.APPROVED else None,
        artifact=ConsentArtifact(
            confirmation_id=record.confirmation_id,
            decision=ConfirmationState.APPROVED,
            tool="echo",
            requested_by="p",
            decided_by=decider,
            state=to,
            approvals=seen + 1,
            quorum=record.quorum,
            round=record.round,
        ),
        recorded_at=now(),
    )


# -- admission ---------------------------------------------------------------


async def test_admission_takes_the_runs_next_receipt_per_run(ops: LifecycleStore) -> None:
    run, other = fresh("run"), fresh("run")
    assert (await ops.admit(admission(intent(run)))).receipt_position == 1
    answer = await ops.admit(admission(intent(run)))
    assert (answer.status, answer.receipt_position, answer.run_plan) == ("admitted", 2, PLAN)
    assert (await ops.admit(admission(intent(other)))).receipt_position == 1


async def test_admission_on_stale_history_is_stale_and_keeps_only_the_binding(
    ops: LifecycleStore,
) -> None:
    run = fresh("run")
    late = intent(run, attempt=2)
    assert (await ops.admit(admission(late))).status == "stale"
    history = await ops.history(T, RunId(run), late.context.causal_id, late.idempotency_key)
    assert (history.bound_key, history.in_flight, history.owner) == (
        late.idempotency_key,
        None,
        "p",
    )
    first = redo(late, attempt=1)
    assert (await ops.admit(admission(first))).status == "admitted"
    # One attempt in flight per decision: the next is stale until it is settled.
    assert (await ops.admit(admission(redo(first, attempt=2)))).status == "stale"


async def test_another_decision_under_a_causal_id_is_a_causal_conflict(ops: LifecycleStore) -> None:
    run = fresh("run")
    await ops.admit(admission(intent(run, causal="same", key=fresh("k"))))
    answer = await ops.admit(admission(intent(run, causal="same", key=fresh("k"))))
    assert answer.status == "causal_conflict"


async def test_a_run_bound_to_a_principal_refuses_anothers_steps(ops: LifecycleStore) -> None:
    run = fresh("run")
    await ops.admit(admission(intent(run, principal="alice")))
    theirs = intent(run, principal="mallory")
    assert (await ops.admit(admission(theirs))).status == "identity_mismatch"
    assert (
        await ops.journal(refusal(theirs, attempt=1, principal="mallory", bind=True))
    ).status == ("identity_mismatch")
    history = await ops.history(T, RunId(run), theirs.context.causal_id, theirs.idempotency_key)
    assert (history.bound_key, history.owner) == (None, "alice")


async def test_a_declared_receipt_must_be_past_the_runs_last(ops: LifecycleStore) -> None:
    run = fresh("run")
    assert (await ops.admit(admission(intent(run), receipt=5))).receipt_position == 5
    assert (await ops.admit(admission(intent(run), receipt=5))).status == "receipt_reused"
    assert (await ops.admit(admission(intent(run)))).receipt_position == 6


async def test_a_charge_that_does_not_fit_admits_and_charges_nothing(ops: LifecycleStore) -> None:
    run, budget = fresh("run"), fresh("calls")
    fits = intent(run)
    assert (await ops.admit(admission(fits, charges=(charge(budget, 2, 3),)))).status == "admitted"
    spent = intent(run)
    both = (charge(budget, 2, 3), charge(fresh("aaa"), 1, 9))
    answer = await ops.admit(admission(spent, charges=both))
    assert (answer.status, answer.budget) == ("budget_exceeded", budget)
    history = await ops.history(T, RunId(run), spent.context.causal_id, spent.idempotency_key)
    assert (history.bound_key, history.in_flight) == (None, None)
    start = datetime(2026, 12, 1, tzinfo=UTC)
    async with ops.reading() as reads:
        usage = await reads.budget_usage(T, [(budget, start), (both[1].budget, start)])
    assert [(u.budget, u.used) for u in usage] == [(budget, Decimal(2))]
    # A settlement that proves nothing started gives the charges back.
    await ops.journal(settle(fits, EffectBoundary.EFFECT_NOT_STARTED, release=True))
    async with ops.reading() as reads:
        usage = await reads.budget_usage(T, [(budget, start)])
    assert [u.used for u in usage] == [Decimal(0)]


async def test_a_run_needs_a_principal(ops: LifecycleStore) -> None:
    run = fresh("run")
    # PostgreSQL raises SQLSTATE 22004, which store/errors.py maps to no domain error.
    with pytest.raises((StoreError, psycopg.Error)):
        await ops.journal(refusal(intent(run), attempt=1, principal="", bind=True))
    async with ops.reading() as reads:
        assert await reads.run(T, RunId(run)) is None


# -- the journal -------------------------------------------------------------


async def test_settling_appends_a_chained_entry_and_ends_the_attempt(ops: LifecycleStore) -> None:
    run = fresh("run")
    it = intent(run)
    await ops.admit(admission(it))
    append = settle(it, EffectBoundary.EFFECT_COMPLETED)
    answer = await ops.journal(append)
    entry = answer.entry
    assert answer.status == "appended"
    assert entry is not None
    assert (entry.position, entry.prev_hash, entry.kind) == (1, GENESIS_HASH, "execution")
    assert entry.entry_hash == chain_hash(
        prev_hash=GENESIS_HASH,
        tenant_id=T,
        run_id=run,
        position=1,
        kind="execution",
        causal_id=it.context.causal_id,
        idempotency_key=it.idempotency_key,
        attempt=1,
        intent_id=it.intent_id,
        boundary="EFFECT_COMPLETED",
        recorded_at=recorded_text(append.recorded_at),
        body_text=entry.body_text,
    )
    history = await ops.history(T, RunId(run), it.context.causal_id, it.idempotency_key)
    assert history.in_flight is None
    assert history.latest is not None
    assert (history.latest.attempt, history.latest.boundary) == (1, EffectBoundary.EFFECT_COMPLETED)
    assert (history.latest.position, history.latest.plan_id) == (1, PLAN)
    async with ops.reading() as reads:
        record = await reads.run(T, RunId(run))
        stored = await reads.entry_at(T, RunId(run), 1)
        assert await reads.in_flight_intents(T, RunId(run)) == set()
        assert await reads.attempt_entry(T, RunId(run), it.idempotency_key, 1) == stored
    assert record is not None
    assert (record.journal_length, record.journal_head) == (1, entry.entry_hash)
    assert stored == entry
    assert recomputes(entry)


async def test_the_same_append_again_is_existing_and_another_result_a_conflict(
    ops: LifecycleStore,
) -> None:
    it = intent(fresh("run"))
    await ops.admit(admission(it))
    first = await ops.journal(settle(it, EffectBoundary.EFFECT_COMPLETED))
    again = await ops.journal(settle(it, EffectBoundary.EFFECT_COMPLETED))
    other = await ops.journal(settle(it, EffectBoundary.EFFECT_FAILED, "different"))
    assert first.entry is not None
    assert (again.status, again.entry) == ("existing", first.entry)
    assert (other.status, other.entry) == ("conflict", None)


async def test_two_settlers_of_one_attempt_never_both_succeed(ops: LifecycleStore) -> None:
    it = intent(fresh("run"))
    await ops.admit(admission(it))
    sweeper = settle(it, EffectBoundary.EFFECT_STATE_UNKNOWN, None, at=now())
    owner = settle(it, EffectBoundary.EFFECT_COMPLETED)
    assert [(await ops.journal(a)).status for a in (sweeper, owner)] == ["appended", "conflict"]


async def test_refusals_take_the_next_attempt_number_only(ops: LifecycleStore) -> None:
    run = fresh("run")
    it = intent(run)
    first = await ops.journal(refusal(it, attempt=1, bind=True))
    assert first.status == "appended"
    assert (await ops.journal(refusal(it, attempt=1))).status == "stale"
    assert (await ops.journal(refusal(it, attempt=3))).status == "stale"
    assert (await ops.journal(refusal(it, attempt=2))).status == "appended"
    other = intent(run, causal=it.context.causal_id, key=fresh("k"))
    assert (await ops.journal(refusal(other, attempt=1, bind=True))).status == "causal_conflict"


async def test_an_append_to_no_run_fails_and_writes_nothing(ops: LifecycleStore) -> None:
    run = fresh("run")
    it = intent(run)
    append = replace(
        settle(it, EffectBoundary.EFFECT_COMPLETED), settle=False, key=it.key.decision()
    )
    with pytest.raises(StoreError):
        await ops.journal(append)
    async with ops.reading() as reads:
        assert await reads.run(T, RunId(run)) is None


async def test_a_flagged_append_marks_the_run_audit_incomplete(ops: LifecycleStore) -> None:
    run = fresh("run")
    it = intent(run)
    await ops.admit(admission(it))
    await ops.journal(replace(settle(it, EffectBoundary.EFFECT_COMPLETED), flag="late"))
    async with ops.reading() as reads:
        record = await reads.run(T, RunId(run))
        page = await reads.page(T, RunId(run), 0, 10)
        chain = await reads.chain(T, RunId(run), 0, 10)
    assert record is not None
    assert record.audit_incomplete
    assert [e.position for e in page] == [1]
    assert [row[0] for row in chain] == [1]


# -- consent and quorum ------------------------------------------------------


async def test_consent_is_asked_once_and_reserved_and_settled(ops: LifecycleStore) -> None:
    run = fresh("run")
    it = intent(run)
    record = await ask_consent(ops, it)
    again = await ops.request_consent(
        ConsentRequest(
            confirmation=replace(record, confirmation_id=ConfirmationId(fresh("cnf"))),
            plan_id=PLAN,
            payload_digest=it.payload.digest,
            payload_text=it.payload.canonical.decode(),
        )
    )
    assert (again.status, again.confirmation_id) == ("existing", record.confirmation_id)
    under = redo(it, confirmation_id=record.confirmation_id)
    # PENDING: there is nothing to reserve yet.
    assert (await ops.admit(admission(under, reserve=True))).status == "stale"
    assert (await ops.admit(admission(it))).status == "stale"
    approve = ConfirmationChange(
        confirmation_id=record.confirmation_id,
        from_states=(ConfirmationState.PENDING,),
        to_state=ConfirmationState.APPROVED,
        strict=True,
        decided_by="ops",
    )
    step = await ops.approve(approval(record, "ops", 0, ConfirmationState.APPROVED))
    assert step.status == "appended"
    assert (await confirmation(ops, record.confirmation_id)).decided_by == "ops"
    assert (await ops.admit(admission(under, reserve=True))).status == "admitted"
    assert (await confirmation(ops, record.confirmation_id)).state is ConfirmationState.RESERVED
    consumed = replace(approve, from_states=(ConfirmationState.RESERVED,), strict=False)
    consumed = replace(consumed, to_state=ConfirmationState.CONSUMED, decided_by=None)
    answer = await ops.journal(
        settle(under, EffectBoundary.EFFECT_COMPLETED, confirmation=consumed)
    )
    assert answer.status == "appended"
    after = await confirmation(ops, record.confirmation_id)
    assert (after.state, after.decided_by) == (ConfirmationState.CONSUMED, "ops")


async def test_a_quorum_counts_distinct_approvers_of_the_round(ops: LifecycleStore) -> None:
    it = intent(fresh("run"))
    record = await ask_consent(ops, it, quorum=2)
    first = await ops.approve(approval(record, "a", 0, ConfirmationState.PENDING))
    assert first.status == "appended"
    assert first.entry is not None
    assert first.entry.kind == "confirmation"
    assert (await ops.approve(approval(record, "a", 1, ConfirmationState.APPROVED))).status == (
        "duplicate"
    )
    assert (await ops.approve(approval(record, "b", 0, ConfirmationState.APPROVED))).status == (
        "stale"
    )
    assert (await ops.approve(approval(record, "b", 1, ConfirmationState.APPROVED))).status == (
        "appended"
    )
    after = await confirmation(ops, record.confirmation_id)
    assert after.state is ConfirmationState.APPROVED
    assert [a.principal_id for a in after.approvals] == ["a", "b"]
    assert (
        await ops.approve(approval(after, "c", 2, ConfirmationState.APPROVED))
    ).status == "stale"


async def test_an_expired_consent_takes_no_approval_and_is_expirable(ops: LifecycleStore) -> None:
    it = intent(fresh("run"))
    record = await ask_consent(ops, it, ttl_s=-1)
    answer = await ops.approve(approval(record, "a", 0, ConfirmationState.APPROVED))
    assert (answer.status, answer.entry) == ("expired", None)
    assert record.confirmation_id in [c.confirmation_id for c in await ops.expirable(limit=10_000)]
    async with ops.reading() as reads:
        pending = await reads.confirmations(T, ConfirmationState.PENDING, 10_000, None)
    assert record.confirmation_id in [c.confirmation_id for c in pending]


# -- uncertain attempts and their resolution -----------------------------------


def resolution(it: Intent, position: int, entry_hash: str, **extra: object) -> Resolution:
    return Resolution(
        key=it.key,
        uncertain_position=position,
        artifact=ResolutionArtifact(
            tool="echo",
            attempt=it.attempt,
            resolves=ResolvedEntry(
                position=position,
                entry_hash=entry_hash,
                boundary=EffectBoundary.EFFECT_STATE_UNKNOWN,
            ),
            boundary=EffectBoundary.EFFECT_NOT_STARTED,
            resolved_by=Decider(principal_id="ops", auth_method="api_key"),
            evidence="looked",
            requested_by="p",
            **extra,  # type: ignore[arg-type]
        ),
        resolved_by="ops",
        recorded_at=now(),
    )


async def test_an_uncertain_attempt_is_resolved_once(ops: LifecycleStore) -> None:
    run = fresh("run")
    it = intent(run)
    await ops.admit(admission(it))
    await ops.mark_started(T, it.idempotency_key, 1)
    found = await ops.attempt(T, it.idempotency_key)
    assert found is not None
    assert (found.started, found.receipt_position, found.owner) == (True, 1, "i/1")
    uncertain = await ops.journal(settle(it, EffectBoundary.EFFECT_STATE_UNKNOWN, None))
    assert uncertain.entry is not None
    assert await ops.attempt(T, it.idempotency_key) is None
    due = [u for u in await ops.open_uncertain(limit=10_000, max_asks=5) if u.entry.run_id == run]
    assert [(u.entry.position, u.resolved, u.asks) for u in due] == [(1, None, 0)]
    await ops.record_ask(T, it.idempotency_key, 1, 3600)
    assert run not in [u.entry.run_id for u in await ops.open_uncertain(limit=10_000, max_asks=5)]
    wrong = await ops.resolve(resolution(it, 2, uncertain.entry.entry_hash))
    assert (wrong.status, wrong.entry) == ("not_uncertain", None)
    answer = await ops.resolve(resolution(it, 1, uncertain.entry.entry_hash))
    assert answer.status == "appended"
    assert answer.entry is not None
    assert (answer.entry.kind, answer.entry.attempt, answer.entry.position) == (
        "resolution",
        None,
        2,
    )
    assert (await ops.resolve(resolution(it, 1, uncertain.entry.entry_hash))).status == "resolved"
    history = await ops.history(T, RunId(run), it.context.causal_id, it.idempotency_key)
    assert history.latest is not None
    assert (history.latest.resolved, history.latest.resolution_position) == (
        EffectBoundary.EFFECT_NOT_STARTED,
        2,
    )
    async with ops.reading() as reads:
        read = await reads.uncertain(T, RunId(run), it.idempotency_key, 1)
    assert read is not None
    assert (read.resolved, read.asks, read.payload) == (
        EffectBoundary.EFFECT_NOT_STARTED,
        1,
        it.payload.value,
    )


async def test_a_resolution_as_not_started_opens_the_consents_next_round(
    ops: LifecycleStore,
) -> None:
    run = fresh("run")
    it = intent(run)
    record = await ask_consent(ops, it)
    await ops.approve(approval(record, "ops", 0, ConfirmationState.APPROVED))
    under = redo(it, confirmation_id=record.confirmation_id)
    await ops.admit(admission(under, reserve=True))
    consumed = ConfirmationChange(
        confirmation_id=record.confirmation_id,
        from_states=(ConfirmationState.RESERVED,),
        to_state=ConfirmationState.CONSUMED,
    )
    settled = await ops.journal(
        settle(under, EffectBoundary.EFFECT_STATE_UNKNOWN, None, confirmation=consumed)
    )
    assert settled.entry is not None
    used = await confirmation(ops, record.confirmation_id)
    expires = now() + timedelta(hours=1)
    round_ = ConsentRound(
        confirmation_id=record.confirmation_id,
        round=2,
        state=ConfirmationState.PENDING,
        approvals=0,
        quorum=1,
    )
    renewal = ConsentRenewal(
        confirmation=used,
        round=3,
        to_state=ConfirmationState.PENDING,
        expires_at=expires,
        approver=None,
        decided_by=None,
    )
    base = resolution(under, settled.entry.position, settled.entry.entry_hash, consent=round_)
    assert (await ops.resolve(replace(base, renewal=renewal))).status == "stale"
    answer = await ops.resolve(replace(base, renewal=replace(renewal, round=2)))
    assert answer.status == "appended"
    renewed = await confirmation(ops, record.confirmation_id)
    assert (renewed.state, renewed.round, renewed.approvals) == (ConfirmationState.PENDING, 2, ())
    # The round opens at the database's clock and lives what Python decided (one clock).
    assert renewed.renewed_at is not None
    assert renewed.expires_at - renewed.renewed_at == expires - base.recorded_at
    # The new round counts its own approvers: the first round's approver may approve again.
    again = await ops.approve(approval(renewed, "ops", 0, ConfirmationState.APPROVED))
    assert again.status == "appended"


# -- recovery's reads and the leases ---------------------------------------------


async def test_in_flight_attempts_are_found_by_owner_and_by_lapsed_lease(
    ops: LifecycleStore,
) -> None:
    owner = fresh("inst")
    it = intent(fresh("run"))
    it = redo(it, context=it.context.model_copy(update={"instance_id": InstanceId(owner)}))
    await ops.admit(admission(it))
    assert [a.intent_id for a in await ops.in_flight(limit=10_000, owner=owner)] == [it.intent_id]
    # The owner never held a lease: its attempts are anybody's to settle.
    abandoned = await ops.in_flight(limit=10_000)
    assert it.intent_id in [a.intent_id for a in abandoned]
    assert await ops.claim_lease(owner, "h1", 60)
    assert it.intent_id not in [a.intent_id for a in await ops.in_flight(limit=10_000)]
    assert await ops.release_lease(owner, "h1")
    assert it.intent_id in [a.intent_id for a in await ops.in_flight(limit=10_000)]


async def test_a_lease_is_held_by_one_holder_until_released(ops: LifecycleStore) -> None:
    instance = fresh("inst")
    name = f"{instance}/0"
    assert await ops.claim_lease(name, "h1", 60)
    assert not await ops.claim_lease(name, "h2", 60)
    assert await ops.beat_lease(name, "h1", 60)
    assert not await ops.beat_lease(name, "h2", 60)
    assert await ops.live_leases(instance) == [(name, "h1")]
    assert not await ops.release_lease(name, "h2")
    assert await ops.release_lease(name, "h1")
    assert not await ops.release_lease(name, "h1")
    assert await ops.live_leases(instance) == []
    assert await ops.claim_lease(name, "h2", 60)
    # A lease whose time ran out is free again.
    assert await ops.claim_lease(f"{instance}/1", "h3", -1)
    assert await ops.claim_lease(f"{instance}/1", "h4", 60)
    assert await ops.live_leases(instance) == [(name, "h2"), (f"{instance}/1", "h4")]


async def test_the_runs_list_counts_waiting_and_uncertain(ops: LifecycleStore) -> None:
    run = fresh("listed")
    it = intent(run)
    await ops.admit(admission(it))
    await ops.journal(settle(it, EffectBoundary.EFFECT_STATE_UNKNOWN, None))
    await ask_consent(ops, intent(run))
    async with ops.reading() as reads:
        found = await reads.runs(T, RunQuery(limit=10, containing=run))
    assert [(r.run_id, r.entries, r.waiting, r.uncertain, r.status) for r in found] == [
        (run, 1, 1, 1, "uncertain")
    ]


async def test_the_runs_list_names_every_agent_that_acted_and_filters_by_one(
    ops: LifecycleStore,
) -> None:
    """An agent acting for the principal is read from each thing a call records: an
    execution's sealed context, a refusal's actor, a consent decision's requester, a
    consent still waiting, an attempt in flight. A payload's own "actor" is not one."""
    run, alone = fresh("acted"), fresh("alone")
    ran = intent(run, actor="bot-a")
    await ops.admit(admission(ran))
    entry = settle(ran, EffectBoundary.EFFECT_COMPLETED, {"actor": {"principal_id": "mallory"}})
    assert isinstance(entry.artifact, ExecutionArtifact)
    await ops.journal(
        replace(entry, artifact=entry.artifact.model_copy(update={"context": ran.context}))
    )
    refused = refusal(intent(run), attempt=1, bind=True)
    assert isinstance(refused.artifact, RefusalArtifact)
    bot_b = Actor(principal_id=PrincipalId("bot-b"), method="api_key", key_id="k-b")
    await ops.journal(
        replace(refused, artifact=refused.artifact.model_copy(update={"actor": bot_b}))
    )
    approved = await ask_consent(ops, intent(run, actor="bot-c"))
    step = approval(approved, "approver", 0, ConfirmationState.APPROVED)
    asked = step.artifact.model_copy(update={"requested_actor": "bot-c"})
    assert (await ops.approve(replace(step, artifact=asked))).status == "appended"
    await ask_consent(ops, intent(run, actor="bot-d"))
    await ops.admit(admission(intent(run, actor="bot-e")))
    solo = intent(alone)
    await ops.admit(admission(solo))
    await ops.journal(settle(solo, EffectBoundary.EFFECT_COMPLETED))

    async with ops.reading() as reads:
        both = await reads.runs(T, RunQuery(limit=10, containing="a"))
        by_b = await reads.runs(T, RunQuery(limit=10, actor="bot-b"))
        by_prefix = await reads.runs(T, RunQuery(limit=10, actor="bot"))
        by_mallory = await reads.runs(T, RunQuery(limit=10, actor="mallory"))
    actors = {r.run_id: r.actors for r in both if r.run_id in (run, alone)}
    assert actors == {run: ("bot-a", "bot-b", "bot-c", "bot-d", "bot-e"), alone: ()}
    assert [r.run_id for r in by_b] == [run]
    assert (by_prefix, by_mallory) == ([], [])


# -- what is read back is what was written -------------------------------------


async def test_a_consent_reads_back_as_it_was_asked(ops: LifecycleStore) -> None:
    it = intent(fresh("run"))
    asked = await ask_consent(ops, it, quorum=2)
    history = await ops.history(T, it.context.run_id, it.context.causal_id, it.idempotency_key)
    assert history.confirmation is not None
    # Each read says when the database read it (and a listing the digest the payload
    # was asked with, issue 27); everything else reads back as asked.
    unread = {"read_at": None, "payload_digest": None}
    assert replace(history.confirmation, **unread) == replace(asked, **unread)
    assert history.read_at is not None
    assert (asked.state, asked.quorum, asked.round, asked.approvals) == (
        ConfirmationState.PENDING,
        2,
        1,
        (),
    )
    assert (asked.payload, asked.context, asked.decided_by) == (
        it.payload.value,
        {"tenant_id": T, "principal_id": "p"},
        None,
    )


async def test_an_in_flight_attempt_reads_back_as_it_was_admitted(ops: LifecycleStore) -> None:
    run = fresh("run")
    it = intent(run)
    answer = await ops.admit(admission(it, charges=(charge(fresh("calls"), 1, 5),)))
    found = await ops.attempt(T, it.idempotency_key)
    assert found is not None
    assert (found.run_id, found.causal_id, found.tool, found.plan_id) == (
        run,
        it.context.causal_id,
        "echo",
        PLAN,
    )
    assert (found.intent_id, found.capability_id, found.commitment) == (
        it.intent_id,
        it.capability_id,
        it.commitment,
    )
    assert (found.receipt_position, found.started, found.confirmation_id) == (
        answer.receipt_position,
        False,
        None,
    )
    assert (found.payload_digest, found.context) == (
        it.payload.digest,
        json.loads(it.context.model_dump_json()),
    )
    async with ops.reading() as reads:
        assert await reads.in_flight_intents(T, RunId(run)) == {it.intent_id}


async def test_a_decision_on_a_consent_no_longer_waiting_is_stale(ops: LifecycleStore) -> None:
    it = intent(fresh("run"))
    record = await ask_consent(ops, it)
    deny = JournalAppend(
        key=it.key.decision(),
        intent_id=None,
        boundary=None,
        retryable=False,
        artifact=ConsentArtifact(
            confirmation_id=record.confirmation_id,
            decision=ConfirmationState.DENIED,
            tool="echo",
            requested_by="p",
            decided_by=Decider(principal_id="ops", auth_method="api_key"),
            reason="no",
        ),
        recorded_at=now(),
        confirmation=ConfirmationChange(
            confirmation_id=record.confirmation_id,
            from_states=(ConfirmationState.PENDING, ConfirmationState.APPROVED),
            to_state=ConfirmationState.DENIED,
            strict=True,
            decided_by="ops",
            reason="no",
        ),
    )
    first = await ops.journal(deny)
    assert first.status == "appended"
    denied = await confirmation(ops, record.confirmation_id)
    assert (denied.state, denied.decided_by, denied.decision_reason) == (
        ConfirmationState.DENIED,
        "ops",
        "no",
    )
    assert (await ops.journal(replace(deny, recorded_at=now()))).status == "stale"
    # Not strict (an expiry swept after the decision): the entry is appended, the state kept.
    loose = replace(deny.confirmation, strict=False, to_state=ConfirmationState.EXPIRED)  # type: ignore[type-var]
    assert (await ops.journal(replace(deny, confirmation=loose))).status == "appended"
    assert (await confirmation(ops, record.confirmation_id)).state is ConfirmationState.DENIED


async def test_concurrent_admissions_of_one_decision_admit_one(ops: LifecycleStore) -> None:
    run = fresh("run")
    first = intent(run, causal="same")
    second = redo(first, intent_id=IntentId(fresh("int")), capability_id=CapabilityId(fresh("cap")))
    answers = await asyncio.gather(ops.admit(admission(first)), ops.admit(admission(second)))
    assert sorted(a.status for a in answers) == ["admitted", "stale"]
