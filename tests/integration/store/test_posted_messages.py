"""Where consent requests were posted in Slack (``slack_messages``, revision 0018), and which
policy asked for each consent (``confirmations.policy``, read with the confirmation): what
the Slack destination reads and writes.

A post begins with the message recorded without its ts; its answer fills it in. A message
its round already has is kept when the request is delivered again (it is not posted
twice); a later round's post, or this round's post again after an answer that never
came, begins afresh.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from arvis.domain.ids import ConfirmationId, TenantId
from arvis.lifecycle.consent.posted import PostedMessage
from arvis.store.posted import PgPostedMessages
from tests.support.lifecycle import AGENT, Harness, make_harness

pytestmark = pytest.mark.db
TENANT = AGENT.tenant_id


@pytest.fixture
async def harness(database_url: str) -> AsyncIterator[Harness]:
    harness = await make_harness(database_url)
    try:
        yield harness
    finally:
        await harness.close()


async def _asked(harness: Harness) -> ConfirmationId:
    answer = await harness.execute("append")
    assert answer.confirmation is not None
    return ConfirmationId(answer.confirmation.id)


async def _message(posted: PgPostedMessages, confirmation: ConfirmationId) -> PostedMessage:
    found = await posted.find(TENANT, confirmation)
    assert found is not None
    return found


async def test_a_consent_is_read_with_the_policy_that_asked_and_no_message_yet(
    harness: Harness,
) -> None:
    posted = PgPostedMessages(harness.store.engine)
    confirmation = await _asked(harness)

    record = await harness.lifecycle.consent.confirmation(TENANT, confirmation)

    assert record.policy is not None
    assert record.policy.policy_ids == ("default.consent_for_mutating_unsafe",)
    assert record.policy.reason == "tool 'append' is mutating and replay-unsafe"
    assert (record.policy.engine, record.policy.digest) == ("rules", record.policy_digest)
    assert await posted.find(TENANT, confirmation) is None
    assert await posted.find(TENANT, ConfirmationId("cnf_none")) is None
    assert await posted.find(TenantId("globex"), confirmation) is None


async def test_a_post_begins_without_its_ts_and_its_answer_fills_it_in(
    harness: Harness,
) -> None:
    posted = PgPostedMessages(harness.store.engine)
    confirmation = await _asked(harness)

    await posted.begin(TENANT, confirmation, 1, "C0APPROVALS")
    begun = await _message(posted, confirmation)
    await posted.posted(TENANT, confirmation, 1, "1796000000.000001")
    answered = await _message(posted, confirmation)

    assert (begun.round, begun.channel, begun.ts) == (1, "C0APPROVALS", None)
    assert 0 <= begun.posting_age_s < 60
    assert answered.ts == "1796000000.000001"


async def test_a_message_its_round_has_is_kept_and_a_later_round_begins_afresh(
    harness: Harness,
) -> None:
    posted = PgPostedMessages(harness.store.engine)
    confirmation = await _asked(harness)
    await posted.begin(TENANT, confirmation, 1, "C0APPROVALS")
    await posted.posted(TENANT, confirmation, 1, "1796000000.000001")

    await posted.begin(TENANT, confirmation, 1, "C0OTHER")  # a redelivery of round 1
    kept = await _message(posted, confirmation)
    await posted.begin(TENANT, confirmation, 2, "C0APPROVALS")
    renewed = await _message(posted, confirmation)
    await posted.posted(TENANT, confirmation, 1, "1796000000.000002")  # round 1's, late
    still = await _message(posted, confirmation)

    assert (kept.channel, kept.ts) == ("C0APPROVALS", "1796000000.000001")
    assert (renewed.round, renewed.ts) == (2, None)
    assert still.ts is None


async def test_a_post_whose_answer_never_came_begins_again(harness: Harness) -> None:
    posted = PgPostedMessages(harness.store.engine)
    confirmation = await _asked(harness)
    await posted.begin(TENANT, confirmation, 1, "C0APPROVALS")
    harness.sql(
        "UPDATE slack_messages SET posting_at = now() - interval '1 hour'"
        " WHERE confirmation_id = %s",
        confirmation,
    )

    await posted.begin(TENANT, confirmation, 1, "C0APPROVALS")

    again = await _message(posted, confirmation)
    assert again.ts is None
    assert again.posting_age_s < 60  # its time is the new post's
