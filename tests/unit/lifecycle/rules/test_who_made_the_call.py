"""Who made a call, when an agent acts for a person (issues 26, 27), on the in-memory store:
every entry a delegated call leaves names the agent beside the person, so the journal, the
console's timeline and the list of runs can say "agent X for person Y", and the list finds
the person's runs by the agent."""

from __future__ import annotations

from typing import Any

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.ids import ConfirmationId, RunId
from arvis.domain.journal import (
    ConsentArtifact,
    RefusalArtifact,
    ResolutionArtifact,
    caller,
)
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.errors import NotRequester
from arvis.lifecycle.runs import RunQuery
from tests.support.fakelifecycle import FakeHarness
from tests.support.lifecycle import APPROVER
from tests.support.rules import acting_for

BOT_FOR_ALICE = acting_for("alice", "bot-a")


async def _runs(
    harness: FakeHarness, **filters: Any
) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    page = await harness.lifecycle.replay.runs(BOT_FOR_ALICE.tenant_id, RunQuery(**filters))
    return {r.run_id: (r.principal, r.actors) for r in page.runs}


async def test_a_refused_call_of_an_agent_for_a_person_names_both(harness: FakeHarness) -> None:
    refused = await harness.execute("no.such.tool", {}, identity=BOT_FOR_ALICE)
    assert refused.outcome == "refused"
    [entry] = harness.entries()
    artifact = entry.artifact
    assert isinstance(artifact, RefusalArtifact)
    assert (artifact.principal_id, artifact.actor) == ("alice", BOT_FOR_ALICE.actor)
    assert caller(artifact) == "agent bot-a for alice"
    assert await _runs(harness, actor="bot-a") == {harness.run_id: ("alice", ("bot-a",))}


async def test_a_refusal_of_the_person_themself_keeps_its_earlier_bytes(
    harness: FakeHarness,
) -> None:
    await harness.execute("no.such.tool", {}, identity=acting_for("alice", None))
    [entry] = harness.entries()
    assert '"actor"' not in entry.body_text
    assert caller(entry.artifact) == "alice"
    assert await _runs(harness, actor="bot-a") == {}


async def test_a_consent_asked_by_an_agent_says_so_when_decided_and_when_withdrawn(
    harness: FakeHarness,
) -> None:
    asked = await harness.execute("append", {"n": 1}, causal_id="c-1", identity=BOT_FOR_ALICE)
    assert asked.outcome == "confirmation_required"
    assert asked.confirmation is not None
    # Waiting for consent, nothing journaled yet: the list already names the agent.
    assert await _runs(harness, actor="bot-a") == {harness.run_id: ("alice", ("bot-a",))}
    await harness.approve(asked.confirmation.id)
    withdrawn = await harness.execute("append", {"n": 2}, causal_id="c-2", identity=BOT_FOR_ALICE)
    assert withdrawn.confirmation is not None
    cid = ConfirmationId(withdrawn.confirmation.id)
    await harness.lifecycle.consent.deny(BOT_FOR_ALICE, cid, None)

    approval, withdrawal = (e.artifact for e in harness.entries())
    assert isinstance(approval, ConsentArtifact)
    assert isinstance(withdrawal, ConsentArtifact)
    assert (approval.requested_by, approval.requested_actor) == ("alice", "bot-a")
    assert caller(approval) == "ops-lead (key k_ops), asked by agent bot-a for alice"
    assert (withdrawal.decided_by.principal_id, withdrawal.decided_by.actor) == ("alice", "bot-a")
    assert caller(withdrawal) == "agent bot-a for alice, asked by agent bot-a for alice"


async def test_a_resolution_of_an_agents_uncertain_call_names_whose_call_it_was(
    harness: FakeHarness,
) -> None:
    harness.tools["write"].then_fail(effect_started=None, retryable=False)
    unsure = await harness.execute("write", {"text": "t"}, identity=BOT_FOR_ALICE)
    assert unsure.boundary is EffectBoundary.EFFECT_STATE_UNKNOWN
    [entry] = harness.entries()
    assert caller(entry.artifact) == "agent bot-a for alice"
    assert entry.attempt is not None
    resolved = await harness.lifecycle.resolutions.resolve(
        APPROVER,
        RunId(harness.run_id),
        entry.idempotency_key,
        entry.attempt,
        EffectBoundary.EFFECT_COMPLETED,
        "the row is there",
    )
    artifact = resolved.artifact
    assert isinstance(artifact, ResolutionArtifact)
    assert (artifact.requested_by, artifact.requested_actor) == ("alice", "bot-a")
    assert caller(artifact) == "ops-lead (key k_ops)"


async def test_only_the_agent_that_asked_for_a_person_may_withdraw_it(
    harness: FakeHarness,
) -> None:
    asked = await harness.execute("append", {"n": 1}, identity=BOT_FOR_ALICE)
    assert asked.confirmation is not None
    cid = ConfirmationId(asked.confirmation.id)
    # Consent is bound to both halves (DESIGN §7): another agent for the same person, the
    # person without the agent, the same agent for another person are not its requester.
    for other in (
        acting_for("alice", "bot-b"),
        acting_for("alice", None),
        acting_for("bob", "bot-a"),
    ):
        with pytest.raises(NotRequester):
            await harness.lifecycle.consent.deny(other, cid, None)
    assert harness.entries() == []

    withdrawn = await harness.lifecycle.consent.deny(BOT_FOR_ALICE, cid, None)
    assert withdrawn.state is ConfirmationState.DENIED
    assert withdrawn.decision_reason == "withdrawn by the requester"
