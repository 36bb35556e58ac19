"""A local stand-in for Slack: its Web API (records ``chat.*`` calls, keeps the channel's
messages as posted and updated, answers ``conversations.history`` and ``auth.test`` like
Slack) and its interactions (block_actions payloads, signed with Slack's scheme by Slack's
own SDK — correctly, or not). No network.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode

from slack_sdk.signature import SignatureVerifier

from arvis.kernel import Kernel
from tests.support.http import Api

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
"""The app's signing secret in tests (Slack's documentation's example, reversed)."""
BOT_TOKEN = "xoxb-test-0000000000-not-a-real-token"
CHANNEL = "C0APPROVALS"
TEAM = "T0ARVIS"
BOT_ID = "B0ARVIS"
"""The bot's id (``auth.test``), on every message it posts."""
LOST = object()
"""What :meth:`SlackStandIn.answer` returns for a call whose answer is lost."""


@dataclass
class SlackStandIn:
    """What the stand-in was asked (``(method, arguments)``), the messages of its channels
    as they now stand (``ts`` → message), and what it answers."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    fail: dict[str, str] = field(default_factory=dict)
    """Method → Slack error code it answers once (e.g. ``channel_not_found``)."""
    lose: set[str] = field(default_factory=set)
    """Methods whose next call is carried out and then answered by a dropped connection
    (an answer lost on the way back)."""
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    url: str = ""
    _ts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, method: str) -> list[dict[str, Any]]:
        return [arguments for name, arguments in self.calls if name == method]

    def message_of(self, confirmation_id: str) -> list[dict[str, Any]]:
        """The messages that name ``confirmation_id``, as they now stand (copies), oldest
        first."""
        with self._lock:
            return [
                copy.deepcopy(m)
                for m in self.messages.values()
                if confirmation_id in json.dumps(m["blocks"])
            ]

    def answer(self, method: str, arguments: dict[str, Any]) -> dict[str, Any] | object:
        with self._lock:
            self.calls.append((method, arguments))
            error = self.fail.pop(method, None)
            if error is not None:
                return {"ok": False, "error": error}
            answer = self._carry_out(method, arguments)
            if method in self.lose:
                self.lose.discard(method)
                return LOST
            return answer

    def _carry_out(self, method: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "user_id": "U0ARVISBOT", "bot_id": BOT_ID, "team_id": TEAM}
        if method == "conversations.history":
            return self._history(arguments)
        if method == "chat.update":
            message = self.messages.get(str(arguments.get("ts")))
            if message is None:
                return {"ok": False, "error": "message_not_found"}
            message.update(text=arguments.get("text"), blocks=arguments.get("blocks") or [])
            return {"ok": True, "channel": arguments.get("channel"), "ts": arguments["ts"]}
        self._ts += 1
        ts = f"{int(time.time())}.{self._ts:06d}"  # Slack's: its clock's seconds, unique
        if method == "chat.postMessage":
            self.messages[ts] = {
                "ts": ts,
                "channel": arguments.get("channel"),
                "bot_id": BOT_ID,
                "text": arguments.get("text"),
                "blocks": arguments.get("blocks") or [],
                "metadata": arguments.get("metadata"),
            }
        return {"ok": True, "channel": arguments.get("channel"), "ts": ts}

    def _history(self, arguments: dict[str, Any]) -> dict[str, Any]:
        oldest = float(arguments.get("oldest") or 0)
        with_metadata = str(arguments.get("include_all_metadata")).lower() in ("1", "true")
        found = [
            {k: v for k, v in m.items() if k != "metadata" or with_metadata}
            for ts, m in sorted(self.messages.items(), reverse=True)
            if m["channel"] == arguments.get("channel") and float(ts) >= oldest
        ]
        return {"ok": True, "messages": found[: int(arguments.get("limit") or 100)]}


@contextmanager
def slack_stand_in() -> Iterator[SlackStandIn]:
    """The Web API on 127.0.0.1 (``url`` is its ``api_url``), for the block."""
    stand_in = SlackStandIn()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            self._answer(path, {k: v[0] for k, v in parse_qs(query).items()})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length).decode()
            if self.headers.get("Content-Type", "").startswith("application/json"):
                arguments = json.loads(raw or "{}")
            else:
                arguments = {k: v[0] for k, v in parse_qs(raw).items()}
            self._answer(self.path, arguments)

        def _answer(self, path: str, arguments: dict[str, Any]) -> None:
            if self.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
                answer: dict[str, Any] | object = {"ok": False, "error": "invalid_auth"}
            else:
                answer = stand_in.answer(path.rsplit("/", 1)[-1], arguments)
            if answer is LOST:
                self.close_connection = True  # no answer at all: the client sees it drop
                return
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}/api/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def config(api_url: str, users: dict[str, tuple[str, str, tuple[str, ...]]]) -> str:
    """The ``[slack]`` section: ``users`` maps Slack user ids to (tenant, principal, groups)."""
    lines = [
        "[slack]",
        f'channel = "{CHANNEL}"',
        f'api_url = "{api_url}"',
        f'team_id = "{TEAM}"',
        "",
        "[slack.users]",
    ]
    for user_id, (tenant, principal, groups) in users.items():
        lines.append(
            f'{user_id} = {{ tenant = "{tenant}", principal = "{principal}", '
            f"groups = {json.dumps(list(groups))} }}"
        )
    return "\n".join(lines) + "\n"


ENVIRONMENT = {"ARVIS_SLACK_BOT_TOKEN": BOT_TOKEN, "ARVIS_SLACK_SIGNING_SECRET": SIGNING_SECRET}


def click_body(
    user_id: str,
    action_id: str,
    value: str,
    *,
    message_ts: str = "1700000000.000001",
    team: str = TEAM,
) -> bytes:
    """A block_actions interaction as Slack posts it (form-encoded ``payload``)."""
    payload = {
        "type": "block_actions",
        "team": {"id": team, "domain": "arvis-test"},
        "user": {"id": user_id, "username": "someone", "name": "display names are not trusted"},
        "api_app_id": "A0ARVIS",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL, "name": "approvals"},
        "message": {"ts": message_ts, "text": "…"},
        "response_url": "http://127.0.0.1:9/never-used",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "arvis_decision",
                "value": value,
                "action_ts": str(time.time()),
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def signed(
    body: bytes,
    *,
    secret: str = SIGNING_SECRET,
    timestamp: int | None = None,
    age_s: int = 0,
) -> dict[str, str]:
    """Slack's headers for ``body``: signed by Slack's SDK with ``secret`` at ``timestamp``
    (default: now, less ``age_s``; a negative age is a time in the future)."""
    at = str(int(time.time()) - age_s if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=at, body=body)
    assert signature is not None
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": at,
        "X-Slack-Signature": signature,
    }


# -- driving a served ARVIS with [slack] ------------------------------------------------


def kernel_of(api: Api) -> Kernel:
    kernel: Kernel = api.app.state.kernel
    return kernel


async def ask(api: Api, run_id: str, tool: str, payload: dict[str, Any], **how: Any) -> str:
    """The agent posts a call that needs consent; the outbox is delivered (to Slack).
    Answers the confirmation's id."""
    response = await api.syscall(tool, payload, run_id=run_id, causal_id="c1", **how)
    answer: dict[str, Any] = response.json()
    assert answer["outcome"] == "confirmation_required", answer
    await kernel_of(api).deliverer.deliver_once()
    return str(answer["confirmation"]["id"])


def posted(stand_in: SlackStandIn, confirmation_id: str) -> dict[str, Any]:
    """The one ``chat.postMessage`` of ``confirmation_id``."""
    [message] = [m for m in stand_in.of("chat.postMessage") if confirmation_id in json.dumps(m)]
    return message


def shown(stand_in: SlackStandIn, confirmation_id: str) -> dict[str, Any]:
    """The one message of ``confirmation_id`` in the channel, as it now stands."""
    [message] = stand_in.message_of(confirmation_id)
    return message


def shown_at(stand_in: SlackStandIn, ts: str) -> dict[str, Any]:
    """The message ``ts`` of the channel, as it now stands (a copy)."""
    return copy.deepcopy(stand_in.messages[ts])


def buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The buttons a message shows (none, once decided)."""
    return [
        e for block in message["blocks"] if block["type"] == "actions" for e in block["elements"]
    ]


def button(message: dict[str, Any], action_id: str) -> str:
    """What the button ``action_id`` of a message carries back."""
    [found] = [e for e in buttons(message) if e["action_id"] == action_id]
    return str(found["value"])


def text_of(message: dict[str, Any]) -> str:
    """Every text of a message's blocks, as one string."""
    return json.dumps(message["blocks"], ensure_ascii=False)


async def click(
    api: Api,
    user: str,
    action_id: str,
    value: str,
    *,
    message_ts: str | None = None,
    **signing: Any,
) -> tuple[int, dict[str, Any]]:
    """``user`` clicks a button of the message ``message_ts``, as Slack posts it, signed."""
    body = click_body(
        user, action_id, value, **({} if message_ts is None else {"message_ts": message_ts})
    )
    response = await api.client.post(
        "/slack/interactions", content=body, headers=signed(body, **signing)
    )
    return response.status_code, response.json()


async def confirmation(api: Api, confirmation_id: str) -> dict[str, Any]:
    """The confirmation as ``GET /v1/confirmations`` shows it to acme's approver."""
    response = await api.client.get(
        "/v1/confirmations", headers=api.auth("acme:approver"), params={"limit": 500}
    )
    [found] = [c for c in response.json()["confirmations"] if c["id"] == confirmation_id]
    return dict(found)


def due_again(api: Api) -> None:
    """Every waiting outbox event due now (as if its backoff had passed)."""
    api.sql("UPDATE notify_outbox SET next_attempt_at = now() WHERE state = 'PENDING'")
