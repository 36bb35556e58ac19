"""Journal bodies (DESIGN §1 ``ExecutionArtifact``): built and read in one place, hashed as
RFC 8785 text, and readable at every age."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from arvis.domain.authorization import DenialReason, DenialSnapshot
from arvis.domain.ids import CapabilityId, ConfirmationId, IdempotencyKey, PlanId
from arvis.domain.journal import (
    Capability,
    ConsentArtifact,
    Decider,
    ExecutionArtifact,
    JournalArtifact,
    Problem,
    Receipt,
    RecoveryArtifact,
    RefusalArtifact,
    artifact_text,
    read_artifact,
)
from arvis.domain.states import ConfirmationState
from tests.support.fakes import context

PLAN = PlanId("p" * 64)
DIGEST = "d" * 64
KEY = IdempotencyKey("k" * 64)
AT = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)


def _capability(at: datetime = AT) -> Capability:
    return Capability(id=CapabilityId("cap_1"), minted_at=at, activated_at=at, consumed_at=at)


RECEIPT = Receipt(position=3, intent_commitment="c" * 64, store_fingerprint="sys-1:0005")
DENIAL = DenialSnapshot(
    reason=DenialReason.POLICY_DENIED,
    detail="tool 'archive.purge' is denied by policy",
    tool="archive.purge",
    idempotency_key=KEY,
    policy_version="2026-11-30",
    policy_digest="e" * 64,
)

ARTIFACTS: list[tuple[str, JournalArtifact]] = [
    (
        "execution",
        ExecutionArtifact(
            tool="ledger.put",
            plan_id=PLAN,
            payload_digest=DIGEST,
            payload={"amount": 5, "memo": "café", "tags": ["a", "b"]},
            context=context(),
            capability=_capability(),
            confirmation_id=ConfirmationId("cf_1"),
            receipt=RECEIPT,
            result={"balance": 12.5, "ok": True},
        ),
    ),
    (
        "execution",
        ExecutionArtifact(
            tool="ledger.put",
            plan_id=PLAN,
            payload_digest=DIGEST,
            payload={},
            context=context(),
            capability=_capability(),
            receipt=RECEIPT,
            problem=Problem(
                code="upstream_down", detail="503", effect_started=False, retryable=True
            ),
            retryable=True,
        ),
    ),
    (
        "refusal",
        RefusalArtifact(
            tool="archive.purge",
            plan_id=PLAN,
            payload_digest=DIGEST,
            payload={"older_than_days": 30},
            principal_id="agent-1",
            reason=DenialReason.POLICY_DENIED,
            detail=DENIAL.detail,
            denial=DENIAL,
        ),
    ),
    (
        "recovery",
        RecoveryArtifact(
            tool="payments.send",
            plan_id=PLAN,
            payload_digest=DIGEST,
            payload={"to": "acct-9", "cents": 500},
            context=context(),
            capability=_capability(),
            confirmation_id=ConfirmationId("cf_2"),
            receipt=RECEIPT,
            problem=Problem(code="recovered_unknown", detail="gone", effect_started=None),
            recovered_from="instance-1/0",
        ),
    ),
    (
        "confirmation",
        ConsentArtifact(
            confirmation_id=ConfirmationId("cf_1"),
            decision=ConfirmationState.APPROVED,
            tool="payments.send",
            requested_by="agent-1",
            decided_by=Decider(principal_id="ops-lead", auth_method="api_key", key_id="k_ops"),
            reason="looks right",
        ),
    ),
]
IDS = [f"{kind}-{n}" for n, (kind, _) in enumerate(ARTIFACTS)]


@pytest.mark.parametrize(("kind", "artifact"), ARTIFACTS, ids=IDS)
def test_every_kind_reads_back_to_an_equal_value(kind: str, artifact: JournalArtifact) -> None:
    text = artifact_text(artifact)
    read = read_artifact(kind, text)
    assert type(read) is type(artifact)
    assert read == artifact
    # Reading and writing again is a fixed point: the bytes the chain hashed come back.
    assert artifact_text(read) == text


def _keys_sorted(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    # RFC 8785 §3.2.3: keys sorted by their UTF-16 code units.
    assert keys == sorted(keys, key=lambda k: k.encode("utf-16-be"))
    return dict(pairs)


@pytest.mark.parametrize(("kind", "artifact"), ARTIFACTS, ids=IDS)
def test_the_text_is_canonical_json_without_whitespace(
    kind: str, artifact: JournalArtifact
) -> None:
    text = artifact_text(artifact)
    loaded = json.loads(text, object_pairs_hook=_keys_sorted)
    # No insignificant whitespace anywhere (every string value here is free of ", " and ": ").
    assert text == json.dumps(loaded, separators=(",", ":"), ensure_ascii=False, sort_keys=False)
    assert not any(gap in text for gap in ("\n", ", ", ": "))


def test_the_text_follows_rfc_8785_where_plain_json_dumps_would_not() -> None:
    artifact = ExecutionArtifact(
        tool="ledger.put",
        plan_id=PLAN,
        payload_digest=DIGEST,
        payload={"\ufb01": 1, "\U0001f600": 2, "whole": 1.0, "big": 1e21, "text": "é"},
    )
    text = artifact_text(artifact)
    # UTF-16 order puts the surrogate pair of U+1F600 before U+FB01 (code point order
    # would not); 1.0 is 1, 1e21 is 1e+21, and non-ASCII text is not escaped.
    assert '"payload":{"big":1e+21,"text":"é","whole":1,"😀":2,"ﬁ":1}' in text


def test_the_text_of_a_consent_decision_is_pinned() -> None:
    # The chain hashes these bytes: a change of shape re-hashes every chain written since.
    artifact = ConsentArtifact(
        confirmation_id=ConfirmationId("cf_1"),
        decision=ConfirmationState.DENIED,
        tool="payments.send",
        requested_by="agent-1",
        decided_by=Decider(principal_id="ops-lead", auth_method="api_key", key_id="k_ops"),
    )
    assert artifact_text(artifact) == (
        '{"confirmation_id":"cf_1","decided_by":{"auth_method":"api_key","key_id":"k_ops",'
        '"principal_id":"ops-lead"},"decision":"DENIED","reason":null,'
        '"requested_by":"agent-1","tool":"payments.send"}'
    )


def test_equal_values_built_differently_have_one_text() -> None:
    first = ExecutionArtifact(
        tool="ledger.put",
        plan_id=PLAN,
        payload_digest=DIGEST,
        payload={"a": 1, "b": {"x": [1, 2], "y": None}},
        context=context(roles=("agent", "auditor")),
        capability=_capability(),
        receipt=RECEIPT,
        result={"z": True, "m": "n"},
    )
    second = ExecutionArtifact.model_validate(
        {
            # Another key order, lists for tuples, strings for enums, defaults spelled out.
            "result": {"m": "n", "z": True},
            "receipt": RECEIPT.model_dump(),
            "capability": {**_capability().model_dump(mode="json"), "state": "CONSUMED"},
            "context": {**context().model_dump(mode="json"), "roles": ["agent", "auditor"]},
            "payload": {"b": {"y": None, "x": [1, 2]}, "a": 1},
            "payload_digest": DIGEST,
            "plan_id": PLAN,
            "tool": "ledger.put",
            "problem": None,
            "confirmation_id": None,
            "retryable": False,
        }
    )
    assert first == second
    assert artifact_text(first) == artifact_text(second)


def test_a_refusal_reason_given_as_text_or_enum_has_one_text() -> None:
    common: dict[str, Any] = {
        "tool": "archive.purge",
        "plan_id": PLAN,
        "payload_digest": DIGEST,
        "principal_id": "agent-1",
        "detail": DENIAL.detail,
    }
    by_enum = RefusalArtifact(**common, reason=DenialReason.POLICY_DENIED, denial=DENIAL)
    by_text = RefusalArtifact.model_validate(
        {**common, "reason": "policy_denied", "denial": DENIAL.model_dump(mode="json")}
    )
    assert artifact_text(by_enum) == artifact_text(by_text)


def test_one_instant_in_two_utc_offsets_has_one_text() -> None:
    berlin = AT.astimezone(timezone(timedelta(hours=1)))
    in_utc = ExecutionArtifact(
        tool="ledger.put", plan_id=PLAN, payload_digest=DIGEST, capability=_capability(AT)
    )
    elsewhere = ExecutionArtifact(
        tool="ledger.put", plan_id=PLAN, payload_digest=DIGEST, capability=_capability(berlin)
    )
    assert in_utc == elsewhere
    assert artifact_text(in_utc) == artifact_text(elsewhere)


# -- bodies written before revision 0005 -------------------------------------------------
# As arvis/lifecycle/settlement.py, refusals.py, recovery.py and manager.py built them at
# 85dfc6f^ (schema 0004): no context, no payload, no capability object, and fields that
# 0005 no longer writes (principal_id, capability_id, intent_commitment, receipt_position).

OLD_EXECUTION = {
    "tool": "ledger.put",
    "plan_id": PLAN,
    "payload_digest": DIGEST,
    "principal_id": "agent-1",
    "capability_id": "cap_old",
    "confirmation_id": None,
    "receipt": {"position": 41, "intent_commitment": "c" * 64, "store_fingerprint": "sys:0004"},
    "result": {"ok": True},
    "problem": None,
    "retryable": False,
}
OLD_FAILED_EXECUTION = {
    **OLD_EXECUTION,
    "result": None,
    "problem": {
        "code": "upstream_down",
        "detail": "503",
        "effect_started": False,
        "retryable": True,
    },
    "retryable": True,
}
OLD_REFUSAL = {
    "tool": "archive.purge",
    "plan_id": PLAN,
    "payload_digest": DIGEST,
    "principal_id": "agent-1",
    "reason": "policy_denied",
    "detail": DENIAL.detail,
    "denial": DENIAL.model_dump(mode="json"),
}
OLD_RECOVERY = {
    "tool": "payments.send",
    "capability_id": "cap_old",
    "confirmation_id": "cf_old",
    "receipt": None,
    "result": None,
    "problem": {
        "code": "recovered_unknown",
        "detail": "the instance that ran this attempt stopped before journaling it",
        "effect_started": None,
        "retryable": False,
    },
    "recovered_from": "instance-1",
    "intent_commitment": "c" * 64,
    "receipt_position": 41,
    "retryable": False,
}
OLD_CONSENT = {
    "confirmation_id": "cf_old",
    "decision": "APPROVED",
    "tool": "payments.send",
    "requested_by": "agent-1",
    "decided_by": {"principal_id": "ops-lead", "auth_method": "api_key", "key_id": "k_ops"},
    "reason": None,
}


def _stored(body: dict[str, Any]) -> str:
    # What 0004 stored: the canonical text of the dict.
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_a_completed_execution_from_before_0005_still_reads() -> None:
    read = read_artifact("execution", _stored(OLD_EXECUTION))
    assert isinstance(read, ExecutionArtifact)
    assert (read.tool, read.plan_id, read.payload_digest) == ("ledger.put", PLAN, DIGEST)
    assert read.result == {"ok": True}
    assert read.receipt == Receipt(
        position=41, intent_commitment="c" * 64, store_fingerprint="sys:0004"
    )
    assert (read.context, read.capability, read.payload, read.problem) == (None, None, None, None)
    assert read.retryable is False


def test_a_failed_execution_from_before_0005_keeps_its_retry_advice() -> None:
    read = read_artifact("execution", _stored(OLD_FAILED_EXECUTION))
    assert isinstance(read, ExecutionArtifact)
    assert read.problem == Problem(
        code="upstream_down", detail="503", effect_started=False, retryable=True
    )
    assert read.retryable is True


def test_a_refusal_from_before_0005_still_reads() -> None:
    read = read_artifact("refusal", _stored(OLD_REFUSAL))
    assert isinstance(read, RefusalArtifact)
    assert read.reason is DenialReason.POLICY_DENIED
    assert read.denial == DENIAL
    assert (read.principal_id, read.payload) == ("agent-1", None)


def test_a_recovery_from_before_0005_still_reads() -> None:
    read = read_artifact("recovery", _stored(OLD_RECOVERY))
    assert isinstance(read, RecoveryArtifact)
    assert (read.problem.code, read.problem.effect_started) == ("recovered_unknown", None)
    assert read.recovered_from == "instance-1"
    assert read.confirmation_id == "cf_old"
    assert (read.plan_id, read.payload_digest, read.receipt) == (None, None, None)


def test_a_consent_decision_from_before_0005_still_reads() -> None:
    read = read_artifact("confirmation", _stored(OLD_CONSENT))
    assert isinstance(read, ConsentArtifact)
    assert read.decision is ConfirmationState.APPROVED
    assert read.decided_by == Decider(
        principal_id="ops-lead", auth_method="api_key", key_id="k_ops"
    )


# -- unknown fields ----------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "artifact"), ARTIFACTS, ids=IDS)
def test_an_unknown_top_level_field_is_ignored(kind: str, artifact: JournalArtifact) -> None:
    body = json.loads(artifact_text(artifact))
    body["written_by_a_later_version"] = {"anything": [1, 2]}
    assert read_artifact(kind, json.dumps(body)) == artifact


@pytest.mark.parametrize("where", ["capability", "receipt", "problem"])
def test_an_unknown_field_inside_a_journal_part_is_ignored(where: str) -> None:
    kind, artifact = ARTIFACTS[1]
    body = json.loads(artifact_text(artifact))
    body[where]["written_by_a_later_version"] = True
    assert read_artifact(kind, json.dumps(body)) == artifact


def test_an_unknown_field_inside_who_decided_is_ignored() -> None:
    kind, artifact = ARTIFACTS[-1]
    body = json.loads(artifact_text(artifact))
    body["decided_by"]["session"] = "s-1"
    assert read_artifact(kind, json.dumps(body)) == artifact


@pytest.mark.parametrize(("index", "where"), [(0, "context"), (3, "context"), (2, "denial")])
def test_an_unknown_field_inside_the_sealed_context_or_the_denial_is_ignored(
    index: int, where: str
) -> None:
    kind, artifact = ARTIFACTS[index]
    body = json.loads(artifact_text(artifact))
    body[where]["written_by_a_later_version"] = True
    assert read_artifact(kind, json.dumps(body)) == artifact
