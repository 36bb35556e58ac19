"""Approvals in Slack, with Slack's own SDK (``slack-sdk``): the outbox destination that
posts a consent request, and the interactions that approve or deny it.

A click is trusted only when Slack's signature over the exact body verifies
(``slack_sdk.signature.SignatureVerifier``) within the tolerance, and only once; the
Slack user is mapped to an ARVIS approver by its id through ``[slack.users]`` (never by a
name, which anyone can change), and the decision is the :class:`ConsentService`'s, as on
every other approval path: four eyes, groups and quorum are its rules, not ours.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.signature import Clock as SlackClock
from slack_sdk.signature import SignatureVerifier

from arvis.domain.clock import Clock
from arvis.domain.errors import ArvisError
from arvis.domain.identity import Identity
from arvis.domain.ids import ID_PATTERN, ConfirmationId, TenantId
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.consent.notify import OutboxEvent, SignatureInvalid
from arvis.lifecycle.consent.service import ConsentService
from arvis.lifecycle.errors import ConfirmationStateConflict, NotFound
from arvis.lifecycle.records import ConfirmationRecord
from arvis.slack.config import Slack
from arvis.slack.messages import APPROVE, DENY, outcome_message, request_message

log = logging.getLogger(__name__)
# The SDK logs whole requests and answers at DEBUG (message bodies, which carry the frozen
# arguments): its logger is ours, and never below INFO.
_sdk_log = logging.getLogger("arvis.slack.sdk")
_sdk_log.setLevel(logging.INFO)

DESTINATION = "@slack"
"""The outbox's name for Slack (no webhook name can start with ``@``)."""
_TIMESTAMP = re.compile(r"^\d{1,12}$")
_SIGNATURE = re.compile(r"^v0=[0-9a-f]{64}$")
_ID = re.compile(ID_PATTERN)
_SEEN_MAX = 10_000


class RequestReplayed(ArvisError, code="request_replayed"):
    """A signed Slack request seen before: it is acted on once."""


class UnknownSlackUser(ArvisError, code="unknown_slack_user"):
    """The Slack user is not an approver of ``[slack.users]``."""


class MalformedInteraction(ArvisError, code="malformed_body"):
    """A signed request that is not the interaction ARVIS posted buttons for."""


def web_client(slack: Slack) -> WebClient:
    """Slack's Web API client for the bot: no retries of its own (the outbox retries a
    post; a click is answered once), its logger quiet."""
    return WebClient(
        token=slack.bot_token,
        base_url=slack.config.api_url,
        timeout=max(1, round(slack.config.timeout_s)),
        logger=_sdk_log,
        retry_handlers=[],
    )


async def _call(method: Callable[..., Any], **arguments: Any) -> str | None:
    """One Web API call off the event loop; None when Slack answered ok, else what went
    wrong (Slack's error code or the exception's class — never a token)."""
    try:
        await asyncio.to_thread(method, **arguments)
    except SlackApiError as exc:
        return f"slack: {exc.response.get('error', 'error')}"
    except (SlackClientError, OSError) as exc:
        return type(exc).__name__
    return None


@dataclass(eq=False)
class SlackDestination:
    """An outbox destination (:class:`arvis.webhooks.deliverer.NotificationDeliverer`):
    each ``confirmation.requested`` becomes a message with Approve/Deny buttons."""

    slack: Slack
    web: WebClient
    consent: ConsentService
    name: str = DESTINATION
    timeout_s: float = field(init=False)

    def __post_init__(self) -> None:
        self.timeout_s = self.slack.config.timeout_s

    def wants(self, event_type: str, tenant_id: str) -> bool:
        return self.slack.config.wants(event_type, tenant_id)

    async def deliver(self, event: OutboxEvent) -> str | None:
        confirmation_id = event.subject.get("confirmation_id")
        if not isinstance(confirmation_id, str):
            return None
        try:
            record = await self.consent.confirmation(
                TenantId(event.tenant_id), ConfirmationId(confirmation_id)
            )
        except NotFound:
            return None
        if record.state is not ConfirmationState.PENDING:
            return None  # decided before it could be asked here: nothing to ask
        text, blocks = request_message(record)
        error = await _call(
            self.web.chat_postMessage,
            channel=self.slack.config.channel,
            text=text,
            blocks=blocks,
            unfurl_links=False,
            unfurl_media=False,
        )
        if error is not None:
            log.warning("slack: posting %s failed: %s", event.event_id, error)
        return error


@dataclass(frozen=True, slots=True)
class Click:
    """A verified click on one of ARVIS's buttons."""

    user_id: str
    action: str
    tenant_id: str
    confirmation_id: str
    message_ts: str | None


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
                message_ts=(payload.get("container") or {}).get("message_ts"),
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
                await self._show(approver, click, "decided elsewhere")
            raise
        verb = "approved" if click.action == APPROVE else "denied"
        log.info(
            "slack: %s (%s) %s %s",
            click.user_id,
            approver.principal_id,
            verb,
            click.confirmation_id,
        )
        await self._update(click, record, f"{verb} in Slack by {approver.principal_id}")
        return {"ok": True, "confirmation_id": record.confirmation_id, "state": record.state}

    async def _decide(self, approver: Identity, click: Click) -> ConfirmationRecord:
        if click.tenant_id != approver.tenant_id:
            # Another tenant's confirmation does not exist for this approver.
            raise NotFound(f"no confirmation {click.confirmation_id}")
        confirmation = ConfirmationId(click.confirmation_id)
        if click.action == APPROVE:
            return await self.consent.approve(approver, confirmation)
        return await self.consent.deny(approver, confirmation, "denied in Slack")

    async def _show(self, approver: Identity, click: Click, note: str) -> None:
        try:
            record = await self.consent.confirmation(
                approver.tenant_id, ConfirmationId(click.confirmation_id)
            )
        except ArvisError:
            return
        await self._update(click, record, note)

    async def _update(self, click: Click, record: ConfirmationRecord, note: str) -> None:
        if not isinstance(click.message_ts, str):
            return
        text, blocks = outcome_message(record, note)
        error = await _call(
            self.web.chat_update,
            channel=self.slack.config.channel,
            ts=click.message_ts,
            text=text,
            blocks=blocks,
        )
        if error is not None:
            log.warning("slack: updating %s's message failed: %s", record.confirmation_id, error)

    async def _tell(self, click: Click, text: str) -> None:
        error = await _call(
            self.web.chat_postEphemeral,
            channel=self.slack.config.channel,
            user=click.user_id,
            text=text,
        )
        if error is not None:
            log.warning("slack: telling %s failed: %s", click.user_id, error)


@dataclass(eq=False)
class SlackApprovals:
    """What a deployment with ``[slack]`` runs: the destination and the interactions."""

    destination: SlackDestination
    interactions: SlackInteractions

    @property
    def max_body_bytes(self) -> int:
        return self.interactions.slack.config.max_body_bytes


def slack_approvals(slack: Slack, consent: ConsentService, clock: Clock) -> SlackApprovals:
    web = web_client(slack)
    return SlackApprovals(
        SlackDestination(slack, web, consent), SlackInteractions(slack, web, consent, clock)
    )
