"""The Slack messages: a consent request with its Approve/Deny buttons, and the same
message once decided. Block Kit JSON, built from the confirmation ARVIS recorded and the
policy that asked for it.

Every text from outside ARVIS's own words (principals, tool names, policy ids and
reasons, the arguments) is escaped as Slack asks (``&``, ``<``, ``>``), so none of it
can become a mention or a link.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from arvis.domain.journal import STALE_REASON
from arvis.domain.states import ConfirmationState
from arvis.lifecycle.records import Approval, ConfirmationRecord

APPROVE, DENY = "arvis_approve", "arvis_deny"
"""The buttons' ``action_id``s."""
METADATA_EVENT = "arvis_consent_request"
"""The posted message's metadata event type: how ARVIS finds a post whose answer was lost."""
_MAX_ARGUMENTS = 2500  # a section's text is limited to 3000 characters
_APPROVED = (ConfirmationState.APPROVED, ConfirmationState.RESERVED, ConfirmationState.CONSUMED)


def escaped(text: str) -> str:
    """``text`` as Slack's mrkdwn shows it literally."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    return "`" + escaped(text).replace("`", "'") + "`"


def button_value(record: ConfirmationRecord) -> str:
    """What a button carries back: the tenant and the confirmation, nothing else."""
    return json.dumps({"t": record.tenant_id, "c": record.confirmation_id}, separators=(",", ":"))


def metadata(record: ConfirmationRecord) -> dict[str, Any]:
    """The posted message's metadata: which consent, of which round, it asks."""
    payload = {"tenant_id": record.tenant_id, "confirmation_id": record.confirmation_id}
    return {"event_type": METADATA_EVENT, "event_payload": {**payload, "round": record.round}}


def asker(record: ConfirmationRecord) -> str:
    """Who asks: the principal, or ``agent X for Y`` when an agent asked for a person."""
    actor = record.requested_actor
    if actor is None:
        return _code(record.requested_by)
    return f"agent {_code(actor)} for {_code(record.requested_by)}"


def _asker_text(record: ConfirmationRecord) -> str:
    actor = record.requested_actor
    return record.requested_by if actor is None else f"agent {actor} for {record.requested_by}"


def _arguments(payload: Any) -> str:
    text = json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True)
    if len(text) > _MAX_ARGUMENTS:
        text = text[:_MAX_ARGUMENTS] + "\n… (cut; the whole payload is on the approval page)"
    return "```" + escaped(text).replace("```", "'''") + "```"


def _terms(record: ConfirmationRecord) -> str:
    groups = " or ".join(record.approver_groups) if record.approver_groups else "any approver"
    return escaped(
        f"ARVIS's policy asks consent for `{record.tool}`: {groups}, "
        f"{record.quorum} distinct approval(s)"
    )


def _policy(record: ConfirmationRecord) -> str:
    """Which policy rule demanded the consent, and why."""
    policy = record.policy
    digest = _code((record.policy_digest or "")[:12] or "-")
    if policy is None:
        return f"Policy {digest} (which rule asked was not recorded: asked before ARVIS kept it)"
    rules = ", ".join(_code(rule) for rule in policy.policy_ids) or "no rule id recorded"
    why = f": {escaped(policy.reason)}" if policy.reason else ""
    return f"Policy {rules} ({escaped(policy.engine)} {digest}){why}"


def _facts(record: ConfirmationRecord) -> list[dict[str, Any]]:
    fields = [
        ("Asked by", asker(record)),
        ("Tool", _code(record.tool)),
        ("Run", _code(record.run_id)),
        ("Causal id", _code(record.causal_id)),
        ("Confirmation", _code(record.confirmation_id)),
        ("Expires", _code(record.expires_at.isoformat(timespec="seconds"))),
    ]
    return [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": f"*Consent asked* ({escaped(record.tool)})"},
        },
        {
            "type": "section",
            "fields": [{"type": "mrkdwn", "text": f"*{name}*\n{val}"} for name, val in fields],
        },
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": _terms(record)},
                {"type": "mrkdwn", "text": _policy(record)},
            ],
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": _arguments(record.payload)}},
    ]


def _buttons(record: ConfirmationRecord) -> dict[str, Any]:
    value = button_value(record)
    return {
        "type": "actions",
        "block_id": "arvis_decision",
        "elements": [
            {
                "type": "button",
                "action_id": APPROVE,
                "style": "primary",
                "text": {"type": "plain_text", "text": "Approve"},
                "value": value,
            },
            {
                "type": "button",
                "action_id": DENY,
                "style": "danger",
                "text": {"type": "plain_text", "text": "Deny"},
                "value": value,
            },
        ],
    }


def request_message(record: ConfirmationRecord) -> tuple[str, list[dict[str, Any]]]:
    """The text (notifications, screen readers) and blocks of a consent request."""
    text = f"{_asker_text(record)} asks consent for {record.tool} (run {record.run_id})"
    return escaped(text), [*_facts(record), _buttons(record)]


def _approver(approval: Approval) -> str:
    return escaped(f"{approval.principal_id} ({approval.auth_method}:{approval.key_id or '-'})")


def _at(when: datetime | None) -> str:
    return "" if when is None else f" at {when.isoformat(timespec='seconds')}"


def outcome_line(record: ConfirmationRecord) -> str:
    """The state, and who decided: every approver, or who denied and why, or the expiry."""
    state, approvals = record.state, [_approver(a) for a in record.approvals]
    if state is ConfirmationState.PENDING:
        if not approvals:
            return "*PENDING* — no approval yet"
        more = record.quorum - len(approvals)
        return (
            f"*PENDING* — {len(approvals)} of {record.quorum} approvals: "
            f"{', '.join(approvals)}; waiting for {more} more"
        )
    reason = f": “{escaped(record.decision_reason)}”" if record.decision_reason else ""
    when = _at(record.decided_at)
    if state in _APPROVED:
        who = ", ".join(approvals) or escaped(record.decided_by or "-")
        return f"*{state.value}* — approved by {who}{when}"
    if state is ConfirmationState.DENIED:
        return f"*DENIED* — denied by {escaped(record.decided_by or '-')}{when}{reason}"
    if record.decision_reason == STALE_REASON:
        return "*EXPIRED* — the tool or the policy changed since it was approved: ask again"
    return f"*EXPIRED* — nobody decided before it expired{_at(record.expires_at)}"


def outcome_message(record: ConfirmationRecord) -> tuple[str, list[dict[str, Any]]]:
    """The message as the confirmation now stands: the same facts, the state and who
    decided; the buttons remain only while it waits (a quorum still needs approvals)."""
    blocks = [
        *_facts(record),
        {"type": "section", "text": {"type": "mrkdwn", "text": outcome_line(record)}},
    ]
    if record.state is ConfirmationState.PENDING:
        blocks.append(_buttons(record))
    text = f"{record.tool} (run {record.run_id}): {record.state.value}"
    return escaped(text), blocks
