"""The Kernel: one running ARVIS instance, as the composition root wired it.

Entry points (the API, ``/mcp``, the console, the CLI) get everything from a
:class:`Kernel` and build nothing themselves. It exposes services — the governed
path (:class:`Lifecycle`), API keys, console sessions, the notification outbox, the
store's health and counts, bundle export — never the store's internals. It is built,
every adapter once and eagerly, by :func:`arvis.bootstrap.build_kernel`; this module
is its life: start (lease, recovery, chores) and graceful close.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

from arvis.config import FileConfig, Settings
from arvis.domain.ids import InstanceId
from arvis.evidence.export import BundleExporter
from arvis.identity.extraction import Authenticator
from arvis.lifecycle.chores import Chore, Chores
from arvis.lifecycle.consent.reconcile import Reconciler
from arvis.lifecycle.consent.resolution import ResolutionService
from arvis.lifecycle.consent.service import ConsentService
from arvis.lifecycle.evidence.checkpoints import Checkpointer
from arvis.lifecycle.evidence.verify import EvidenceService
from arvis.lifecycle.evidence.witnessing import WitnessFeed
from arvis.lifecycle.lease import InstanceLease
from arvis.lifecycle.policy.budget_report import BudgetReports
from arvis.lifecycle.policy.policy import ToolPolicy
from arvis.lifecycle.recovery import RecoveryRuntime, RecoverySweeper
from arvis.lifecycle.replay import ReplayService
from arvis.lifecycle.syscalls import SyscallHandler
from arvis.store.database import PgStore
from arvis.store.keycache import RevocationListener
from arvis.store.keys import PgKeyStore
from arvis.store.outbox import PgOutbox
from arvis.store.sessions import PgSessionStore
from arvis.store.stats import PgStats
from arvis.tools.plans import StaticToolPlanSource
from arvis.webhooks.deliverer import NotificationDeliverer

if TYPE_CHECKING:
    from arvis.slack.service import SlackApprovals
    from arvis.telemetry.tracing import Tracing
    from arvis.tools.mcp.pool import McpUpstreams


@dataclass
class Lifecycle:
    """The governed path, wired: what a syscall, an approver and an auditor use."""

    plans: StaticToolPlanSource
    handler: SyscallHandler
    consent: ConsentService
    replay: ReplayService
    evidence: EvidenceService
    """The one verification of a run: the API's verify, ``arvis verify``, the console's
    run page and replay all call it."""
    policy: ToolPolicy
    lease: InstanceLease
    """This process's lease; the handler admits only while it is held (DESIGN §6)."""
    sweeper: RecoverySweeper
    resolutions: ResolutionService
    """Resolving uncertain attempts (issue 16)."""
    reconciler: Reconciler
    budgets: BudgetReports
    """The ``[[budgets]]`` admission charges, and their use (``GET /v1/budgets``)."""
    witness_feed: WitnessFeed | None = None
    """Hands every entry this process appends to the witness (issue 23); None: no witness."""


@dataclass
class Resources:
    """What a kernel holds open and closes last: the store's pools, the tools' HTTP
    client and the upstream MCP sessions."""

    store: PgStore
    http: httpx.AsyncClient
    upstreams: McpUpstreams

    async def aclose(self) -> None:
        await self.upstreams.aclose()
        await self.http.aclose()
        await self.store.close()


@dataclass
class Kernel:
    """Everything a running ARVIS instance needs, wired once."""

    settings: Settings
    file_config: FileConfig
    lifecycle: Lifecycle
    instance_id: InstanceId
    keys: PgKeyStore
    """API keys of every tenant; ``authenticated`` is the one check of a bearer key."""
    identities: Authenticator
    """The one identity extraction (API keys, JWTs of ``[[auth.oidc]]`` issuers, an agent
    acting for a person) every entry point authenticates with."""
    console_sessions: PgSessionStore
    """Operator console sessions (``/console``), each tied to a live API key."""
    outbox: PgOutbox
    """The notification outbox (``arvis notify``), which ``deliverer`` posts."""
    stats: PgStats
    """The store's readiness and the counts ``/metrics`` shows."""
    bundles: BundleExporter
    """Audit bundles of runs (``arvis export``)."""
    resources: Resources
    deliverer: NotificationDeliverer
    """Posts the notification outbox to the declared webhooks (issue 16)."""
    public_url: str
    """The deployment's public address, as configured (``[notify] base_url``; its
    default, ``http://localhost:8000``, is the quick start's own): where links a
    person is shown point."""
    checkpointer: Checkpointer | None = None
    """Signs run heads off the governed path; None without a signing key."""
    tracing: Tracing | None = None
    """Tracing of syscalls (``[telemetry]``); None when it is off."""
    recovery: RecoveryRuntime | None = None
    slack: SlackApprovals | None = None
    """Approvals in Slack (``[slack]``); None when the section is absent."""
    chores: Chores = field(default_factory=Chores)
    """The kernel's own periodic work: the expiry sweep, the deliverer, the idle checkpointer."""
    key_listener: RevocationListener | None = None
    """Listens for key revocations while the kernel runs: only then are keys cached."""

    async def start(self) -> None:
        """Claim this process's lease, settle what earlier lives left behind, and
        keep beating and sweeping (DESIGN §6). Nothing is admitted before this."""
        self.key_listener = self.keys.listener()
        await self.key_listener.start()
        chores: list[Chore] = [(self.settings.sweep_interval_s, self.lifecycle.consent.expire_due)]
        # With no webhook and no other destination (Slack) there is nobody to deliver to:
        # the outbox is not polled (its events wait, PENDING, for one declared later).
        if self.deliverer.has_targets:
            interval_s = self.deliverer.notifications.config.interval_s
            chores.append((interval_s, self.deliverer.deliver_once))
        if self.checkpointer is not None and self.checkpointer.policy.idle_s:
            idle_s = self.checkpointer.policy.idle_s
            chores.append((max(0.1, idle_s / 2), self.checkpointer.checkpoint_idle))
        self.recovery = RecoveryRuntime(
            self.lifecycle.lease,
            self.lifecycle.sweeper,
            sweep_interval_s=self.settings.sweep_interval_s,
        )
        await self.recovery.start()
        self.chores = Chores(chores)
        self.chores.start()

    async def close(self) -> None:
        """Graceful shutdown: stop admitting, let in-flight syscalls finish and
        journal within the grace period, then release the lease."""
        handler = self.lifecycle.handler
        handler.stop_admitting()
        await handler.drain(self.settings.shutdown_grace_s)
        await self.chores.stop()
        if self.recovery is not None:
            await self.recovery.stop()
        if self.checkpointer is not None:
            # The runs this process appended to are signed before it goes.
            await self.checkpointer.flush()
        feed = self.lifecycle.witness_feed
        if feed is not None:
            # What the witness has not taken yet is logged by position: verify will
            # show those entries as not witnessed.
            await feed.drain(self.settings.shutdown_grace_s)
            feed.abandon()
        await self.keys.settle_touches()
        if self.key_listener is not None:
            await self.key_listener.stop()
        await self.resources.aclose()
        if self.tracing is not None:
            # Flushing may wait on the collector: never on the event loop.
            await asyncio.to_thread(self.tracing.shutdown)
