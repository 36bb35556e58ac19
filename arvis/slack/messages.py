"""The Slack messages: a consent request with its Approve/Deny buttons, and the same
message once decided. Block Kit JSON, built from the confirmation ARVIS recorded."""

from __future__ import annotations

import json
from typing import Any

from arvis.lifecycle.records import ConfirmationRecord

APPROVE, DENY = "arvis_approve", "arvis_deny"
"""The buttons' ``action_id``s."""
_MAX_ARGUMENTS = 2500  # a section's text is limited to 3000 characters


def button_value(record: ConfirmationRecord) -> str:
    """What a button carries back: the tenant and the confirmation, nothing else."""
    return json.dumps({"t": record.tenant_id, "c": record.confirmation_id}, separators=(",", ":"))


def _arguments(payload: Any) -> str:
    text = json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True)
    if len(text) > _MAX_ARGUMENTS:
        text = text[:_MAX_ARGUMENTS] + "\n… (cut; the whole payload is on the approval page)"
    return "```" + text.replace("```", "'''") + "```"


def _terms(record: ConfirmationRecord) -> str:
    groups = " or ".join(record.approver_groups) if record.approver_groups else "any approver"
    policy = (record.policy_digest or "")[:12] or "-"
    return (
        f"ARVIS's policy asks consent for `{record.tool}`: {groups}, "
        f"{record.quorum} distinct approval(s) (policy `{policy}`)"
    )


def _facts(record: ConfirmationRecord) -> list[dict[str, Any]]:
    fields = [
        ("Asked by", record.requested_by),
        ("Tool", record.tool),
        ("Run", record.run_id),
        ("Causal id", record.causal_id),
        ("Confirmation", record.confirmation_id),
        ("Expires", record.expires_at.isoformat(timespec="seconds")),
    ]
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*Consent asked* ({record.tool})"}},
        {
            "type": "section",
            "fields": [{"type": "mrkdwn", "text": f"*{name}*\n`{val}`"} for name, val in fields],
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _terms(record)}]},
        {"type": "section", "text": {"type": "mrkdwn", "text": _arguments(record.payload)}},
    ]


def request_message(record: ConfirmationRecord) -> tuple[str, list[dict[str, Any]]]:
    """The text (notifications, screen readers) and blocks of a consent request."""
    value = button_value(record)
    buttons = {
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
    text = f"{record.requested_by} asks consent for {record.tool} (run {record.run_id})"
    return text, [*_facts(record), buttons]


def outcome_message(record: ConfirmationRecord, note: str) -> tuple[str, list[dict[str, Any]]]:
    """The decided message: the same facts, the state, and who decided; buttons remain
    only while more approvals are needed (a quorum above one)."""
    approvals = ", ".join(a.principal_id for a in record.approvals) or "-"
    line = f"*{record.state.value}* — {note} (approvals: {approvals}; quorum {record.quorum})"
    blocks = [*_facts(record), {"type": "section", "text": {"type": "mrkdwn", "text": line}}]
    if record.state.value == "PENDING":
        blocks.append(request_message(record)[1][-1])
    text = f"{record.tool} (run {record.run_id}): {record.state.value}"
    return text, blocks
