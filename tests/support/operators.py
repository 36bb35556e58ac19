"""Compositions for issue 16's tests: approvers with groups, tools with reconcile hooks,
the notification deliverer on a harness's store, and a receiver that checks signatures."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from arvis.domain.definitions import ReplaySafety
from arvis.domain.identity import Identity
from arvis.domain.ids import PrincipalId, TenantId
from arvis.lifecycle.clock import SystemClock
from arvis.lifecycle.consent.notify import (
    SignatureInvalid,
    load_notifications,
    verify_signature,
)
from arvis.store.outbox import PgOutbox
from arvis.tools.base import Reconciliation, ToolInvocation
from arvis.webhooks.deliverer import NotificationDeliverer
from tests.support.httpserver import LocalHttpServer, Received
from tests.support.lifecycle import Harness, ScriptedTool, tool_definition


def approver(principal: str, *groups: str, tenant: str = "acme") -> Identity:
    """An approver key of ``tenant`` in ``groups``."""
    return Identity(
        tenant_id=TenantId(tenant),
        principal_id=PrincipalId(principal),
        method="api_key",
        key_id=f"k_{principal}",
        roles=("approver",),
        groups=groups,
    )


LEAD_A = approver("lead-a", "payments-leads")
LEAD_B = approver("lead-b", "payments-leads")
LEAD_C = approver("lead-c", "payments-leads")
OUTSIDER = approver("ops-outsider", "infra")
"""An approver of the right tenant whose key is in another group."""
FOREIGN_LEAD = approver("lead-a", "payments-leads", tenant="globex")


Answer = Callable[[ToolInvocation], Awaitable[Reconciliation | str]]


class ReconcilingTool(ScriptedTool):
    """A scripted unsafe tool that also offers ``reconcile``: it answers what
    :attr:`answer` says and remembers every invocation it was asked about."""

    def __init__(self, name: str = "ledger.move") -> None:
        super().__init__(tool_definition(name, replay_safety=ReplaySafety.UNSAFE))
        self.asked: list[ToolInvocation] = []
        self.answer: Answer = _unknown

    async def reconcile(self, invocation: ToolInvocation) -> Reconciliation | str:
        self.asked.append(invocation)
        return await self.answer(invocation)


async def _unknown(invocation: ToolInvocation) -> str:
    return "unknown"


def due_now(harness: Harness) -> None:
    """Make every open reconcile ask and every pending delivery due, skipping backoff."""
    harness.sql("UPDATE resolutions SET next_ask_at = now() WHERE boundary IS NULL")
    harness.sql("UPDATE notify_outbox SET next_attempt_at = now() WHERE state = 'PENDING'")


SECRET = "s3cret-webhook-key-for-tests"


def deliverer(
    harness: Harness, server: LocalHttpServer, http: httpx.AsyncClient, **notify: Any
) -> NotificationDeliverer:
    """The deliverer of a kernel, on the harness's store, posting to ``server``."""
    raw = {
        "base_url": "https://arvis.example.com",
        "egress_hosts": ["127.0.0.1"],
        "webhooks": [
            {
                "name": "receiver",
                "url": server.url("/hooks"),
                "secret_env": "TEST_WEBHOOK_SECRET",
                "tenants": ["hooks"],
            }
        ],
        **notify,
    }
    loaded = load_notifications(raw, {"TEST_WEBHOOK_SECRET": SECRET})
    return NotificationDeliverer(PgOutbox(harness.store.engine), loaded, http, SystemClock())


def verified(received: Received, secret: str = SECRET) -> dict[str, Any]:
    """The event a receiver accepts: its signature verified against its body."""
    header = received.headers.get("arvis-signature", "")
    verify_signature(secret.encode(), header, received.body, now=time.time())
    event: dict[str, Any] = received.json()
    assert received.headers["arvis-event-id"] == event["id"]
    return event


def forged(received: Received) -> bool:
    """Whether a receiver with another secret would refuse this delivery."""
    try:
        verified(received, "another-secret-entirely")
    except SignatureInvalid:
        return True
    return False


async def wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> asyncio.Event:
    """An event set once ``condition()`` holds (polled), for crash helpers."""
    event = asyncio.Event()

    async def poll() -> None:
        for _ in range(int(timeout_s / 0.01)):
            if condition():
                event.set()
                return
            await asyncio.sleep(0.01)

    asyncio.get_running_loop().create_task(poll())
    return event
