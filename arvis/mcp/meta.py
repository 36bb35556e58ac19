"""The ids of a call and the request state, over the ``_meta`` keys of
:mod:`arvis.tools.mcp.keys`.

**Ids.** A ``tools/call`` is one ``tool.execute`` of a run, under a causal id.
Both come from the request's ``_meta`` (``arvis.dev/run_id``,
``arvis.dev/causal_id``), else from the headers ``ARVIS-Run-Id`` /
``ARVIS-Causal-Id``, else from these defaults (docs/mcp.md):

- run id ``mcp:<principal id>`` (:func:`arvis.lifecycle.results.principal_run_id`):
  one run per principal, whatever its key (keys rotate) or the tool plan (a plan
  change must never make a decided action new, DESIGN §10). The ``mcp:`` namespace
  is reserved: a syscall naming another principal's derived run is refused by the
  handler, so nobody can open (and so bind) it first. On a per-turn instance
  (``arvis serve-turn RUN``) the default run is the turn's;
- causal id, for a tool that may change something (or is not in the plan),
  ``<tool>:<first 40 hex of the payload digest>``: the same call is the same
  decision, so a retry, or the call after an approval, resumes it and a
  completed one answers its recorded result; for a read-only tool a fresh
  ``<tool>:<uuid>`` per call, since a read has no effect to deduplicate and a
  recorded read would go stale.

**Trace context.** With tracing on, a call continues the caller's W3C trace from
``_meta`` (``traceparent``, ``tracestate``: the MCP convention), else from the
request's headers of those names; a malformed one starts a new trace.

**Request state.** An ``input_required`` answer carries the decision it waits
for (run id, causal id, confirmation, tool and payload digest) in
``requestState``; the retry resumes exactly that decision. It names nothing the
caller could not name in ``_meta`` itself, and every check still happens in the
lifecycle, so it is bound to its call (tool and payload digest) but not sealed.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arvis.domain.definitions import ToolDefinition
from arvis.domain.identity import Identity
from arvis.domain.ids import ID_PATTERN, principal_run_id
from arvis.domain.payload import FrozenEffectPayload
from arvis.tools.mcp.keys import (
    CAUSAL_ID,
    CAUSAL_ID_HEADER,
    RUN_ID,
    RUN_ID_HEADER,
    TRACEPARENT,
    TRACESTATE,
)

_ID = re.compile(ID_PATTERN)
_STATE_PREFIX = "arvis1."


class InvalidIds(ValueError):
    """An id, or the request state, that the call cannot use; the text says which."""


@dataclass(frozen=True, slots=True)
class PendingDecision:
    """What an ``input_required`` answer waits for, echoed back in ``requestState``."""

    run_id: str
    causal_id: str
    confirmation_id: str
    tool: str
    digest: str

    def encode(self) -> str:
        body = json.dumps(
            {
                "v": 1,
                "run_id": self.run_id,
                "causal_id": self.causal_id,
                "confirmation_id": self.confirmation_id,
                "tool": self.tool,
                "digest": self.digest,
            },
            separators=(",", ":"),
            sort_keys=True,
        )
        return _STATE_PREFIX + base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, state: str, *, tool: str, payload: FrozenEffectPayload) -> PendingDecision:
        """The decision ``state`` names, checked against the call that echoes it."""
        try:
            if not state.startswith(_STATE_PREFIX):
                raise ValueError
            raw = state[len(_STATE_PREFIX) :]
            fields = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
            if fields.pop("v") != 1:
                raise ValueError
            decision = cls(**{name: str(value) for name, value in fields.items()})
        except (ValueError, TypeError, KeyError, AttributeError):
            raise InvalidIds("requestState is not one that ARVIS issued") from None
        if decision.tool != tool or decision.digest != payload.digest:
            raise InvalidIds("requestState belongs to another call (tool or arguments differ)")
        for value in (decision.run_id, decision.causal_id, decision.confirmation_id):
            if not _ID.fullmatch(value):
                raise InvalidIds("requestState is not one that ARVIS issued")
        return decision


def explicit_ids(
    meta: Mapping[str, Any] | None, headers: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """The run and causal ids the caller named, each from ``_meta`` else its header."""
    meta = meta or {}
    run = _checked(meta.get(RUN_ID, headers.get(RUN_ID_HEADER)), RUN_ID)
    causal = _checked(meta.get(CAUSAL_ID, headers.get(CAUSAL_ID_HEADER)), CAUSAL_ID)
    return run, causal


def trace_context(meta: Mapping[str, Any] | None) -> tuple[object, object] | None:
    """``traceparent`` and ``tracestate`` of ``_meta`` (unchecked: tracing bounds and
    parses them), or None when it names no ``traceparent``."""
    if not meta or TRACEPARENT not in meta:
        return None
    return meta.get(TRACEPARENT), meta.get(TRACESTATE)


def default_run_id(identity: Identity, served_run: str | None = None) -> str:
    """The run of a call that names none: the per-turn instance's, else the principal's."""
    return served_run or principal_run_id(identity.principal_id)


def default_causal_id(
    tool: str, definition: ToolDefinition | None, payload: FrozenEffectPayload
) -> str:
    if definition is not None and definition.read_only:
        return f"{tool}:{uuid.uuid4().hex}"
    return f"{tool}:{payload.digest[:40]}"


def _checked(value: Any, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidIds(f"{key} must match {ID_PATTERN}")
    return value
