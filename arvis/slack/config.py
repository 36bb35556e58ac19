"""The ``[slack]`` section of ``arvis.toml``: where consent requests are posted, the
secrets (by environment variable name), and which Slack users are which ARVIS approvers.

```toml
[slack]
channel = "C0123456789"                       # where consent requests are posted
bot_token_env = "ARVIS_SLACK_BOT_TOKEN"       # xoxb-…, read from the environment
signing_secret_env = "ARVIS_SLACK_SIGNING_SECRET"
tenants = ["acme"]                            # optional: default every tenant
team_id = "T0123456789"                       # optional: refuse clicks from another workspace

[slack.users]                                 # Slack user id → ARVIS approver (never a name)
U0123ABCDEF = { tenant = "acme", principal = "alice", groups = ["payments"] }
```
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.errors import ConfigurationError
from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId, TenantId
from arvis.domain.sections import environment_secret, parse_section

SLACK_API = "https://slack.com/api/"
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_SLACK_ID = r"^[A-Z0-9]{2,32}$"
_EVENTS = frozenset(
    {
        "confirmation.requested",
        "confirmation.approved",
        "confirmation.denied",
        "confirmation.expired",
    }
)


class SlackUser(BaseModel):
    """The ARVIS approver a Slack user is: tenant, principal and approver groups."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str = Field(min_length=1, max_length=128)
    principal: str = Field(min_length=1, max_length=256)
    groups: tuple[str, ...] = ()


class SlackConfig(BaseModel):
    """The ``[slack]`` section."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    channel: str = Field(pattern=_SLACK_ID)
    bot_token_env: str = Field(default="ARVIS_SLACK_BOT_TOKEN", pattern=_ENV_NAME)
    signing_secret_env: str = Field(default="ARVIS_SLACK_SIGNING_SECRET", pattern=_ENV_NAME)
    api_url: str = Field(default=SLACK_API, pattern=r"^https?://[^\s@]+/$")
    """Slack's Web API (a local stand-in in tests); must end with ``/``."""
    tenants: list[str] | None = None
    team_id: str | None = Field(default=None, pattern=_SLACK_ID)
    users: dict[str, SlackUser] = Field(default_factory=dict)
    tolerance_s: int = Field(default=300, ge=30, le=300)
    """How old a signed request may be (Slack's own verifier refuses past five minutes)."""
    max_body_bytes: int = Field(default=64 * 1024, ge=1024, le=1024 * 1024)
    timeout_s: float = Field(default=5.0, gt=0, le=30)

    def wants(self, event_type: str, tenant_id: str) -> bool:
        """A consent asked (posted), approved, denied or expired (its message updated)."""
        return event_type in _EVENTS and (self.tenants is None or tenant_id in self.tenants)


@dataclass(frozen=True, slots=True)
class Slack:
    """The section with its secrets, read from the environment at start-up."""

    config: SlackConfig
    bot_token: str
    signing_secret: str

    def __repr__(self) -> str:  # never the secrets
        return f"Slack(channel={self.config.channel!r})"

    def approver(self, user_id: str) -> Identity | None:
        """The ARVIS identity of the Slack user ``user_id``, by its id only; None when
        ``[slack.users]`` does not name it."""
        user = self.config.users.get(user_id)
        if user is None:
            return None
        return Identity(
            tenant_id=TenantId(user.tenant),
            principal_id=PrincipalId(user.principal),
            method="slack",
            key_id=user_id,
            roles=("approver",),
            groups=user.groups,
        )


def load_slack(raw: Mapping[str, Any], environ: Mapping[str, str]) -> Slack | None:
    """Validate ``[slack]`` and read its secrets; None when the section is absent. A
    problem stops start-up with one line naming the variable (never a value)."""
    if not raw:
        return None
    config = parse_section(SlackConfig, raw, "[slack]")
    if importlib.util.find_spec("slack_sdk") is None:
        raise ConfigurationError("[slack] needs Slack's SDK: pip install 'arvis[slack]'")
    for user_id in config.users:
        if not _is_slack_id(user_id):
            raise ConfigurationError(f"[slack] users: {user_id!r} is not a Slack user id")
    token = environment_secret(environ, config.bot_token_env, "[slack] bot token", min_chars=8)
    secret = environment_secret(environ, config.signing_secret_env, "[slack] signing secret")
    return Slack(config, token, secret)


def _is_slack_id(text: str) -> bool:
    return 2 <= len(text) <= 32 and text.isascii() and text.isalnum() and text.isupper()
