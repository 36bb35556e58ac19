"""The webhook deliverer (issue 16): posts the outbox's events over HTTP, signed.

The rules — which webhooks want which events, the signature, the egress check, the
backoff — are the lifecycle's (:mod:`arvis.lifecycle.consent.notify`); this adapter
holds the loop that claims due events and the HTTP client that posts them. It runs in
the background, never in a syscall.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

from arvis.domain.canonical import canonical_bytes
from arvis.domain.clock import Clock
from arvis.domain.egress import egress_host, host_allowed, normalised_patterns
from arvis.lifecycle.consent.notify import (
    SIGNATURE_HEADER,
    Destination,
    Notifications,
    OutboxEvent,
    OutboxStore,
    Webhook,
    sign,
)

log = logging.getLogger(__name__)


@dataclass(eq=False)
class NotificationDeliverer:
    """Posts outbox events to the webhooks and the other ``destinations`` (Slack); runs
    in the background, never in a syscall."""

    outbox: OutboxStore
    notifications: Notifications
    http: httpx.AsyncClient
    clock: Clock
    destinations: Sequence[Destination] = ()
    _patterns: frozenset[str] = field(init=False)
    _targets: tuple[Destination, ...] = field(init=False)

    def __post_init__(self) -> None:
        self._patterns = normalised_patterns(self.notifications.config.egress_hosts)
        hooks = tuple(_WebhookTarget(self, hook) for hook in self.notifications.webhooks)
        self._targets = (*hooks, *self.destinations)

    @property
    def has_targets(self) -> bool:
        """Whether anything takes events: a webhook, or another destination (Slack)."""
        return bool(self._targets)

    async def deliver_once(self, *, limit: int = 50) -> int:
        """One pass: deliver what is due; answer how many events are done."""
        config = self.notifications.config
        # A claimed event is held while it is posted: longer than every webhook's
        # timeout, so a live deliverer's claim never lapses under it.
        hold_s = 30.0 + sum(target.timeout_s for target in self._targets)
        done_count = 0
        for event in await self.outbox.claim(limit=limit, hold_s=hold_s):
            delivered = list(event.delivered_to)
            errors: list[str] = []
            for target in self._targets:
                name = target.name
                if name in delivered or not target.wants(event.event_type, event.tenant_id):
                    continue
                error = await target.deliver(event)
                if error is None:
                    delivered.append(name)
                else:
                    errors.append(f"{name}: {error}")
            done = not errors
            await self.outbox.settle(
                event,
                delivered_to=delivered,
                done=done,
                retry_in_s=min(config.backoff_s * 2**event.attempts, config.max_backoff_s),
                max_attempts=config.max_attempts,
                error="; ".join(errors)[:500] or None,
            )
            done_count += done
        return done_count

    def body(self, event: OutboxEvent) -> bytes:
        """The event as posted: canonical JSON (what the signature covers)."""
        base = self.notifications.config.base_url.rstrip("/")
        subject = event.subject
        links: dict[str, str] = {}
        confirmation = subject.get("confirmation_id")
        if isinstance(confirmation, str):
            links = {
                "approval": f"{base}/console/confirmations/{confirmation}",
                "approve": f"{base}/v1/confirmations/{confirmation}/approve",
                "deny": f"{base}/v1/confirmations/{confirmation}/deny",
            }
        elif isinstance(subject.get("run_id"), str):
            links = {"journal": f"{base}/v1/runs/{subject['run_id']}/journal"}
            if event.event_type == "effect.uncertain" and subject.get("attempt") is not None:
                links["resolve"] = (
                    f"{base}/v1/runs/{subject['run_id']}/attempts/"
                    f"{subject['idempotency_key']}/{subject['attempt']}/resolve"
                )
        return canonical_bytes(
            {
                "id": event.event_id,
                "type": event.event_type,
                "tenant_id": event.tenant_id,
                "occurred_at": event.occurred_at.isoformat(),
                "data": subject,
                "links": links,
            }
        )

    async def _post(self, hook: Webhook, event: OutboxEvent) -> str | None:
        """None when the receiver acknowledged (2xx), else what went wrong (no secret)."""
        host = egress_host(hook.config.url)
        if host is None or not host_allowed(host, self._patterns):
            return "host not allowed"
        body = self.body(event)
        timestamp = int(self.clock.now().timestamp())
        headers = {
            "Content-Type": "application/json",
            "ARVIS-Event-Id": event.event_id,
            "ARVIS-Event-Type": event.event_type,
            "Idempotency-Key": event.event_id,
            SIGNATURE_HEADER: sign(hook.secret, body, timestamp),
        }
        try:
            response = await self.http.post(
                hook.config.url,
                content=body,
                headers=headers,
                timeout=hook.config.timeout_s,
                follow_redirects=False,
            )
        except httpx.HTTPError as exc:
            log.warning(
                "webhook %s: %s delivering %s", hook.config.name, type(exc).__name__, event.event_id
            )
            return type(exc).__name__
        if not 200 <= response.status_code < 300:
            log.warning(
                "webhook %s answered %s to %s",
                hook.config.name,
                response.status_code,
                event.event_id,
            )
            return f"HTTP {response.status_code}"
        return None


@dataclass(frozen=True, slots=True)
class _WebhookTarget:
    """A webhook as a destination of the deliverer."""

    deliverer: NotificationDeliverer
    hook: Webhook

    @property
    def name(self) -> str:
        return self.hook.config.name

    @property
    def timeout_s(self) -> float:
        return self.hook.config.timeout_s

    def wants(self, event_type: str, tenant_id: str) -> bool:
        return self.hook.config.wants(event_type, tenant_id)

    async def deliver(self, event: OutboxEvent) -> str | None:
        return await self.deliverer._post(self.hook, event)
