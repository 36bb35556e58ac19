"""The store's write steps (arvis/store/sql/): each one statement that writes what Python
decided, and only while what Python knew is still true (revision 0005)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from arvis.domain.authorization import DenialReason, DenialSnapshot
from arvis.domain.boundary import EffectBoundary
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.errors import StoreError
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
from arvis.domain.journal import ExecutionArtifact, RefusalArtifact
from arvis.domain.payload import freeze_payload
from arvis.domain.states import ConfirmationState, settled_confirmation
from arvis.lifecycle.journal import chain_hash, recorded_text
from arvis.lifecycle.writes import Admission, Binding, ConfirmationChange, JournalAppend
from arvis.store.database import PgStore

T = TenantId("t")
PLAN = PlanId("p" * 64)
AT = datetime(2026, 12, 1, 12, tzinfo=UTC)
_numbers = itertools.count()


@pytest.fixture
async def plan(store: PgStore) -> PlanId:
    async with store.engine.begin() as conn:
        await conn.exec_driver_sql(
            "INSERT INTO tool_plans (plan_id, definitions) VALUES (%s, '[]')"
            " ON CONFLICT DO NOTHING",
            (PLAN,),
        )
    return PLAN


def _intent(
    run: str,
    *,
    causal: str | None = None,
    attempt: int = 1,
    key: str | None = None,
    plan: PlanId = PLAN,
    confirmation: str | None = None,
    principal: str = "p",
) -> Intent:
    n = next(_numbers)
    causal = causal or f"c-{n}"
    context = AuthorizedEffectContext(
        tenant_id=T,
        principal_id=PrincipalId(principal),
        auth_method="api_key",
        run_id=RunId(run),
        causal_id=CausalId(causal),
        plan_id=plan,
        instance_id=InstanceId("i/1"),
    )
    return Intent(
        intent_id=IntentId(f"int-{n}"),
        context=context,
        tool="echo",
        plan_id=plan,
        payload=freeze_payload({"n": n}),
        idempotency_key=IdempotencyKey(key or f"key-{causal}"),
        attempt=attempt,
        capability_id=CapabilityId(f"cap-{n}"),
        confirmation_id=None if confirmation is None else ConfirmationId(confirmation),
        admitted_at=AT,
    )


def _admission(
    intent: Intent, receipt: AuditReceipt | None = None, reserve: bool = False
) -> Admission:
    return Admission(
        intent=intent,
        commitment=intent.commitment,
        payload_text=intent.payload.canonical.decode(),
        reserve=reserve,
        receipt=receipt,
    )


def _settle(
    intent: Intent,
    boundary: EffectBoundary,
    result: object = "ok",
    *,
    at: datetime = AT,
    confirmation: ConfirmationChange | None = None,
) -> JournalAppend:
    return JournalAppend(
        key=intent.key,
        intent_id=intent.intent_id,
        boundary=boundary,
        retryable=False,
        artifact=ExecutionArtifact(
            tool="echo", plan_id=PLAN, payload_digest=intent.payload.digest, result=result
        ),
        recorded_at=at,
        settle=True,
        confirmation=confirmation,
    )


async def _rows(store: PgStore, sql: str, *params: object) -> list[tuple[object, ...]]:
    async with store.engine.connect() as conn:
        result = await conn.exec_driver_sql(sql, params)
        return [tuple(row) for row in result.fetchall()]


async def test_admission_records_one_attempt_with_the_runs_next_receipt(
    store: PgStore, plan: PlanId
) -> None:
    first = _intent("run-a")
    second = _intent("run-a")
    assert (await store.ops.admit(_admission(first))).receipt_position == 1
    assert (await store.ops.admit(_admission(second))).receipt_position == 2
    # Receipt positions count per run: another run (another tenant's too) starts at 1.
    assert (await store.ops.admit(_admission(_intent("run-b")))).receipt_position == 1
    assert await _rows(store, "SELECT count(*) FROM attempts WHERE run_id = 'run-a'") == [(2,)]


async def test_admission_on_stale_history_writes_nothing(store: PgStore, plan: PlanId) -> None:
    intent = _intent("run-stale")
    assert (await store.ops.admit(_admission(intent))).status == "admitted"
    # The same attempt again (a second consumption of one capability's attempt): stale.
    again = intent.model_copy(update={"capability_id": CapabilityId("cap-again")})
    assert (await store.ops.admit(_admission(again))).status == "stale"
    # Settled, attempt 1 still cannot be admitted again; attempt 2 can.
    assert (
        await store.ops.journal(_settle(intent, EffectBoundary.EFFECT_NOT_STARTED))
    ).status == "appended"
    assert (await store.ops.admit(_admission(again))).status == "stale"
    assert (
        await store.ops.admit(_admission(again.model_copy(update={"attempt": 2})))
    ).status == "admitted"
    assert await _rows(
        store, "SELECT attempt FROM attempts WHERE idempotency_key = %s", intent.idempotency_key
    ) == [(2,)]


async def test_another_decision_under_a_causal_id_is_a_conflict(
    store: PgStore, plan: PlanId
) -> None:
    first = _intent("run-causal", causal="c")
    assert (await store.ops.admit(_admission(first))).status == "admitted"
    other = _intent("run-causal", causal="c", key="another-key")
    assert (await store.ops.admit(_admission(other))).status == "causal_conflict"


async def test_an_attempt_records_the_plan_it_was_decided_under(
    store: PgStore, plan: PlanId
) -> None:
    assert (await store.ops.admit(_admission(_intent("run-plan")))).status == "admitted"
    async with store.engine.begin() as conn:
        await conn.exec_driver_sql(
            "INSERT INTO tool_plans (plan_id, definitions) VALUES (repeat('q', 64), '[]')"
            " ON CONFLICT DO NOTHING"
        )
    answer = await store.ops.admit(_admission(_intent("run-plan", plan=PlanId("q" * 64))))
    assert answer.status == "admitted"
    plans = await _rows(
        store, "SELECT plan_id FROM attempts WHERE run_id = 'run-plan' ORDER BY admitted_at"
    )
    assert sorted(plans) == sorted([(PLAN,), ("q" * 64,)])
    # The run remembers the plan it began with.
    assert await _rows(store, "SELECT plan_id FROM runs WHERE run_id = 'run-plan'") == [(PLAN,)]


def _refusal(intent: Intent, principal: str) -> JournalAppend:
    denial = DenialSnapshot(
        reason=DenialReason.POLICY_DENIED,
        detail="no",
        tool="echo",
        idempotency_key=intent.idempotency_key,
    )
    return JournalAppend(
        key=replace(intent.key, attempt=1),
        intent_id=f"refused-{intent.intent_id}",
        boundary=EffectBoundary.PRE_EFFECT_REFUSAL,
        retryable=False,
        artifact=RefusalArtifact(
            tool="echo",
            plan_id=PLAN,
            payload_digest=intent.payload.digest,
            principal_id=principal,
            reason=denial.reason,
            detail="no",
            denial=denial,
        ),
        recorded_at=AT,
        bind=Binding(
            plan_id=PLAN,
            tool="echo",
            payload_digest=intent.payload.digest,
            payload_text=intent.payload.canonical.decode(),
        ),
    )


async def test_a_run_is_bound_to_its_first_principal_and_anothers_steps_write_nothing(
    store: PgStore, plan: PlanId
) -> None:
    assert (await store.ops.admit(_admission(_intent("run-owned")))).status == "admitted"
    before = await _rows(store, "SELECT count(*) FROM decisions WHERE run_id = 'run-owned'")

    admit = await store.ops.admit(_admission(_intent("run-owned", principal="bob")))
    refuse = await store.ops.journal(_refusal(_intent("run-owned", principal="bob"), "bob"))

    assert (admit.status, refuse.status) == ("identity_mismatch", "identity_mismatch")
    assert await _rows(store, "SELECT principal_id FROM runs WHERE run_id = 'run-owned'") == [
        ("p",)
    ]
    assert await _rows(store, "SELECT count(*) FROM decisions WHERE run_id = 'run-owned'") == (
        before
    )
    assert await _rows(store, "SELECT count(*) FROM attempts WHERE run_id = 'run-owned'") == [(1,)]
    assert await _rows(
        store, "SELECT count(*) FROM journal_entries WHERE run_id = 'run-owned'"
    ) == [(0,)]
    # The principal's own refusal goes in.
    assert (await store.ops.journal(_refusal(_intent("run-owned"), "p"))).status == "appended"


async def test_a_run_from_before_revision_0010_is_bound_by_its_next_step(
    store: PgStore, plan: PlanId
) -> None:
    assert (await store.ops.admit(_admission(_intent("run-legacy")))).status == "admitted"
    async with store.engine.begin() as conn:
        await conn.exec_driver_sql(
            "UPDATE runs SET principal_id = NULL WHERE run_id = 'run-legacy'"
        )
    claimed = await store.ops.admit(_admission(_intent("run-legacy", principal="carol")))
    assert claimed.status == "admitted"
    assert await _rows(store, "SELECT principal_id FROM runs WHERE run_id = 'run-legacy'") == [
        ("carol",)
    ]
    refused = await store.ops.admit(_admission(_intent("run-legacy")))
    assert refused.status == "identity_mismatch"


async def test_a_declared_sinks_position_must_be_past_the_runs_last(
    store: PgStore, plan: PlanId
) -> None:
    def receipt(intent: Intent, position: int) -> AuditReceipt:
        return AuditReceipt(
            intent_commitment=intent.commitment,
            run_id=intent.context.run_id,
            causal_id=intent.context.causal_id,
            position=position,
            store_fingerprint=store.fingerprint,
        )

    first = _intent("run-receipts")
    assert (await store.ops.admit(_admission(first, receipt(first, 7)))).receipt_position == 7
    second = _intent("run-receipts")
    assert (
        await store.ops.admit(_admission(second, receipt(second, 7)))
    ).status == "receipt_reused"
    assert await _rows(store, "SELECT count(*) FROM attempts WHERE run_id = 'run-receipts'") == [
        (1,)
    ]


async def test_settling_appends_a_chained_entry_and_ends_the_attempt(
    store: PgStore, plan: PlanId
) -> None:
    intent = _intent("run-chain")
    await store.ops.admit(_admission(intent))
    answer = await store.ops.journal(_settle(intent, EffectBoundary.EFFECT_COMPLETED))

    assert answer.status == "appended"
    entry = answer.entry
    assert entry is not None
    assert (entry.position, entry.prev_hash) == (1, GENESIS_HASH)
    assert entry.entry_hash == chain_hash(
        prev_hash=GENESIS_HASH,
        tenant_id=T,
        run_id="run-chain",
        position=1,
        kind="execution",
        causal_id=intent.context.causal_id,
        idempotency_key=intent.idempotency_key,
        attempt=1,
        intent_id=intent.intent_id,
        boundary="EFFECT_COMPLETED",
        recorded_at=recorded_text(AT),
        body_text=entry.body_text,
    )
    assert await _rows(store, "SELECT count(*) FROM attempts WHERE run_id = 'run-chain'") == [(0,)]
    assert await _rows(
        store, "SELECT journal_length, journal_head FROM runs WHERE run_id = 'run-chain'"
    ) == [(1, entry.entry_hash)]


async def test_the_same_append_again_is_answered_as_stored_and_another_is_refused(
    store: PgStore, plan: PlanId
) -> None:
    intent = _intent("run-again")
    await store.ops.admit(_admission(intent))
    first = await store.ops.journal(_settle(intent, EffectBoundary.EFFECT_COMPLETED))
    again = await store.ops.journal(_settle(intent, EffectBoundary.EFFECT_COMPLETED))
    other = await store.ops.journal(_settle(intent, EffectBoundary.EFFECT_FAILED, "different"))

    assert first.entry is not None
    assert again.entry is not None
    assert (again.status, again.entry.position) == ("existing", first.entry.position)
    assert again.entry.entry_hash == first.entry.entry_hash
    assert (other.status, other.entry) == ("conflict", None)
    assert await _rows(
        store, "SELECT count(*) FROM journal_entries WHERE run_id = 'run-again'"
    ) == [(1,)]


async def test_two_settlers_of_one_attempt_never_both_succeed(store: PgStore, plan: PlanId) -> None:
    intent = _intent("run-race")
    await store.ops.admit(_admission(intent))
    owner = _settle(intent, EffectBoundary.EFFECT_COMPLETED)
    sweeper = _settle(intent, EffectBoundary.EFFECT_STATE_UNKNOWN, None, at=AT.replace(minute=1))
    answers = [await store.ops.journal(sweeper), await store.ops.journal(owner)]
    assert [a.status for a in answers] == ["appended", "conflict"]


@pytest.mark.parametrize(
    "boundary",
    [EffectBoundary.EFFECT_NOT_STARTED, EffectBoundary.EFFECT_STARTED],
)
async def test_consent_is_settled_to_the_state_python_decided(
    store: PgStore, plan: PlanId, boundary: EffectBoundary
) -> None:
    intent = _intent("run-consent", confirmation=f"cnf-{boundary.value}")
    async with store.engine.begin() as conn:
        await conn.exec_driver_sql(
            "INSERT INTO runs (tenant_id, run_id, plan_id, journal_head)"
            " VALUES ('t', 'run-consent', %s, repeat('0', 64)) ON CONFLICT DO NOTHING",
            (PLAN,),
        )
        await conn.exec_driver_sql(
            "INSERT INTO decisions (tenant_id, run_id, causal_id, idempotency_key, tool,"
            " payload_digest) VALUES ('t', 'run-consent', %s, %s, 'echo', %s)",
            (intent.context.causal_id, intent.idempotency_key, intent.payload.digest),
        )
        await conn.exec_driver_sql(
            "INSERT INTO confirmations (tenant_id, confirmation_id, run_id, causal_id,"
            " idempotency_key, tool, payload_digest, payload, state, context, expires_at)"
            " VALUES ('t', %s, 'run-consent', %s, %s, 'echo', 'd', '{}', 'APPROVED', '{}',"
            " now() + interval '1 h')",
            (intent.confirmation_id, intent.context.causal_id, intent.idempotency_key),
        )
    assert (await store.ops.admit(_admission(intent, reserve=True))).status == "admitted"
    assert await _rows(
        store, "SELECT state FROM confirmations WHERE confirmation_id = %s", intent.confirmation_id
    ) == [("RESERVED",)]

    assert intent.confirmation_id is not None
    change = ConfirmationChange(
        confirmation_id=intent.confirmation_id,
        from_states=(ConfirmationState.RESERVED,),
        to_state=settled_confirmation(boundary),
    )
    await store.ops.journal(_settle(intent, boundary, confirmation=change))

    expected = "APPROVED" if boundary is EffectBoundary.EFFECT_NOT_STARTED else "CONSUMED"
    assert await _rows(
        store, "SELECT state FROM confirmations WHERE confirmation_id = %s", intent.confirmation_id
    ) == [(expected,)]


async def test_a_refusal_under_a_taken_attempt_number_is_stale(
    store: PgStore, plan: PlanId
) -> None:
    intent = _intent("run-refusal")
    await store.ops.admit(_admission(intent))
    await store.ops.journal(_settle(intent, EffectBoundary.EFFECT_NOT_STARTED))
    denial = DenialSnapshot(
        reason=DenialReason.POLICY_DENIED,
        detail="no",
        tool="echo",
        idempotency_key=intent.idempotency_key,
    )
    refusal = JournalAppend(
        key=replace(intent.key, attempt=1),
        intent_id="refused-syscall",
        boundary=EffectBoundary.PRE_EFFECT_REFUSAL,
        retryable=False,
        artifact=RefusalArtifact(
            tool="echo",
            plan_id=PLAN,
            payload_digest=intent.payload.digest,
            principal_id="p",
            reason=denial.reason,
            detail="no",
            denial=denial,
        ),
        recorded_at=AT,
    )
    assert (await store.ops.journal(refusal)).status == "stale"
    # The next attempt number is free: the refusal takes it.
    assert (
        await store.ops.journal(replace(refusal, key=replace(refusal.key, attempt=2)))
    ).status == "appended"


async def test_a_step_that_fails_writes_nothing(store: PgStore, plan: PlanId) -> None:
    intent = _intent("run-that-does-not-exist")
    append = replace(
        _settle(intent, EffectBoundary.EFFECT_COMPLETED), settle=False, key=intent.key.decision()
    )
    with pytest.raises(StoreError):
        await store.ops.journal(append)
    assert await _rows(
        store, "SELECT count(*) FROM journal_entries WHERE run_id = 'run-that-does-not-exist'"
    ) == [(0,)]


async def test_the_live_slots_of_an_instance_id_and_a_release_by_exact_holder(
    store: PgStore,
) -> None:
    ops = store.ops
    assert await ops.claim_lease("slots/1", "h-1", 60)
    assert await ops.claim_lease("slots/2", "h-2", 60)
    assert await ops.claim_lease("slots/3", "h-3", 60)
    async with store.engine.begin() as conn:  # its holder stopped beating long ago
        await conn.exec_driver_sql(
            "UPDATE instance_leases SET expires_at = now() - interval '1 minute'"
            " WHERE instance_id = 'slots/3'"
        )
    assert await ops.claim_lease("slots2/1", "h-other", 60)  # another id, same letters
    assert await ops.claim_lease("slots/4", "h-4", 60)
    await ops.release_lease("slots/4", "h-4")

    assert await ops.live_leases("slots") == [("slots/1", "h-1"), ("slots/2", "h-2")]
    # A takeover releases only the exact holder it read; a second release finds nothing.
    assert not await ops.release_lease("slots/1", "h-stale")
    assert await ops.release_lease("slots/1", "h-1")
    assert not await ops.release_lease("slots/1", "h-1")
    assert await ops.live_leases("slots") == [("slots/2", "h-2")]
    # Released, the name is free for the next claimer.
    assert await ops.claim_lease("slots/1", "h-new", 60)
