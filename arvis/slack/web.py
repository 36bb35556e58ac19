"""Slack's Web API as ARVIS calls it: Slack's own client (``slack_sdk.WebClient``), off the
event loop, its answers or what went wrong (never a token)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from arvis.slack.config import Slack

# The SDK logs whole requests and answers at DEBUG (message bodies, which carry the frozen
# arguments): its logger is ours, and never below INFO.
_sdk_log = logging.getLogger("arvis.slack.sdk")
_sdk_log.setLevel(logging.INFO)


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


@dataclass(frozen=True, slots=True)
class Answer:
    """What one Web API call answered: Slack's data when ok, else what went wrong."""

    data: dict[str, Any]
    error: str | None
    """None when Slack answered ok; else ``slack: <Slack's error code>``, or the class of
    the exception (a connection that failed, an answer that never came)."""
    code: str | None = None
    """Slack's own error code, when Slack answered one."""


async def call(method: Callable[..., Any], **arguments: Any) -> Answer:
    """One Web API call, off the event loop."""
    try:
        response = await asyncio.to_thread(method, **arguments)
    except SlackApiError as exc:
        code = str(exc.response.get("error", "error"))
        return Answer({}, f"slack: {code}", code)
    except (SlackClientError, OSError) as exc:
        return Answer({}, type(exc).__name__)
    data = response.data if isinstance(response.data, dict) else {}
    return Answer(data, None)
