"""Journal facts built once, with their state changes checked against the tables
(issue 24): the settling entry, a consent's end, and the kind an entry is written as."""

from __future__ import annotations

import json

import pytest

from arvis.domain.attempt import AttemptKey
from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import ConfirmationId
from arvis.domain.journal import (
    STALE_REASON,
    ConsentArtifact,
    JournalKind,
    Problem,
    RecoveryArtifact,
    read_artifact,
)
from arvis.domain.states import ConfirmationState, StateTransitionError
from arvis.lifecycle.entries import EXPIRY, consent_end, expiry, settle_append
from arvis.lifecycle.writes import ConfirmationChange
from arvis.store.journaling import journal_record
from tests.support.rules import NOW, SEND, confirmation, request

S = ConfirmationState


@pytest.mark.parametrize(
    ("current", "to"),
    [(S.PENDING, S.RESERVED), (S.CONSUMED, S.APPROVED), (S.EXPIRED, S.APPROVED)],
)
def test_a_confirmation_change_outside_the_table_cannot_be_asked_for(
    current: ConfirmationState, to: ConfirmationState
) -> None:
    with pytest.raises(StateTransitionError):
        ConfirmationChange(ConfirmationId("cf_1"), from_states=(current,), to_state=to)


def _recovery() -> RecoveryArtifact:
    return RecoveryArtifact(
        tool="send",
        problem=Problem(code="recovered_unknown", detail="-", effect_started=None),
        recovered_from="i/1",
    )


@pytest.mark.parametrize("boundary", list(EffectBoundary))
def test_the_settling_entry_releases_or_consumes_the_consent_as_its_boundary_says(
    boundary: EffectBoundary,
) -> None:
    append = settle_append(
        key=AttemptKey(request(SEND).identity.tenant_id, request(SEND).run_id, "c", "k", 1),
        intent_id="int_1",
        confirmation_id=ConfirmationId("cf_1"),
        boundary=boundary,
        artifact=_recovery(),
        recorded_at=NOW,
        flag=None,
    )
    assert append.settle
    assert append.release_budgets is boundary.retry_is_free
    assert append.confirmation is not None
    assert append.confirmation.from_states == (S.RESERVED,)
    assert append.confirmation.to_state is (S.APPROVED if boundary.retry_is_free else S.CONSUMED)


@pytest.mark.parametrize("reason", ["expired", STALE_REASON])
def test_every_expiry_has_the_one_shape_of_a_consents_end(reason: str) -> None:
    record = confirmation(request(SEND), S.APPROVED)
    append = expiry(record, NOW, reason)
    assert append == consent_end(record, EXPIRY, S.EXPIRED, reason, NOW)
    assert isinstance(append.artifact, ConsentArtifact)
    assert append.boundary is EffectBoundary.PRE_EFFECT_REFUSAL
    assert append.confirmation is not None
    assert (append.confirmation.from_states, append.confirmation.strict) == (
        (S.PENDING, S.APPROVED),
        True,
    )


def test_an_entry_is_written_under_its_declared_kind_whatever_its_class_is_called() -> None:
    class RenamedConsent(ConsentArtifact):
        pass

    record = confirmation(request(SEND), S.PENDING)
    append = expiry(record, NOW)
    renamed = RenamedConsent(**dict(append.artifact))
    written = json.loads(
        journal_record(append.__class__(**{**_fields(append), "artifact": renamed}), "{}", "t")
    )
    assert written["kind"] == "confirmation"


def _fields(value: object) -> dict[str, object]:
    return {name: getattr(value, name) for name in value.__slots__}  # type: ignore[attr-defined]


def test_every_kind_reads_back_as_the_model_that_declares_it() -> None:
    record = confirmation(request(SEND), S.PENDING)
    artifact = expiry(record, NOW).artifact
    assert artifact.kind is JournalKind.CONFIRMATION
    assert read_artifact(artifact.kind, artifact.model_dump_json()) == artifact
