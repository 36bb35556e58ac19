"""``[slack]``: validated at start-up, secrets from the environment and never shown."""

from __future__ import annotations

from typing import Any

import pytest

from arvis.domain.errors import ConfigurationError
from arvis.slack.config import load_slack

ENV = {"ARVIS_SLACK_BOT_TOKEN": "xoxb-secret-token", "ARVIS_SLACK_SIGNING_SECRET": "s" * 32}
USERS = {"U0ALICE": {"tenant": "acme", "principal": "alice", "groups": ["leads"]}}


def _raw(**extra: Any) -> dict[str, Any]:
    return {"channel": "C0APPROVALS", "users": USERS, **extra}


def test_no_section_no_slack() -> None:
    assert load_slack({}, ENV) is None


def test_a_slack_user_is_an_approver_by_its_id_only() -> None:
    slack = load_slack(_raw(), ENV)
    assert slack is not None
    alice = slack.approver("U0ALICE")
    assert alice is not None
    assert (alice.tenant_id, alice.principal_id, alice.method, alice.key_id) == (
        "acme",
        "alice",
        "slack",
        "U0ALICE",
    )
    assert alice.roles == ("approver",)
    assert alice.groups == ("leads",)
    assert slack.approver("alice") is None
    assert slack.approver("U0BOB") is None


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({}, "ARVIS_SLACK_BOT_TOKEN"),
        ({"ARVIS_SLACK_BOT_TOKEN": "xoxb-1-token"}, "ARVIS_SLACK_SIGNING_SECRET"),
        ({**ENV, "ARVIS_SLACK_SIGNING_SECRET": "short"}, "ARVIS_SLACK_SIGNING_SECRET"),
    ],
)
def test_a_missing_or_short_secret_stops_start_up_naming_the_variable(
    environ: dict[str, str], names: str
) -> None:
    with pytest.raises(ConfigurationError, match=names) as raised:
        load_slack(_raw(), environ)
    assert "short" not in str(raised.value)  # never the value


@pytest.mark.parametrize(
    "raw",
    [
        {"users": USERS},  # no channel
        _raw(users={"alice": {"tenant": "acme", "principal": "alice"}}),  # a name, not an id
        _raw(api_url="ftp://slack.example/"),
        _raw(tolerance_s=3600),  # Slack's own verifier refuses past five minutes
        _raw(surprise=True),
    ],
)
def test_a_wrong_section_stops_start_up(raw: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match=r"\[slack\]"):
        load_slack(raw, ENV)


def test_the_secrets_are_never_in_its_repr() -> None:
    slack = load_slack(_raw(), ENV)
    assert "xoxb" not in repr(slack)
    assert "s" * 32 not in repr(slack)
