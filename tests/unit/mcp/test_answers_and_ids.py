"""What an MCP client is told (docs/mcp.md), and which run and causal id a call gets."""

from __future__ import annotations

import re
from typing import Any

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.identity import Identity
from arvis.domain.ids import (
    ID_PATTERN,
    PrincipalId,
    TenantId,
    principal_run_id,
    reserved_for_another,
)
from arvis.domain.payload import freeze_payload
from arvis.lifecycle.results import ConfirmationRef, ResolutionRef, SyscallResult
from arvis.mcp.answers import call_result, consent_request, consent_result, empty_meta
from arvis.mcp.meta import (
    InvalidIds,
    PendingDecision,
    default_causal_id,
    default_run_id,
    explicit_ids,
)
from arvis.mcp.server import approval_url
from tests.support.fakes import definition, read_only

MODERN, LEGACY = "2026-07-28", "2025-11-25"


def answered(**fields: Any) -> SyscallResult:
    base: dict[str, Any] = {
        "outcome": "executed",
        "boundary": EffectBoundary.EFFECT_COMPLETED,
        "idempotency_key": "k" * 64,
        "attempt": 1,
        "run_id": "run-1",
        "causal_id": "step-1",
        "journal_position": 3,
    }
    base.update(fields)
    return SyscallResult(**base)


def text(result: Any) -> str:
    return " ".join(block.text for block in result.content)


def test_a_completed_value_is_structured_content_and_json_text_with_the_meta() -> None:
    result = call_result(answered(result={"n": 1}), tool="echo", protocol_version=MODERN)
    assert result.is_error is False
    assert result.structured_content == {"n": 1}
    assert text(result) == '{"n": 1}'
    # Every key is present, null where it does not apply (docs/mcp.md).
    assert result.meta == {
        "arvis.dev/outcome": "executed",
        "arvis.dev/boundary": "EFFECT_COMPLETED",
        "arvis.dev/idempotency_key": "k" * 64,
        "arvis.dev/journal_position": 3,
        "arvis.dev/attempt": 1,
        "arvis.dev/run_id": "run-1",
        "arvis.dev/causal_id": "step-1",
        "arvis.dev/reason": None,
        "arvis.dev/problem": None,
        "arvis.dev/confirmation_id": None,
        "arvis.dev/audit_incomplete": False,
        "arvis.dev/resolution": None,
    }


def test_every_answer_carries_the_same_keys() -> None:
    consent_meta = consent_result(
        consent(), tool="files.append", approval_url="https://arvis.test/c", approver="ops"
    ).meta
    refused = call_result(
        answered(outcome="refused", boundary=EffectBoundary.PRE_EFFECT_REFUSAL, reason="x"),
        tool="t",
        protocol_version=MODERN,
    ).meta
    assert consent_meta is not None
    assert refused is not None
    assert set(consent_meta) == set(refused) == set(empty_meta())


def resolved(boundary: EffectBoundary) -> SyscallResult:
    return answered(
        outcome="deduplicated",
        boundary=EffectBoundary.EFFECT_STATE_UNKNOWN,
        problem={"code": "timeout", "detail": "no answer in time", "effect_started": None},
        resolution=ResolutionRef(
            position=9,
            boundary=boundary,
            resolved_by="ops-lead",
            evidence="the ledger shows the line",
            recorded_at="2026-12-01T12:00:00+00:00",
        ),
    )


def test_an_uncertain_outcome_resolved_completed_answers_the_resolution_not_the_doubt() -> None:
    result = call_result(
        resolved(EffectBoundary.EFFECT_COMPLETED), tool="files.append", protocol_version=MODERN
    )
    assert result.is_error is False
    said = text(result)
    assert "resolved it as completed" in said
    assert "ops-lead" in said
    assert "the ledger shows the line" in said
    assert "Nobody knows" not in said
    assert "Do NOT" not in said
    assert result.meta is not None
    assert result.meta["arvis.dev/resolution"] == {
        "boundary": "EFFECT_COMPLETED",
        "position": 9,
        "resolved_by": "ops-lead",
    }


def test_an_uncertain_outcome_resolved_failed_says_so_and_not_to_call_again() -> None:
    result = call_result(
        resolved(EffectBoundary.EFFECT_FAILED), tool="files.append", protocol_version=MODERN
    )
    assert result.is_error is True
    assert "resolved it as failed" in text(result)
    assert "Nobody knows" not in text(result)


def test_before_2026_a_value_that_is_not_an_object_is_only_text() -> None:
    modern = call_result(answered(result=[1, 2]), tool="echo", protocol_version=MODERN)
    legacy = call_result(answered(result=[1, 2]), tool="echo", protocol_version=LEGACY)
    assert modern.structured_content == [1, 2]
    assert legacy.structured_content is None
    assert text(legacy) == "[1, 2]"


def test_a_refusal_is_an_error_naming_its_reason() -> None:
    refused = answered(
        outcome="refused",
        boundary=EffectBoundary.PRE_EFFECT_REFUSAL,
        reason="policy_denied",
        detail="the policy does not allow files.read",
    )
    result = call_result(refused, tool="files.read", protocol_version=MODERN)
    assert result.is_error is True
    assert result.meta is not None
    assert result.meta["arvis.dev/reason"] == "policy_denied"
    assert "policy_denied" in text(result)
    assert "the policy does not allow files.read" in text(result)


@pytest.mark.parametrize(
    "boundary", [EffectBoundary.EFFECT_STATE_UNKNOWN, EffectBoundary.EFFECT_STARTED]
)
def test_an_uncertain_boundary_tells_the_model_not_to_retry(boundary: EffectBoundary) -> None:
    problem = {"code": "upstream_unknown", "detail": "no result", "retryable": False}
    uncertain = answered(boundary=boundary, problem=problem)
    result = call_result(uncertain, tool="notes.add_note", protocol_version=MODERN)
    assert result.is_error is True
    assert "Do NOT" in text(result)
    assert result.meta is not None
    assert result.meta["arvis.dev/problem"] == "upstream_unknown"


def test_a_completed_problem_is_an_error_too() -> None:
    problem = {"code": "not_found", "detail": "no such file", "effect_started": True}
    result = call_result(answered(problem=problem), tool="files.read", protocol_version=MODERN)
    assert result.is_error is True
    assert "no such file" in text(result)


def test_accepted_work_keeps_its_receipt_and_still_says_not_to_retry() -> None:
    accepted = answered(boundary=EffectBoundary.EFFECT_STARTED, result={"job": "j-1"})
    result = call_result(accepted, tool="crm.update", protocol_version=MODERN)
    assert result.is_error is True
    assert result.structured_content == {"job": "j-1"}
    assert "Do NOT" in text(result)


def consent() -> SyscallResult:
    return answered(
        outcome="confirmation_required",
        boundary=None,
        attempt=None,
        journal_position=None,
        confirmation=ConfirmationRef(id="cnf_1", state="PENDING"),
    )


def test_consent_for_a_plain_client_names_the_approval_and_says_to_call_again() -> None:
    url = "http://arvis.test/v1/confirmations/cnf_1/approve"
    result = consent_result(consent(), tool="files.append", approval_url=url, approver="ops")
    assert result.is_error is True
    assert result.meta is not None
    assert result.meta["arvis.dev/outcome"] == "confirmation_required"
    assert result.meta["arvis.dev/confirmation_id"] == "cnf_1"
    assert url in text(result)
    assert "same call again" in text(result)


def test_consent_text_starts_each_sentence_with_a_capital() -> None:
    approver = "a principal with the approver role in tenant 'acme' other than you"
    result = consent_result(
        consent(), tool="files.append", approval_url="https://arvis.test/c", approver=approver
    )
    assert "nothing ran. A principal with the approver role" in text(result)


def test_consent_for_an_eliciting_client_is_a_url_elicitation_carrying_the_decision() -> None:
    url = "http://arvis.test/v1/confirmations/cnf_1/approve"
    result = consent_request(
        consent(), tool="files.append", approval_url=url, approver="ops", state="s"
    )
    assert result.input_requests is not None
    [request] = result.input_requests.values()
    assert request.params.url == url  # type: ignore[union-attr]
    assert result.request_state == "s"


AGENT = Identity(
    tenant_id=TenantId("acme"),
    principal_id=PrincipalId("agent-7"),
    method="api_key",
    key_id="k0123456789abcdef",
    roles=("agent",),
)


def test_explicit_ids_come_from_meta_before_headers() -> None:
    meta = {"arvis.dev/run_id": "from-meta"}
    headers = {"arvis-run-id": "from-header", "arvis-causal-id": "c-header"}
    assert explicit_ids(meta, headers) == ("from-meta", "c-header")
    assert explicit_ids(None, {}) == (None, None)
    with pytest.raises(InvalidIds, match=r"arvis\.dev/causal_id"):
        explicit_ids({"arvis.dev/causal_id": "has spaces"}, {})


def test_the_default_run_is_the_principals_whatever_its_key() -> None:
    rotated = AGENT.model_copy(update={"key_id": "kfedcba9876543210"})
    assert default_run_id(AGENT) == default_run_id(rotated) == "mcp:agent-7"
    other = AGENT.model_copy(update={"principal_id": PrincipalId("agent-9")})
    assert default_run_id(other) != default_run_id(AGENT)
    assert default_run_id(AGENT, "turn-7") == "turn-7"


@pytest.mark.parametrize(
    "principal", ["alice@example.com", "https://issuer.test#sub", "x" * 121, "a:b"]
)
def test_a_principal_id_that_is_no_run_id_tail_gets_a_digest_run(principal: str) -> None:
    run = principal_run_id(principal)
    assert run.startswith("mcp::")
    assert re.fullmatch(ID_PATTERN, run)
    assert run != principal_run_id(principal + "x")


def test_a_derived_run_id_is_reserved_for_its_principal() -> None:
    assert reserved_for_another("mcp:agent-7", "agent-9")
    assert reserved_for_another("mcp::" + "0" * 40, "agent-9")
    assert not reserved_for_another("mcp:agent-9", "agent-9")
    assert not reserved_for_another("mcp-k0123-abcdef", "agent-9")  # before revision 0010
    assert not reserved_for_another("run-1", "agent-9")


def test_the_approval_url_is_the_configured_address_never_a_requests() -> None:
    assert approval_url("https://arvis.example.com/", "cnf_1") == (
        "https://arvis.example.com/console/confirmations/cnf_1"
    )


def test_the_default_causal_id_is_the_decision_for_changes_and_fresh_for_reads() -> None:
    payload = freeze_payload({"path": "a.txt", "line": "x"})
    other = freeze_payload({"path": "a.txt", "line": "y"})
    change = definition("files.append")
    assert default_causal_id("files.append", change, payload) == default_causal_id(
        "files.append", change, payload
    )
    assert default_causal_id("files.append", change, payload) != default_causal_id(
        "files.append", change, other
    )
    assert default_causal_id("files.append", change, payload) != default_causal_id(
        "files.write", definition("files.write"), payload
    )
    reads = {default_causal_id("echo", read_only("echo"), payload) for _ in range(3)}
    assert len(reads) == 3


def test_the_request_state_names_its_decision_and_only_its_call() -> None:
    payload = freeze_payload({"line": "x"})
    pending = PendingDecision(
        run_id="run-1", causal_id="step-1", confirmation_id="cnf_1", tool="t", digest=payload.digest
    )
    state = pending.encode()
    assert PendingDecision.decode(state, tool="t", payload=payload) == pending
    with pytest.raises(InvalidIds, match="another call"):
        PendingDecision.decode(state, tool="t", payload=freeze_payload({"line": "y"}))
    with pytest.raises(InvalidIds, match="another call"):
        PendingDecision.decode(state, tool="u", payload=payload)
    for forged in ("", "arvis1.!!", "arvis1." + "e30", state[:-4]):
        with pytest.raises(InvalidIds):
            PendingDecision.decode(forged, tool="t", payload=payload)
