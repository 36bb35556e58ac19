"""What a model is told about a governed call, and the ids and names it is told them under:
the same for every agent framework (:mod:`arvis.integrations.openai_agents`,
:mod:`arvis.integrations.langgraph`)."""

from __future__ import annotations

import hashlib
import json
import re

from arvis.client import Boundary, ConfirmationRequired, Refused, SyscallAnswer

DO_NOT_RETRY = (
    "Do not retry this call: it may already have taken effect, and nobody can tell yet "
    "whether it did. Report it as uncertain and let a person check."
)

_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_MODEL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_UNCERTAIN_REFUSALS = frozenset({"retry_prohibited_uncertain"})


def as_id(text: str, kind: str) -> str:
    """``text`` itself when ARVIS accepts it as an id, else ``<kind>-sha256:<digest>``: the
    same text always gives the same id."""
    # "." and ".." are dot segments of a URL path, which ARVIS refuses as ids.
    if _ID.fullmatch(text) and text not in (".", ".."):
        return text
    return f"{kind}-sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def causal_id_for_call(call_id: str) -> str:
    """The causal id of the model's call ``call_id``: the call id itself when ARVIS accepts
    it as an id (as ``arvis turn`` does), else a digest of it. The same call id always
    gives the same causal id, so a resumed call is the same decision."""
    return as_id(call_id, "call")


def model_name(arvis_name: str) -> str:
    """A name the model may call: ARVIS's ``files.append`` is ``files_append``."""
    name = arvis_name.replace(".", "_")
    if not _MODEL_NAME.fullmatch(name):
        raise ValueError(f"tool {arvis_name!r} needs an explicit model-facing name")
    return name


def _text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def model_output(answer: SyscallAnswer) -> str:
    """What the model reads back for a governed call (JSON text).

    A completed call is its result. Everything else is an object with a ``status``; an
    uncertain outcome says, in so many words, not to retry — a retry would be a new call
    id, hence a new decision, and could repeat the effect."""
    if isinstance(answer, ConfirmationRequired):  # never rendered: it is an interruption
        raise TypeError("a confirmation_required answer is not a tool output")
    if isinstance(answer, Refused):
        if answer.reason in _UNCERTAIN_REFUSALS:
            return _text(
                {"status": "uncertain", "reason": answer.reason, "instruction": DO_NOT_RETRY}
            )
        return _text(
            {
                "status": "refused",
                "reason": answer.reason,
                "detail": answer.detail,
                "instruction": "ARVIS refused this call and nothing ran. Do not repeat it "
                "unchanged.",
            }
        )
    problem = answer.problem
    if answer.uncertain:
        return _text(
            {
                "status": "uncertain",
                "boundary": answer.boundary,
                "detail": (problem or {}).get("detail"),
                "instruction": DO_NOT_RETRY,
            }
        )
    if answer.boundary is Boundary.EFFECT_COMPLETED:
        return _text(answer.result) if problem is None else _text({"status": "problem", **problem})
    if answer.boundary is Boundary.EFFECT_NOT_STARTED:
        return _text(
            {
                "status": "not_started",
                "problem": problem,
                "instruction": "Nothing happened. The call may be made again once the "
                "problem is fixed.",
            }
        )
    advice = (
        "The tool suggests trying again."
        if (problem or {}).get("retryable") is True
        else "Do not retry it unchanged."
    )
    return _text({"status": "failed", "problem": problem, "instruction": advice})


def invalid_arguments(detail: str) -> str:
    """The output for arguments ARVIS refused as a request (nothing ran)."""
    return _text(
        {
            "status": "invalid_arguments",
            "detail": detail,
            "instruction": "Nothing ran. Call the tool again with arguments that match its schema.",
        }
    )
