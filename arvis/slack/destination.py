"""Slack as a destination of the notification outbox: a ``confirmation.requested`` is
posted with Approve/Deny buttons; a ``confirmation.approved`` / ``.denied`` /
``.expired`` — whichever path decided it (Slack, the console, the API, the CLI, an MCP
elicitation, the expiry sweep) — updates that message with the outcome.

Where each request was posted is recorded (:mod:`arvis.lifecycle.consent.posted`): the
post begins by recording the message without its ``ts``, and ``chat.postMessage``'s
answer fills it in. A redelivered request whose message has its ``ts`` is not posted
again. One whose answer never came (the connection dropped, the process died) may have
landed: ARVIS looks for it in the channel's recent history by the metadata it posts
with (``conversations.history``, the ``channels:history`` scope) before it posts again,
so one consent has one live message; a bot without that scope posts again, and the
message it cannot see keeps buttons that still decide through the consent service.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from slack_sdk import WebClient

from arvis.domain.clock import Clock
from arvis.domain.ids import ConfirmationId, TenantId
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.consent.notify import OutboxEvent
from arvis.lifecycle.consent.posted import PostedMessage, PostedMessages
from arvis.lifecycle.consent.service import ConsentService
from arvis.lifecycle.errors import NotFound
from arvis.lifecycle.records import ConfirmationRecord
from arvis.slack.config import Slack
from arvis.slack.messages import METADATA_EVENT, metadata, outcome_message, request_message
from arvis.slack.web import call

log = logging.getLogger(__name__)

DESTINATION = "@slack"
"""The outbox's name for Slack (no webhook name can start with ``@``)."""
REQUESTED = "confirmation.requested"
DECIDED = ("confirmation.approved", "confirmation.denied", "confirmation.expired")
GONE = frozenset({"message_not_found", "cant_update_message", "channel_not_found", "is_archived"})
"""Slack's answers to an update that no retry can change: the event is done."""
_EARLIER_S = 60.0
"""How far before a post began its message is looked for (Slack's clock and the
database's may differ)."""
_HISTORY_LIMIT = 200


@dataclass(eq=False)
class SlackDestination:
    """An outbox destination (:class:`arvis.webhooks.deliverer.NotificationDeliverer`)."""

    slack: Slack
    web: WebClient
    consent: ConsentService
    posted: PostedMessages
    clock: Clock
    name: str = DESTINATION
    timeout_s: float = field(init=False)
    _bot_id: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.timeout_s = self.slack.config.timeout_s

    def wants(self, event_type: str, tenant_id: str) -> bool:
        return self.slack.config.wants(event_type, tenant_id)

    async def deliver(self, event: OutboxEvent) -> str | None:
        confirmation_id = event.subject.get("confirmation_id")
        if not isinstance(confirmation_id, str):
            return None
        tenant_id, confirmation = TenantId(event.tenant_id), ConfirmationId(confirmation_id)
        try:
            record = await self.consent.confirmation(tenant_id, confirmation)
        except NotFound:
            return None
        round = event.subject.get("round", 1)
        if round != record.round:
            return None  # an earlier round's, come after the next opened: the next's tell
        message = await self.posted.find(tenant_id, confirmation)
        if event.event_type == REQUESTED:
            return await self._ask(record, message)
        return await self._tell(record, message)

    async def _ask(self, record: ConfirmationRecord, message: PostedMessage | None) -> str | None:
        """Post the request, unless this round's message exists (or is found)."""
        if (
            message is not None
            and message.round == record.round
            and (message.ts is not None or await self._found(record, message) is not None)
        ):
            return None  # posted already: a redelivery
        if record.state is not ConfirmationState.PENDING:
            return None  # decided before it could be asked here: nothing to ask
        await self.posted.begin(
            record.tenant_id, record.confirmation_id, record.round, self.slack.config.channel
        )
        text, blocks = request_message(record)
        answer = await call(
            self.web.chat_postMessage,
            channel=self.slack.config.channel,
            text=text,
            blocks=blocks,
            metadata=metadata(record),
            unfurl_links=False,
            unfurl_media=False,
        )
        if answer.error is not None:
            log.warning("slack: posting %s failed: %s", record.confirmation_id, answer.error)
            return answer.error
        ts = answer.data.get("ts")
        if isinstance(ts, str):
            await self.posted.posted(record.tenant_id, record.confirmation_id, record.round, ts)
        return None

    async def _tell(self, record: ConfirmationRecord, message: PostedMessage | None) -> str | None:
        """Update this round's message with the outcome, if it was posted."""
        if message is None or message.round != record.round:
            return None  # never asked here
        ts = message.ts
        if ts is None:
            if message.posting_age_s < self.timeout_s + 30:
                # The request is being posted right now (another deliverer): its ts will
                # be known in a moment, and this update is retried with the backoff.
                return "the consent request is still being posted"
            ts = await self._found(record, message)
            if ts is None:
                return None  # it never landed, or cannot be seen: no message to update
        return await self.update(record, message.channel, ts)

    async def update(self, record: ConfirmationRecord, channel: str, ts: str) -> str | None:
        """Show the confirmation as it now stands in the message ``ts`` (buttons only while
        it waits). None when done, or Slack's answer that no retry can change."""
        text, blocks = outcome_message(record)
        answer = await call(self.web.chat_update, channel=channel, ts=ts, text=text, blocks=blocks)
        if answer.error is None:
            return None
        log.warning("slack: updating %s's message failed: %s", record.confirmation_id, answer.error)
        return None if answer.code in GONE else answer.error

    async def _found(self, record: ConfirmationRecord, message: PostedMessage) -> str | None:
        """The ts of this round's message if a post whose answer never came did land: the
        bot's message in the channel's recent history that carries its metadata. None
        when there is none, or the history cannot be read (a bot without the scope)."""
        if self._bot_id is None:
            who = await call(self.web.auth_test)
            bot_id = who.data.get("bot_id")
            if not isinstance(bot_id, str):
                return None
            self._bot_id = bot_id
        since = self.clock.now().timestamp() - message.posting_age_s - _EARLIER_S
        history = await call(
            self.web.conversations_history,
            channel=message.channel,
            oldest=f"{since:.6f}",
            include_all_metadata=True,
            limit=_HISTORY_LIMIT,
        )
        if history.error is not None:
            log.warning(
                "slack: looking for %s's message failed (%s): posting it again",
                record.confirmation_id,
                history.error,
            )
            return None
        wanted = metadata(record)["event_payload"]
        for found in history.data.get("messages") or ():
            meta = found.get("metadata") or {}
            if (
                found.get("bot_id") == self._bot_id
                and meta.get("event_type") == METADATA_EVENT
                and meta.get("event_payload") == wanted
                and isinstance(found.get("ts"), str)
            ):
                ts: str = found["ts"]
                await self.posted.posted(
                    record.tenant_id, record.confirmation_id, message.round, ts
                )
                return ts
        return None
