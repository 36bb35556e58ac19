"""A syscall's answer as MCP answers it: what a client shows and what a model can act on.

``executed`` / ``deduplicated`` with a completed value: a ``CallToolResult``
with the value as ``structuredContent`` and as JSON text. A problem, a refusal,
a consent request or an uncertain boundary: ``isError: true`` and text saying
what happened and what to do next. An uncertain outcome someone resolved answers
what the resolution says (completed: not an error). Every answer carries the same
``_meta`` keys (:func:`answer_meta`), each present, ``null`` where it does not apply.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from arvis.domain.boundary import EffectBoundary
from arvis.lifecycle.results import SyscallResult
from arvis.tools.mcp import keys

_AUDIT_INCOMPLETE = "The run is flagged audit-incomplete: this result is not journaled yet."
_NEXT_STEP = {
    EffectBoundary.EFFECT_NOT_STARTED: "Nothing ran; the same call may be made again.",
    EffectBoundary.EFFECT_FAILED: "The tool failed after it may have started.",
    EffectBoundary.EFFECT_STARTED: (
        "The effect started and its end was not observed. Do NOT call this tool again for "
        "the same action: it could happen twice. Ask a human to check what happened."
    ),
    EffectBoundary.EFFECT_STATE_UNKNOWN: (
        "Nobody knows whether the effect happened. Do NOT retry: a retry could repeat it. "
        "Ask a human to check the target system before doing anything else."
    ),
    EffectBoundary.EFFECT_COMPLETED: (
        "The call completed with this problem; calling it again with the same arguments "
        "answers the same recorded result."
    ),
}


def answer_meta(result: SyscallResult) -> dict[str, Any]:
    """The ``arvis.dev/*`` keys every answer carries: all of them, always, ``null`` where
    a value does not apply (``audit_incomplete`` is always a boolean)."""
    problem = result.problem or {}
    code = problem.get("code")
    resolution = result.resolution
    return {
        keys.OUTCOME: result.outcome,
        keys.BOUNDARY: None if result.boundary is None else result.boundary.value,
        keys.IDEMPOTENCY_KEY: result.idempotency_key,
        keys.JOURNAL_POSITION: result.journal_position,
        keys.ATTEMPT: result.attempt,
        keys.RUN_ID: result.run_id,
        keys.CAUSAL_ID: result.causal_id,
        keys.REASON: result.reason,
        keys.PROBLEM: code if isinstance(code, str) else None,
        keys.CONFIRMATION_ID: None if result.confirmation is None else result.confirmation.id,
        keys.AUDIT_INCOMPLETE: result.audit_incomplete,
        keys.RESOLUTION: None
        if resolution is None
        else {
            "boundary": resolution.boundary.value,
            "position": resolution.position,
            "resolved_by": resolution.resolved_by,
        },
    }


def empty_meta(**values: Any) -> dict[str, Any]:
    """Every ``arvis.dev/*`` key of :func:`answer_meta`, ``null``, but for ``values``
    (keyed by the constants of :mod:`arvis.mcp.meta`)."""
    meta: dict[str, Any] = dict.fromkeys(_ANSWER_KEYS)
    meta[keys.AUDIT_INCOMPLETE] = False
    meta.update(values)
    return meta


_ANSWER_KEYS = (
    keys.OUTCOME,
    keys.BOUNDARY,
    keys.IDEMPOTENCY_KEY,
    keys.JOURNAL_POSITION,
    keys.ATTEMPT,
    keys.RUN_ID,
    keys.CAUSAL_ID,
    keys.REASON,
    keys.PROBLEM,
    keys.CONFIRMATION_ID,
    keys.AUDIT_INCOMPLETE,
    keys.RESOLUTION,
)


def call_result(result: SyscallResult, *, tool: str, protocol_version: str) -> types.CallToolResult:
    """Any answer but a consent request (see :func:`consent_result`)."""
    meta = answer_meta(result)
    if result.resolution is not None:
        return _resolved(result, meta, tool, protocol_version)
    completed = result.boundary is EffectBoundary.EFFECT_COMPLETED and result.problem is None
    if result.outcome in ("executed", "deduplicated") and completed:
        note = _AUDIT_INCOMPLETE if result.audit_incomplete else ""
        return _with_value(result.result, meta, protocol_version, is_error=False, note=note)
    if result.outcome == "refused":
        text = f"ARVIS refused this call of {tool} ({result.reason}): {result.detail}. Nothing ran."
    else:
        text = _failure_text(result, tool)
    if result.audit_incomplete:
        text += " " + _AUDIT_INCOMPLETE
    if result.result is not None:
        # Accepted work keeps its receipt: show it along with the warning.
        return _with_value(result.result, meta, protocol_version, is_error=True, note=text)
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True, _meta=meta)


def consent_result(
    result: SyscallResult, *, tool: str, approval_url: str, approver: str
) -> types.CallToolResult:
    """Consent required, for a client that cannot be sent to the approval."""
    assert result.confirmation is not None
    text = (
        f"This call of {tool} needs consent before it runs; nothing ran. "
        f"{_sentence(approver)} must approve confirmation {result.confirmation.id} "
        f"({approval_url}). Once it is approved, make exactly the same call again: it then "
        "runs once."
    )
    return types.CallToolResult(
        content=[types.TextContent(text=text)], is_error=True, _meta=answer_meta(result)
    )


def consent_request(
    result: SyscallResult, *, tool: str, approval_url: str, approver: str, state: str
) -> types.InputRequiredResult:
    """Consent required, for a client that declared URL elicitation: send it to the approval."""
    message = (
        f"ARVIS needs {approver} to approve this call of {tool} before it runs. "
        "Continue once it is approved."
    )
    request = types.ElicitRequest(
        params=types.ElicitRequestURLParams(message=message, url=approval_url)
    )
    return types.InputRequiredResult(
        input_requests={keys.APPROVAL: request}, request_state=state, _meta=answer_meta(result)
    )


def declined_result(
    result_meta: dict[str, Any], *, tool: str, confirmation_id: str
) -> types.CallToolResult:
    """The user at the client declined to open the approval: nothing runs now."""
    text = (
        f"The approval of this call of {tool} was not opened; nothing ran. Confirmation "
        f"{confirmation_id} stays open: make the same call again once it is approved."
    )
    return types.CallToolResult(
        content=[types.TextContent(text=text)], is_error=True, _meta=result_meta
    )


def _sentence(clause: str) -> str:
    """``clause`` as the start of a sentence."""
    return clause[:1].upper() + clause[1:]


_RESOLVED_AS = {
    EffectBoundary.EFFECT_COMPLETED: (
        "completed. It is not run again: this is its recorded outcome, and the same call "
        "answers it again."
    ),
    EffectBoundary.EFFECT_FAILED: (
        "failed. Do not make the same call again: ARVIS refuses a retry the tool did not advise."
    ),
    EffectBoundary.EFFECT_NOT_STARTED: "not started: the same call may be made again.",
}


def _resolved(
    result: SyscallResult, meta: dict[str, Any], tool: str, protocol_version: str
) -> types.CallToolResult:
    """The record of an uncertain attempt with the resolution that settled it: what
    the resolution says happened, not the uncertainty it settled."""
    resolution = result.resolution
    assert resolution is not None
    completed = resolution.boundary is EffectBoundary.EFFECT_COMPLETED
    text = (
        f"An earlier call of {tool} had an uncertain outcome; {resolution.resolved_by} "
        f"resolved it as {_RESOLVED_AS[resolution.boundary]} Evidence: {resolution.evidence}"
    )
    if result.audit_incomplete:
        text += " " + _AUDIT_INCOMPLETE
    if result.result is not None:
        return _with_value(result.result, meta, protocol_version, is_error=not completed, note=text)
    return types.CallToolResult(
        content=[types.TextContent(text=text)], is_error=not completed, _meta=meta
    )


def _failure_text(result: SyscallResult, tool: str) -> str:
    problem = result.problem or {}
    code = problem.get("code", "failed")
    detail = problem.get("detail") or result.detail or "no detail"
    boundary = result.boundary or EffectBoundary.EFFECT_STATE_UNKNOWN
    text = f"{tool} did not complete ({code}): {detail}. {_NEXT_STEP.get(boundary, '')}"
    if boundary is EffectBoundary.EFFECT_FAILED:
        if problem.get("retryable"):
            text += " The tool advises that the same call may be made again."
        else:
            text += (
                " Do not make the same call again: ARVIS refuses a retry the tool did not advise."
            )
    return text


def _with_value(
    value: Any, meta: dict[str, Any], protocol_version: str, *, is_error: bool, note: str
) -> types.CallToolResult:
    text = json.dumps(value, ensure_ascii=False)
    content: list[types.ContentBlock] = [types.TextContent(text=text)]
    if note:
        content.insert(0, types.TextContent(text=note))
    # Before 2026-07-28 structuredContent must be an object; the text always has the value.
    structured = value if protocol_version in MODERN_PROTOCOL_VERSIONS else None
    if isinstance(value, dict):
        structured = value
    return types.CallToolResult(
        content=content, structured_content=structured, is_error=is_error, _meta=meta
    )
