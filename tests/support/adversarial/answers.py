"""Every entry point's answer in one shape, so a rule asserts the same thing everywhere."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import mcp_types as types
from mcp import MCPError


@dataclass(frozen=True)
class Answer:
    """A decision's answer: ``outcome`` is the syscall's (``executed``, ``deduplicated``,
    ``refused``, ``confirmation_required``) or ``error`` for an answer that is no governed
    outcome (a problem+json, an MCP protocol error); ``code`` is the refusal reason, the
    tool's problem code or the error's code."""

    outcome: str
    boundary: str | None = None
    code: str | None = None
    result: Any = None
    idempotency_key: str | None = None
    attempt: int | None = None
    confirmation_id: str | None = None
    position: int | None = None
    """Its entry in the run's journal."""
    raw: str = ""

    @property
    def governed(self) -> bool:
        return self.outcome != "error"


@dataclass(frozen=True)
class Done:
    """An operator's action (approve, resolve) or a read (verify, replay)."""

    ok: bool
    code: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list)
    """Replay: the results served."""
    raw: str = ""


def from_http(response: httpx.Response) -> Answer:
    text = response.text
    if response.headers.get("content-type", "").startswith("application/problem+json"):
        return Answer(
            "error", code=response.json().get("code"), raw=f"{response.status_code} {text}"
        )
    body = response.json()
    problem = body.get("problem") or {}
    return Answer(
        outcome=body["outcome"],
        boundary=body.get("boundary"),
        code=body.get("reason") or problem.get("code"),
        result=body.get("result"),
        idempotency_key=body.get("idempotency_key"),
        attempt=body.get("attempt"),
        confirmation_id=(body.get("confirmation") or {}).get("id"),
        position=body.get("journal_position"),
        raw=f"{response.status_code} {text}",
    )


def from_mcp(result: types.CallToolResult) -> Answer:
    meta = dict(result.meta or {})
    text = " ".join(block.text for block in result.content if isinstance(block, types.TextContent))
    return Answer(
        outcome=str(meta.get("arvis.dev/outcome")),
        boundary=meta.get("arvis.dev/boundary"),
        code=meta.get("arvis.dev/reason") or meta.get("arvis.dev/problem"),
        result=result.structured_content,
        idempotency_key=meta.get("arvis.dev/idempotency_key"),
        attempt=meta.get("arvis.dev/attempt"),
        confirmation_id=meta.get("arvis.dev/confirmation_id"),
        position=meta.get("arvis.dev/journal_position"),
        raw=json.dumps({"is_error": result.is_error, "meta": meta, "text": text}),
    )


def from_mcp_error(error: MCPError) -> Answer:
    data = error.error.data
    code = data.get("code") if isinstance(data, dict) else None
    return Answer(
        "error",
        code=code or f"jsonrpc_{error.error.code}",
        raw=f"{error.error.code} {error.error.message}",
    )


def done_from_http(response: httpx.Response) -> Done:
    ok = response.status_code < 300
    code = None
    if response.headers.get("content-type", "").startswith("application/problem+json"):
        code = response.json().get("code")
    results = response.json().get("results", []) if ok and response.content else []
    return Done(ok, code, results, f"{response.status_code} {response.text[:2000]}")
