"""A local stand-in for Slack: its Web API (records ``chat.*`` calls, answers like Slack)
and its interactions (block_actions payloads, signed with Slack's scheme by Slack's own
SDK — correctly, or not). No network.
"""

from __future__ import annotations

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

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
"""The app's signing secret in tests (Slack's documentation's example, reversed)."""
BOT_TOKEN = "xoxb-test-0000000000-not-a-real-token"
CHANNEL = "C0APPROVALS"
TEAM = "T0ARVIS"


@dataclass
class SlackStandIn:
    """What the stand-in was asked (``(method, arguments)``), and what it answers."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    fail: dict[str, str] = field(default_factory=dict)
    """Method → Slack error code it answers once (e.g. ``channel_not_found``)."""
    url: str = ""
    _ts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, method: str) -> list[dict[str, Any]]:
        return [arguments for name, arguments in self.calls if name == method]

    def answer(self, method: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.calls.append((method, arguments))
            error = self.fail.pop(method, None)
            if error is not None:
                return {"ok": False, "error": error}
            self._ts += 1
            ts = arguments.get("ts") or f"1700000000.{self._ts:06d}"
        return {"ok": True, "channel": arguments.get("channel"), "ts": ts}


@contextmanager
def slack_stand_in() -> Iterator[SlackStandIn]:
    """The Web API on 127.0.0.1 (``url`` is its ``api_url``), for the block."""
    stand_in = SlackStandIn()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length).decode()
            if self.headers.get("Content-Type", "").startswith("application/json"):
                arguments = json.loads(raw or "{}")
            else:
                arguments = {k: v[0] for k, v in parse_qs(raw).items()}
            if self.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
                answer = {"ok": False, "error": "invalid_auth"}
            else:
                answer = stand_in.answer(self.path.rsplit("/", 1)[-1], arguments)
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
