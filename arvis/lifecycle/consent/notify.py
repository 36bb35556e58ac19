"""Notifications (issue 16): signed webhooks from a durable outbox — the settings, the
signature and the outbox's port; the deliverer that posts them is an adapter.

```toml
[notify]
base_url = "https://arvis.example.com"     # links in events point here
egress_hosts = ["hooks.example.com"]       # the only hosts webhooks may reach

[[notify.webhooks]]
name = "approvals-chat"
url = "https://hooks.example.com/arvis"
secret_env = "ARVIS_WEBHOOK_SECRET"        # the HMAC key, read from the environment
events = ["confirmation.requested"]         # optional: default every event
tenants = ["acme"]                          # optional: default every tenant
```

**The outbox.** Events are rows of ``notify_outbox``, written by triggers in the
transaction of the fact they report (``arvis/store/sql/arvis_notify.sql``): a consent
asked (``confirmation.requested``), approved, denied or expired
(``confirmation.approved`` / ``.denied`` / ``.expired``), an uncertain outcome
(``effect.uncertain``), a resolution (``effect.resolved``). A syscall never waits for
a webhook: the deliverer (:mod:`arvis.webhooks.deliverer`) runs in the background,
claims due rows with a conditional update (moving their next attempt on, so no
transaction is open while it posts; it runs only where webhooks are declared), posts
each to every webhook that wants it and has not acknowledged it, and marks it
delivered, or retries with exponential backoff; after
``max_attempts`` the row is ``DEAD``, visible to operators (``arvis notify list``).
A receiver that is down loses nothing; it may get an event more than once, always
with the same id (``ARVIS-Event-Id``, also ``Idempotency-Key``): dedupe on it.

**The signature.** ``ARVIS-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
"<t>." + body)>``; :func:`verify_signature` checks it, and refuses a timestamp outside
the tolerance (a replayed old delivery). The secret is never logged or shown.

**Egress.** A webhook's URL is checked like an HTTP tool's endpoint (one unambiguous
http(s) URL, no userinfo) and its host must be on ``egress_hosts``, at start-up and at
every delivery; redirects are never followed.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arvis.domain.egress import egress_host, host_allowed, normalised_patterns
from arvis.domain.errors import ArvisError, ConfigurationError
from arvis.domain.sections import environment_secret, parse_section
from arvis.tools.http import Endpoint

log = logging.getLogger(__name__)

EVENT_TYPES = (
    "confirmation.requested",
    "confirmation.approved",
    "confirmation.denied",
    "confirmation.expired",
    "effect.uncertain",
    "effect.resolved",
)
SIGNATURE_HEADER = "ARVIS-Signature"
_SIGNATURE = re.compile(r"^t=(\d{1,12}),v1=([0-9a-f]{64})$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MIN_SECRET_CHARS = 16


class WebhookConfig(BaseModel):
    """One ``[[notify.webhooks]]`` entry."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    url: Endpoint
    secret_env: str = Field(pattern=_ENV_NAME.pattern)
    """The environment variable that holds the HMAC secret (never the secret itself)."""
    events: list[str] | None = None
    tenants: list[str] | None = None
    timeout_s: float = Field(default=5.0, gt=0, le=60)

    @field_validator("events")
    @classmethod
    def _known(cls, events: list[str] | None) -> list[str] | None:
        for event in events or ():
            if event not in EVENT_TYPES:
                raise ValueError(f"{event!r} is not an event type ({', '.join(EVENT_TYPES)})")
        return events

    def wants(self, event_type: str, tenant_id: str) -> bool:
        return (self.events is None or event_type in self.events) and (
            self.tenants is None or tenant_id in self.tenants
        )


class NotifyConfig(BaseModel):
    """The ``[notify]`` section."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = "http://localhost:8000"
    egress_hosts: list[str] = Field(default_factory=list)
    webhooks: list[WebhookConfig] = Field(default_factory=list)
    max_attempts: int = Field(default=12, ge=1, le=100)
    backoff_s: float = Field(default=5.0, gt=0, le=3600)
    """The wait after the first failed delivery; doubled each time, up to max_backoff_s."""
    max_backoff_s: float = Field(default=3600.0, gt=0, le=24 * 3600)
    interval_s: float = Field(default=1.0, ge=0.05, le=600)
    """How often the deliverer looks for due events."""


@dataclass(frozen=True, slots=True)
class Webhook:
    """A webhook with its secret, read from the environment at start-up."""

    config: WebhookConfig
    secret: bytes

    def __repr__(self) -> str:  # never the secret
        return f"Webhook({self.config.name!r})"


@dataclass(frozen=True, slots=True)
class Notifications:
    config: NotifyConfig
    webhooks: tuple[Webhook, ...]


def load_notifications(raw: Mapping[str, Any], environ: Mapping[str, str]) -> Notifications:
    """Validate ``[notify]`` and read each webhook's secret; a problem stops start-up
    with one line naming the webhook and the variable (never a value)."""
    config = parse_section(NotifyConfig, raw, "[notify]")
    patterns = normalised_patterns(config.egress_hosts)
    webhooks = []
    for hook in config.webhooks:
        host = egress_host(hook.url)
        if host is None or not host_allowed(host, patterns):
            raise ConfigurationError(
                f"[notify] webhook {hook.name!r}: its host is not on [notify] egress_hosts"
            )
        where = f"[notify] webhook {hook.name!r}"
        secret = environment_secret(environ, hook.secret_env, where, min_chars=MIN_SECRET_CHARS)
        webhooks.append(Webhook(hook, secret.encode()))
    return Notifications(config, tuple(webhooks))


# -- the signature -------------------------------------------------------------------


class SignatureInvalid(ArvisError):
    """A webhook delivery whose signature does not verify, or is outside the window."""

    code = "signature_invalid"


def sign(secret: bytes, body: bytes, timestamp: int) -> str:
    """The ``ARVIS-Signature`` value of ``body`` sent at ``timestamp`` (unix seconds)."""
    digest = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify_signature(
    secret: bytes, header: str, body: bytes, *, now: float, tolerance_s: float = 300.0
) -> None:
    """What a receiver runs on each delivery: raises :class:`SignatureInvalid` unless
    ``header`` signs ``body`` with ``secret`` and was made within ``tolerance_s``."""
    match = _SIGNATURE.fullmatch(header.strip())
    if match is None:
        raise SignatureInvalid("the signature header is malformed")
    timestamp = int(match.group(1))
    if abs(now - timestamp) > tolerance_s:
        raise SignatureInvalid("the signature's timestamp is outside the tolerance")
    expected = sign(secret, body, timestamp)
    if not hmac.compare_digest(expected.encode(), header.strip().encode()):
        raise SignatureInvalid("the signature does not match the body")


# -- the outbox and its deliverer ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    tenant_id: str
    event_id: str
    event_type: str
    subject: dict[str, Any]
    occurred_at: datetime
    attempts: int
    delivered_to: tuple[str, ...]


class Destination(Protocol):
    """Where outbox events go besides the webhooks (Slack: :mod:`arvis.slack`). Its
    ``name`` is what the outbox records as acknowledged; it never starts like a
    webhook's name."""

    @property
    def name(self) -> str: ...

    @property
    def timeout_s(self) -> float: ...

    def wants(self, event_type: str, tenant_id: str) -> bool: ...

    async def deliver(self, event: OutboxEvent) -> str | None:
        """None once delivered, else what went wrong (never a secret): retried later."""
        ...


class OutboxStore(Protocol):
    """The outbox's storage (``arvis.store.outbox.PgOutbox``)."""

    async def claim(self, *, limit: int, hold_s: float) -> list[OutboxEvent]:
        """Due PENDING events, each held for ``hold_s`` (its next attempt moved on)."""
        ...

    async def settle(
        self,
        event: OutboxEvent,
        *,
        delivered_to: Sequence[str],
        done: bool,
        retry_in_s: float,
        max_attempts: int,
        error: str | None,
    ) -> None:
        """Delivered everywhere (``done``), else one more failed attempt (DEAD after
        ``max_attempts``)."""
        ...
