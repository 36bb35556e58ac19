"""The composition root: settings in, wired kernel out.

Routes and the CLI get everything from the :class:`Kernel`; they never build
their own pieces. Tests compose the same lifecycle with :func:`compose_lifecycle`.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

import httpx
from pydantic import BaseModel, ConfigDict, Field

from arvis.config import (
    Environment,
    FileConfig,
    Settings,
    load_file_config,
    load_object,
    load_settings,
)
from arvis.domain.clock import Clock
from arvis.domain.errors import ArvisError, ConfigurationError
from arvis.domain.ids import InstanceId
from arvis.domain.sections import parse_section
from arvis.evidence.setup import Evidence, load_evidence
from arvis.evidence.witness import FileWitness
from arvis.lifecycle.admission import AdmissionService
from arvis.lifecycle.authorization import ToolAuthorizationService
from arvis.lifecycle.clock import SystemClock
from arvis.lifecycle.consent.notify import load_notifications
from arvis.lifecycle.consent.reconcile import (
    Reconciler,
    ReconcileSettings,
    parse_reconcile_config,
)
from arvis.lifecycle.consent.resolution import ResolutionService
from arvis.lifecycle.consent.service import ConsentService
from arvis.lifecycle.effects import EffectDispatcher
from arvis.lifecycle.evidence.checkpoints import Checkpointer
from arvis.lifecycle.evidence.crosscheck import TrustedKey
from arvis.lifecycle.evidence.verify import EvidenceService, WitnessSource
from arvis.lifecycle.evidence.witnessing import Witness, WitnessFeed
from arvis.lifecycle.lease import InstanceLease
from arvis.lifecycle.policy.budget_report import BudgetReports
from arvis.lifecycle.policy.budgets import Budgets, parse_budgets_config
from arvis.lifecycle.policy.engines import build_policy
from arvis.lifecycle.policy.policy import (
    RulePolicy,
    ToolPolicy,
    parse_confirmations_config,
    parse_policy_config,
)
from arvis.lifecycle.ports import AuditSink, LifecycleStore
from arvis.lifecycle.receipts import IntentOutboxService
from arvis.lifecycle.recovery import RecoveryRuntime, RecoverySweeper
from arvis.lifecycle.replay import ReplayService
from arvis.lifecycle.settlement import Settlement
from arvis.lifecycle.syscalls import SyscallHandler, SyscallObserver, SyscallTracer
from arvis.store.audit import AuditHost, PgPlanStore
from arvis.store.checkpoints import PgCheckpoints
from arvis.store.database import PgStore, resolve_database
from arvis.store.keys import PgKeyStore
from arvis.store.outbox import PgOutbox
from arvis.store.sessions import PgSessionStore
from arvis.store.stats import audit_incomplete_runs, evidence_broken_runs
from arvis.telemetry import load_tracing, telemetry_settings
from arvis.tools.base import Tool
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.layers import DispatchDecorator
from arvis.tools.mcp.pool import McpUpstreams
from arvis.tools.plans import StaticToolPlanSource, ToolPlan
from arvis.tools.registry import ToolHost, build_tool_set, parse_tools_config
from arvis.webhooks.deliverer import NotificationDeliverer

if TYPE_CHECKING:
    from arvis.telemetry.tracing import Tracing

DEFAULT_CONFIRMATION_TTL = timedelta(hours=24)


@dataclass
class Lifecycle:
    """The governed path, wired: what a syscall, an approver and an auditor use."""

    plans: StaticToolPlanSource
    handler: SyscallHandler
    manager: ConsentService
    replay: ReplayService
    policy: ToolPolicy
    lease: InstanceLease
    """This process's lease; the handler admits only while it is held (DESIGN §6)."""
    sweeper: RecoverySweeper
    resolutions: ResolutionService
    """Resolving uncertain attempts (issue 16)."""
    reconciler: Reconciler
    budgets: BudgetReports
    witness_feed: WitnessFeed | None = None
    """Hands every entry this process appends to the witness (issue 23); None: no witness."""
    """The ``[[budgets]]`` admission charges, and their use (``GET /v1/budgets``)."""


def compose_lifecycle(
    *,
    store: PgStore,
    tools: Sequence[Tool],
    policy: ToolPolicy | None = None,
    clock: Clock | None = None,
    instance_id: InstanceId | None = None,
    decorators: Sequence[DispatchDecorator] = (),
    audit_sink: AuditSink | None = None,
    tool_timeout_s: float = 20.0,
    confirmation_ttl: timedelta = DEFAULT_CONFIRMATION_TTL,
    allow_self_approval: bool = False,
    lease_ttl_s: float = 15.0,
    production: bool = False,
    lifecycle_store: LifecycleStore | None = None,
    observer: SyscallObserver | None = None,
    reconcile: ReconcileSettings | None = None,
    tracer: SyscallTracer | None = None,
    budgets: Budgets | None = None,
    witness: Witness | None = None,
    served_run: str | None = None,
    trusted_key: TrustedKey | None = None,
    witness_source: WitnessSource | None = None,
) -> Lifecycle:
    """Wire the lifecycle of DESIGN §2 around a store and a tool set.

    ``lifecycle_store`` replaces ``store.ops`` as the lifecycle's store (a test
    composes a faulty one in). ``observer`` counts every syscall, its phases and its
    errors (the HTTP app's metrics), whichever entry point it came through;
    ``served_run`` is the only run a per-turn instance admits (``arvis serve-turn
    RUN``); ``tracer`` traces every syscall and its phases (``arvis.telemetry``).
    ``budgets`` are the ``[[budgets]]`` each admission is charged to (none by default).
    Nothing is admitted until the lease is claimed (``Kernel.start`` does, with the
    background heartbeat; a test composition claims it itself).
    ``witness`` is told of every intent before its admission and of every entry this
    process appends after it committed; ``trusted_key`` and ``witness_source`` (a witness
    that can be read back) are what verify, replay and deduplicated answers check a run
    with (issue 23).
    """
    clock = clock or SystemClock()
    instance_id = instance_id or new_instance_id()
    policy = policy or RulePolicy()
    budgets = budgets or Budgets()
    lifecycle_store = lifecycle_store or store.ops
    dispatcher = ToolDispatcher(tools, decorators=decorators, default_deadline_s=tool_timeout_s)
    plans = StaticToolPlanSource(dispatcher, store=PgPlanStore(store.engine))
    lease = InstanceLease(lifecycle_store, instance_id, lease_ttl_s)
    resolutions = ResolutionService(
        lifecycle_store,
        clock,
        allow_self_resolution=allow_self_approval,
        confirmation_ttl_s=confirmation_ttl.total_seconds(),
    )
    reconciler = Reconciler(lifecycle_store, plans, resolutions, reconcile)
    sweeper = RecoverySweeper(lifecycle_store, clock, reconciler=reconciler)
    evidence = EvidenceService(
        lifecycle_store,
        clock,
        key=trusted_key,
        witness=witness_source,
        flags=PgCheckpoints(store.engine),
    )
    feed = None
    if witness is not None:
        feed = WitnessFeed(witness)
        store.ops.append_observers.append(feed.note)
        # A verify first hands the witness what this process appended; a witness that
        # is failing does not hold it up for long (what is pending is within the grace).
        evidence.before_witness.append(lambda: feed.drain(1.0))
        evidence.pending.append(feed.pending_records)
    admission = AdmissionService(
        store=lifecycle_store,
        plans=plans,
        authorization=ToolAuthorizationService(policy, clock, budgets),
        outbox=IntentOutboxService(audit_sink, store.fingerprint, witness),
        clock=clock,
        confirmation_ttl_s=confirmation_ttl.total_seconds(),
        evidence=evidence,
    )
    handler = SyscallHandler(
        admission=admission,
        effects=EffectDispatcher(tool_timeout_s, lifecycle_store.mark_started),
        settlement=Settlement(store=lifecycle_store, clock=clock, attempts=5, sweeper=sweeper),
        lease=lease,
        clock=clock,
        production=production,
        observer=observer,
        tracer=tracer,
        served_run=served_run,
    )
    return Lifecycle(
        plans=plans,
        handler=handler,
        manager=ConsentService(lifecycle_store, clock, allow_self_approval=allow_self_approval),
        replay=ReplayService(lifecycle_store, evidence),
        policy=policy,
        lease=lease,
        sweeper=sweeper,
        resolutions=resolutions,
        reconciler=reconciler,
        budgets=BudgetReports(lifecycle_store, budgets, clock),
        witness_feed=feed,
    )


def new_instance_id() -> InstanceId:
    return InstanceId(f"{socket.gethostname()}:{uuid.uuid4().hex[:12]}")


@dataclass
class Kernel:
    """Everything a running ARVIS instance needs, wired once."""

    settings: Settings
    file_config: FileConfig
    store: PgStore
    lifecycle: Lifecycle
    http: httpx.AsyncClient
    instance_id: InstanceId
    recovery: RecoveryRuntime | None = None
    upstreams: McpUpstreams = field(default_factory=McpUpstreams.empty)
    """Sessions to the upstream MCP servers whose tools are in the plan."""
    tracing: Tracing | None = None
    """Tracing of syscalls (``[telemetry]``); None when it is off."""
    deliverer: NotificationDeliverer | None = None
    """Posts the notification outbox to the declared webhooks (issue 16)."""
    evidence: Evidence = field(default_factory=Evidence)
    """The signing key, trusted public key and witness (issue 19)."""
    checkpointer: Checkpointer | None = None
    """Signs run heads off the governed path; None without a signing key."""

    @functools.cached_property
    def checkpoints(self) -> PgCheckpoints:
        """Signed checkpoints of every run, on the same store."""
        return PgCheckpoints(self.store.engine)

    @functools.cached_property
    def keys(self) -> PgKeyStore:
        """API keys of every tenant, on the same store."""
        return PgKeyStore(self.store.engine, self.store.ops)

    @functools.cached_property
    def console_sessions(self) -> PgSessionStore:
        """Operator console sessions (``/console``), each tied to a live API key."""
        return PgSessionStore(self.store.engine)

    async def audit_incomplete_runs(self) -> int:
        """How many runs, over all tenants, are flagged audit-incomplete (``/metrics``)."""
        return await audit_incomplete_runs(self.store.engine)

    async def evidence_broken_runs(self) -> int:
        """How many runs, over all tenants, were found with broken evidence (``/metrics``)."""
        return await evidence_broken_runs(self.store.engine)

    async def start(self) -> None:
        """Claim this process's lease, settle what earlier lives left behind, and
        keep beating and sweeping (DESIGN §6). Nothing is admitted before this."""
        chores: list[tuple[float, Any]] = [
            (self.settings.sweep_interval_s, self.lifecycle.manager.expire_due)
        ]
        if self.deliverer is not None:
            interval = self.deliverer.notifications.config.interval_s
            chores.append((interval, self.deliverer.deliver_once))
        if self.checkpointer is not None and self.checkpointer.policy.idle_s:
            idle_s = self.checkpointer.policy.idle_s
            chores.append((max(0.1, idle_s / 2), self.checkpointer.checkpoint_idle))
        self.recovery = RecoveryRuntime(
            self.lifecycle.lease,
            self.lifecycle.sweeper,
            sweep_interval_s=self.settings.sweep_interval_s,
            chores=chores,
        )
        await self.recovery.start()

    async def close(self) -> None:
        """Graceful shutdown: stop admitting, let in-flight syscalls finish and
        journal within the grace period, then release the lease."""
        handler = self.lifecycle.handler
        handler.stop_admitting()
        await handler.drain(self.settings.shutdown_grace_s)
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
        await self.upstreams.aclose()
        await self.http.aclose()
        await self.store.close()
        if self.tracing is not None:
            # Flushing may wait on the collector: never on the event loop.
            await asyncio.to_thread(self.tracing.shutdown)


class AuditConfig(BaseModel):
    """The ``[audit]`` section: which :class:`AuditSink` records intents."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sink: str | None = None
    """``package.module:factory``, called with an :class:`AuditHost`; unset: the
    built-in PostgreSQL sink."""
    options: dict[str, Any] = Field(default_factory=dict)
    checkpoints: dict[str, Any] | None = None
    """``[audit.checkpoints]`` (arvis.evidence.setup.CheckpointsConfig)."""
    witness: dict[str, Any] | None = None
    """``[audit.witness]``: a built-in witness (arvis.evidence.witness.WitnessConfig)."""


def parse_audit_config(raw: Mapping[str, Any]) -> AuditConfig:
    return parse_section(AuditConfig, raw, "[audit]")


def load_audit_sink(config: AuditConfig, store_fingerprint: str) -> AuditSink | None:
    """The deployment's audit sink, or None for the built-in one (DESIGN §1)."""
    if config.sink is None:
        return None
    factory = load_object(config.sink, "audit")
    if not callable(factory):
        raise ConfigurationError(f"[audit] sink {config.sink!r} is not callable")
    host = AuditHost(store_fingerprint=store_fingerprint, options=config.options)
    try:
        sink = factory(host)
    except ArvisError:
        raise
    except Exception as exc:  # start-up boundary: the operator sees the text
        raise ConfigurationError(f"[audit] sink {config.sink!r} failed: {exc!r}") from exc
    if not callable(getattr(sink, "record", None)):
        raise ConfigurationError(f"[audit] sink {config.sink!r} returned no audit sink")
    return cast(AuditSink, sink)


@dataclass
class LoadedTools:
    """The declared tool set, and the upstream MCP sessions some of its tools use."""

    tools: list[Tool]
    upstreams: McpUpstreams

    async def aclose(self) -> None:
        await self.upstreams.aclose()


async def load_tools(
    settings: Settings,
    file_config: FileConfig,
    http: httpx.AsyncClient,
    *,
    tracing: Tracing | None = None,
) -> LoadedTools:
    """The declared tool set: application factories over built-in fallbacks.

    Upstream MCP servers are started and their tool lists read first, so their
    tools are pinned into the plan like any other; the caller closes them. With
    ``tracing``, every call to them carries the trace on in its ``_meta``.
    """
    config = parse_tools_config(file_config.tools)
    inject = None if tracing is None else tracing.inject
    policy = parse_policy_config(file_config.policy)
    scopes = [rules.egress_hosts for rules in (policy.default, *policy.tenants.values())]
    upstreams = await McpUpstreams.open(config.mcp, os.environ, inject=inject, egress_scopes=scopes)
    try:
        host = ToolHost(
            sandbox_dir=settings.sandbox_dir,
            http=http,
            environ=os.environ,
            mcp_tools=upstreams.tools,
        )
        return LoadedTools(build_tool_set(file_config.tools, host), upstreams)
    except BaseException:
        await upstreams.aclose()
        raise


async def declared_plan(settings: Settings, file_config: FileConfig | None = None) -> ToolPlan:
    """The tool plan ``arvis.toml`` declares, built and checked without a database.

    Its id is the one a served kernel leases. It is for listing and checking only:
    nothing is persisted, the HTTP client its tools were built with is closed, and
    upstream MCP servers are started only to read their tool lists.
    """
    file_config = file_config or load_file_config(settings)
    async with httpx.AsyncClient() as http:
        loaded = await load_tools(settings, file_config, http)
        try:
            dispatcher = ToolDispatcher(loaded.tools)
        finally:
            await loaded.aclose()
    return StaticToolPlanSource(dispatcher).current


async def check_deployment(settings: Settings) -> None:
    """Everything ``arvis.toml`` declares, built and checked, without a database.

    ``arvis serve`` runs this before it starts workers, so a contradictory tool or
    a broken section stops start-up with one line naming it, not a traceback.
    """
    file_config = load_file_config(settings)
    plan = await declared_plan(settings, file_config)
    build_policy(
        parse_policy_config(file_config.policy), settings.config_dir, plan.definitions.values()
    )
    parse_budgets_config(file_config.budgets)
    parse_confirmations_config(file_config.confirmations)
    parse_reconcile_config(file_config.reconcile)
    load_notifications(file_config.notify, os.environ)
    telemetry_settings(file_config.telemetry, os.environ)
    audit = parse_audit_config(file_config.audit)
    if audit.sink is not None:
        load_object(audit.sink, "audit")
    load_evidence(settings.signing_key_file, audit.checkpoints, audit.witness, settings.config_dir)
    if file_config.provider:
        from arvis.providers.config import load_provider_config

        load_provider_config(file_config.provider)


async def build_kernel(
    settings: Settings | None = None,
    *,
    observer: SyscallObserver | None = None,
    tracing: Tracing | None = None,
) -> Kernel:
    """Wire a kernel. Starts the embedded PostgreSQL when no URL is configured.

    A broken ``arvis.toml`` or a contradictory tool stops here, before anything
    is served. ``observer`` counts every syscall (the served app's metrics).
    ``tracing`` replaces the one ``[telemetry]`` and ``OTEL_*`` describe (a test
    hands in one on an in-memory exporter); the kernel shuts it down when it closes,
    or at once when building it fails.
    """
    settings = settings or load_settings()
    file_config = load_file_config(settings)
    tracing = tracing or load_tracing(file_config.telemetry, os.environ)
    # Every request of the tools' client carries the trace on (HTTP tools, and
    # whatever an application's tool sends with it).
    hooks = {} if tracing is None else {"request": [tracing.inject_request]}
    http = httpx.AsyncClient(timeout=settings.tool_timeout_s, event_hooks=hooks)
    loaded: LoadedTools | None = None
    try:
        policy_config = parse_policy_config(file_config.policy)
        budgets = Budgets(parse_budgets_config(file_config.budgets))
        confirmations = parse_confirmations_config(file_config.confirmations)
        reconcile = parse_reconcile_config(file_config.reconcile)
        notifications = load_notifications(file_config.notify, os.environ)
        audit = parse_audit_config(file_config.audit)
        evidence = load_evidence(
            settings.signing_key_file, audit.checkpoints, audit.witness, settings.config_dir, http
        )
        loaded = await load_tools(settings, file_config, http, tracing=tracing)
        # Loaded and validated once per process, against the plan the tools make.
        policy = build_policy(
            policy_config, settings.config_dir, (tool.definition for tool in loaded.tools)
        )
        target = resolve_database(settings.database_url, settings.data_dir)
        store = await PgStore.open(target.url)
    except BaseException:
        if loaded is not None:
            await loaded.aclose()
        await http.aclose()
        _shut(tracing)
        raise
    try:
        audit_sink = load_audit_sink(audit, store.fingerprint)
    except BaseException:
        await loaded.aclose()
        await http.aclose()
        await store.close()
        _shut(tracing)
        raise
    instance_id = InstanceId(settings.instance_id) if settings.instance_id else new_instance_id()
    lifecycle = compose_lifecycle(
        store=store,
        tools=loaded.tools,
        policy=policy,
        instance_id=instance_id,
        tool_timeout_s=settings.tool_timeout_s,
        audit_sink=audit_sink,
        confirmation_ttl=timedelta(seconds=confirmations.ttl_s),
        allow_self_approval=confirmations.allow_self_approval,
        lease_ttl_s=settings.lease_ttl_s,
        production=settings.env is Environment.PRODUCTION,
        observer=observer,
        reconcile=reconcile,
        tracer=tracing,
        budgets=budgets,
        witness=evidence.witness,
        served_run=settings.turn_run_id,
        trusted_key=evidence.public_key,
        witness_source=evidence.witness if isinstance(evidence.witness, FileWitness) else None,
    )
    checkpointer = None
    if evidence.signing_key is not None:
        checkpointer = Checkpointer(
            evidence.signing_key,
            PgCheckpoints(store.engine),
            lifecycle.handler.clock,
            evidence.policy,
            journal=store.ops,
            witness=evidence.witness,
        )
        store.ops.append_observers.append(checkpointer.note)
    deliverer = NotificationDeliverer(
        PgOutbox(store.ops), notifications, http, lifecycle.handler.clock
    )
    return Kernel(
        settings=settings,
        file_config=file_config,
        store=store,
        lifecycle=lifecycle,
        http=http,
        instance_id=instance_id,
        upstreams=loaded.upstreams,
        deliverer=deliverer,
        tracing=tracing,
        evidence=evidence,
        checkpointer=checkpointer,
    )


def _shut(tracing: Tracing | None) -> None:
    if tracing is not None:
        tracing.shutdown()
