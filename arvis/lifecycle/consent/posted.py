"""Where a consent request was posted in chat (Slack, :mod:`arvis.slack`), so that the
message is updated with the outcome wherever the consent is decided (issue 27).

A chat destination of the notification outbox records the message it posted; when a
``confirmation.approved`` / ``.denied`` / ``.expired`` event comes — whichever path
decided — it finds the message here and updates it. The store is
``arvis.store.posted.PgPostedMessages`` (table ``slack_messages``, revision 0018).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from arvis.domain.ids import ConfirmationId, TenantId


@dataclass(frozen=True, slots=True)
class PostedMessage:
    """The message a consent request was posted as: its latest round's."""

    round: int
    channel: str
    ts: str | None
    """The message's id (Slack's ``ts``); None from the moment a post began until its
    answer was recorded: the post may have landed, or not."""
    posting_age_s: float
    """How long ago, by the database's clock, the last post of this round began."""


class PostedMessages(Protocol):
    """The store of posted messages (``arvis.store.posted.PgPostedMessages``)."""

    async def find(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId
    ) -> PostedMessage | None:
        """The confirmation's message; None when it was never posted."""
        ...

    async def begin(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId, round: int, channel: str
    ) -> None:
        """A post of ``round`` begins: the message is recorded without its ts (replacing an
        earlier round's, or a post of this round whose answer never came)."""
        ...

    async def posted(
        self, tenant_id: TenantId, confirmation_id: ConfirmationId, round: int, ts: str
    ) -> None:
        """The post of ``round`` was answered: the message is ``ts``."""
        ...
