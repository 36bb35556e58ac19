"""The arvis.toml in docs/configuration.md is a working configuration."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import httpx
import pytest

from arvis.config import FileConfig
from arvis.deployment import parse_audit_config
from arvis.domain.errors import ConfigurationError
from arvis.evidence.setup import parse_checkpoints_config
from arvis.evidence.witness import parse_witness_config
from arvis.lifecycle.consent.notify import load_notifications
from arvis.lifecycle.consent.reconcile import parse_reconcile_config
from arvis.lifecycle.policy.budgets import parse_budgets_config
from arvis.lifecycle.policy.policy import parse_confirmations_config, parse_policy_config
from arvis.providers.config import load_provider_config
from arvis.slack.config import load_slack
from arvis.tools.registry import ToolHost, parse_tools_config

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def _documented() -> FileConfig:
    block = re.search(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    return FileConfig.model_validate(tomllib.loads(block.group(1)))


def test_the_documented_arvis_toml_validates_section_by_section() -> None:
    config = _documented()
    tools = parse_tools_config(config.tools)
    policy = parse_policy_config(config.policy)
    assert tools.http[0].name == "tickets.create"
    assert policy.version == "2026-11-30"
    assert policy.tenants["acme"].allow_capabilities == ["process.execute"]
    assert policy.engine == "rules"
    budgets = parse_budgets_config(config.budgets)
    assert [(b.name, b.field, b.scope) for b in budgets] == [
        ("charges-per-principal", None, ["principal"]),
        ("daily-spend", "amount", []),
    ]
    assert parse_confirmations_config(config.confirmations).ttl_s == 86400
    assert parse_confirmations_config(config.confirmations).allow_self_approval is False
    audit = parse_audit_config(config.audit)
    assert audit.sink is None
    assert parse_checkpoints_config(audit.checkpoints).every == 100
    witness = parse_witness_config(audit.witness)
    assert witness is not None
    assert (witness.kind, witness.max_bytes) == ("file", 64 * 1024 * 1024)
    assert load_provider_config(config.provider).model == "gpt-4.1-mini"
    terms = policy.tenants["acme"].approvals["files.append"]
    assert (terms.approvers, terms.quorum, terms.ttl_s) == (("payments-leads",), 2, 3600)
    assert parse_reconcile_config(config.reconcile).max_asks == 5
    notify = load_notifications(config.notify, {"ARVIS_WEBHOOK_SECRET": "x" * 32})
    assert [hook.config.name for hook in notify.webhooks] == ["approvals-chat"]
    slack = load_slack(
        config.slack,
        {"ARVIS_SLACK_BOT_TOKEN": "xoxb-1-token", "ARVIS_SLACK_SIGNING_SECRET": "s" * 32},
    )
    assert slack is not None
    approver = slack.approver("U0123ABCDEF")
    assert approver is not None
    assert (approver.principal_id, approver.groups) == ("alice", ("payments-leads",))
    assert tools.http[0].reconcile_url is not None
    assert tools.http[0].not_started_statuses == [422]


async def test_the_documented_remote_tool_is_built_with_its_definition(tmp_path: Path) -> None:
    from arvis.tools.registry import build_tool_set

    config = _documented()
    unfactoried = {**config.tools, "factories": []}
    async with httpx.AsyncClient() as http:
        tools = build_tool_set(unfactoried, ToolHost(sandbox_dir=tmp_path, http=http))
    names = {tool.name for tool in tools}
    assert {"tickets.create", "echo", "files.append"} <= names


@pytest.mark.parametrize("ttl", [0, -5, "soon"])
def test_a_bad_confirmation_ttl_stops_start_up_naming_it(ttl: object) -> None:
    with pytest.raises(ConfigurationError, match=r"\[confirmations\] ttl_s"):
        parse_confirmations_config({"ttl_s": ttl})
