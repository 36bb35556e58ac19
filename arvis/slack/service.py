"""Approvals in Slack, with Slack's own SDK (``slack-sdk``): the interactions that approve
or deny a consent request the outbox destination (:mod:`arvis.slack.destination`) posted.

A click is trusted only when Slack's signature over the exact body verifies
(``slack_sdk.signature.SignatureVerifier``) within the tolerance, and only once; the
Slack user is mapped to an ARVIS approver by its id through ``[slack.users]`` (never by a
name, which anyone can change), and the decision is the :class:`ConsentService`'s, as on
every other approval path: four eyes, groups and quorum are its rules, not ours.
"""

from __future__ import annotations

import json
import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from slack_sdk import WebClient
from slack_sdk.signature import Clock as SlackClock
from slack_sdk.signature import SignatureVerifier

from arvis.domain.clock import Clock
from arvis.domain.errors import ArvisError
from arvis.domain.identity import Identity
from arvis.domain.ids import ID_PATTERN, ConfirmationId
from arvis.lifecycle.consent.notify import SignatureInvalid
from arvis.lifecycle.consent.posted import PostedMessages
from arvis.lifecycle.consent.service import ConsentService
from arvis.lifecycle.errors import ConfirmationStateConflict, NotFound
from arvis.lifecycle.records import ConfirmationRecord
from arvis.slack.config import Slack
from arvis.slack.destination import SlackDestination
from arvis.slack.messages import APPROVE, DENY
from arvis.slack.web import call, web_client

log = logging.getLogger(__name__)

_TIMESTAMP = re.compile(r"^\d{1,12}$")
_SIGNATURE = re.compile(r"^v0=[0-9a-f]{64}$")
_ID = re.compile(ID_PATTERN)
_SLACK_REF = re.compile(r"^[A-Za-z0-9.]{1,32}$")  # a channel id or a message's ts
_SEEN_MAX = 10_000


class RequestReplayed(ArvisError, code="request_replayed"):
    """A signed Slack request seen before: it is acted on once."""


class UnknownSlackUser(ArvisError, code="unknown_slack_user"):
    """The Slack user is not an approver of ``[slack.users]``."""


class MalformedInteraction(ArvisError, code="malformed_body"):
    """A signed request that is not the interaction ARVIS posted buttons for."""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and _SLACK_REF.fullmatch(value) else None


@dataclass(frozen=True, slots=True)
class Click:
    """A verified click on one of ARVIS's buttons."""

    user_id: str
    action: str
    tenant_id: str
    confirmation_id: str
    message_ts: str | None
    channel_id: str | None


class _Clock(SlackClock):
    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def now(self) -> float:
        return self._clock.now().timestamp()


@dataclass(eq=False)
class SlackInteractions:
    """``POST /slack/interactions``: verify, map the user, decide, update the message."""

    slack: Slack
    web: WebClient
    consent: ConsentService
    clock: Clock
    destination: SlackDestination
    """Renders and sends the updates, as for a consent decided elsewhere."""
    _seen: OrderedDict[str, float] = field(default_factory=OrderedDict, init=False)
    _verifier: SignatureVerifier = field(init=False)

    def __post_init__(self) -> None:
        self._verifier = SignatureVerifier(self.slack.signing_secret, clock=_Clock(self.clock))

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """Raises :class:`SignatureInvalid` unless Slack signed ``body`` within the
        tolerance, :class:`RequestReplayed` for a request already acted on."""
        timestamp = headers.get("x-slack-request-timestamp", "")
        signature = headers.get("x-slack-signature", "")
        if not _TIMESTAMP.fullmatch(timestamp) or not _SIGNATURE.fullmatch(signature):
            raise SignatureInvalid("the Slack signature headers are missing or malformed")
        now = self.clock.now().timestamp()
        if abs(now - int(timestamp)) > self.slack.config.tolerance_s:
            raise SignatureInvalid("the Slack request's timestamp is outside the tolerance")
        try:
            valid = self._verifier.is_valid(body, timestamp, signature)
        except UnicodeDecodeError:
            valid = False
        if not valid:
            raise SignatureInvalid("the Slack signature does not match the body")
        self._once(signature, now)

    def _once(self, signature: str, now: float) -> None:
        # Within the tolerance a captured request would verify again: remember what was
        # acted on for that long. (Past it, the timestamp check refuses it.) Per process:
        # across workers a replay meets the confirmation's own state machine, which
        # refuses a second approval by the same principal.
        while self._seen and (
            next(iter(self._seen.values())) < now or len(self._seen) >= _SEEN_MAX
        ):
            self._seen.popitem(last=False)
        if signature in self._seen:
            raise RequestReplayed("this Slack request was acted on already")
        self._seen[signature] = now + self.slack.config.tolerance_s

    def click(self, body: bytes) -> Click:
        """The click a verified body carries, or :class:`MalformedInteraction`."""
        try:
            form = parse_qs(body.decode(), strict_parsing=True, max_num_fields=4)
            [raw] = form["payload"]
            payload = json.loads(raw)
            if payload.get("type") != "block_actions":
                raise MalformedInteraction("only block_actions interactions are handled")
            team = self.slack.config.team_id
            if team is not None and (payload.get("team") or {}).get("id") != team:
                raise MalformedInteraction("the interaction comes from another workspace")
            [action] = payload["actions"]
            value = json.loads(action["value"])
            click = Click(
                user_id=str(payload["user"]["id"]),
                action=str(action["action_id"]),
                tenant_id=str(value["t"]),
                confirmation_id=str(value["c"]),
                message_ts=_text((payload.get("container") or {}).get("message_ts")),
                channel_id=_text((payload.get("container") or {}).get("channel_id")),
            )
        except MalformedInteraction:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise MalformedInteraction("the body is not a Slack interaction payload") from None
        if click.action not in (APPROVE, DENY) or not _ID.fullmatch(click.confirmation_id):
            raise MalformedInteraction("the interaction is not one of ARVIS's buttons")
        return click

    async def handle(self, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        """Verify and act on one interaction; errors are typed (the route makes them
        problems). The approver is told why a refused click did nothing."""
        self.verify(body, headers)
        click = self.click(body)
        approver = self.slack.approver(click.user_id)
        try:
            if approver is None:
                raise UnknownSlackUser(f"Slack user {click.user_id} is not an ARVIS approver")
            record = await self._decide(approver, click)
        except ArvisError as error:
            await self._tell(click, f"ARVIS did not record that: {error.message}")
            if approver is not None and isinstance(error, ConfirmationStateConflict):
                await self._show(approver, click)
            raise
        verb = "approved" if click.action == APPROVE else "denied"
        log.info(
            "slack: %s (%s) %s %s",
            click.user_id,
            approver.principal_id,
            verb,
            click.confirmation_id,
        )
        await self._update(click, record)
        return {"ok": True, "confirmation_id": record.confirmation_id, "state": record.state}

    async def _decide(self, approver: Identity, click: Click) -> ConfirmationRecord:
        if click.tenant_id != approver.tenant_id:
            # Another tenant's confirmation does not exist for this approver.
            raise NotFound(f"no confirmation {click.confirmation_id}")
        confirmation = ConfirmationId(click.confirmation_id)
        if click.action == APPROVE:
            return await self.consent.approve(approver, confirmation)
        return await self.consent.deny(approver, confirmation, "denied in Slack")

    async def _show(self, approver: Identity, click: Click) -> None:
        try:
            record = await self.consent.confirmation(
                approver.tenant_id, ConfirmationId(click.confirmation_id)
            )
        except ArvisError:
            return
        await self._update(click, record)

    async def _update(self, click: Click, record: ConfirmationRecord) -> None:
        """The clicked message, as the confirmation now stands."""
        if not isinstance(click.message_ts, str):
            return
        channel = click.channel_id or self.slack.config.channel
        await self.destination.update(record, channel, click.message_ts)

    async def _tell(self, click: Click, text: str) -> None:
        answer = await call(
            self.web.chat_postEphemeral,
            channel=click.channel_id or self.slack.config.channel,
            user=click.user_id,
            text=text,
        )
        if answer.error is not None:
            log.warning("slack: telling %s failed: %s", click.user_id, answer.error)


@dataclass(eq=False)
class SlackApprovals:
    """What a deployment with ``[slack]`` runs: the destination and the interactions."""

    destination: SlackDestination
    interactions: SlackInteractions

    @property
    def max_body_bytes(self) -> int:
        return self.interactions.slack.config.max_body_bytes


def slack_approvals(
    slack: Slack, consent: ConsentService, posted: PostedMessages, clock: Clock
) -> SlackApprovals:
    web = web_client(slack)
    destination = SlackDestination(slack, web, consent, posted, clock)
    return SlackApprovals(destination, SlackInteractions(slack, web, consent, clock, destination))
