"""The composition root: settings in, wired kernel out.

Every adapter is built here, once, when the kernel is built — the store's pools,
the key and session stores, the outbox, checkpoints, the witness, the tools and
their upstream sessions — and handed to what uses it. Routes, ``/mcp``, the console
and the CLI get a :class:`arvis.kernel.Kernel` (or, for key administration,
:func:`administration`) and never build their own pieces. Tests compose the same
lifecycle with :func:`compose_lifecycle`. What ``arvis.toml`` declares is read and
checked by :mod:`arvis.deployment`; the kernel's life is :mod:`arvis.kernel`.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import httpx

from arvis.config import Environment, Settings, load_file_config, load_settings
from arvis.deployment import LoadedTools, load_audit_sink, load_tools, parse_audit_config
from arvis.domain.clock import Clock
from arvis.domain.ids import InstanceId
from arvis.domain.redaction import Redaction
from arvis.evidence.export import BundleExporter
from arvis.evidence.setup import load_evidence
from arvis.evidence.witness import FileWitness
from arvis.identity.config import parse_auth_config
from arvis.identity.extraction import Authenticator
from arvis.identity.tokens import load_token_verifier
from arvis.kernel import Kernel, Lifecycle, Resources
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
from arvis.lifecycle.records import JournalEntry
from arvis.lifecycle.recovery import RecoverySweeper
from arvis.lifecycle.replay import ReplayService
from arvis.lifecycle.settlement import Settlement
from arvis.lifecycle.syscalls import SyscallHandler, SyscallObserver, SyscallTracer
from arvis.slack.config import load_slack
from arvis.store.audit import PgPlanStore
from arvis.store.checkpoints import PgCheckpoints
from arvis.store.database import PgStore, resolve_database
from arvis.store.keys import PgKeyStore
from arvis.store.outbox import PgOutbox
from arvis.store.posted import PgPostedMessages
from arvis.store.sessions import PgSessionStore
from arvis.store.stats import PgStats
from arvis.telemetry import load_tracing
from arvis.tools.base import Tool
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.layers import DispatchDecorator
from arvis.tools.plans import StaticToolPlanSource
from arvis.webhooks.deliverer import NotificationDeliverer

if TYPE_CHECKING:
    from arvis.telemetry.tracing import Tracing

DEFAULT_CONFIRMATION_TTL = timedelta(hours=24)


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
    append_observers: Sequence[Callable[[JournalEntry], None]] = (),
    plan_store: PgPlanStore | None = None,
    checkpoints: PgCheckpoints | None = None,
    redaction: Redaction | None = None,
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
    with (issue 23). ``append_observers`` are told, with the witness, of every entry
    appended (the checkpointer): the one place the store learns who listens.
    ``plan_store`` and ``checkpoints`` are the kernel's (default: new ones on ``store``).
    ``redaction`` names the payload fields never stored in clear (``[journal] redact``).
    """
    clock = clock or SystemClock()
    instance_id = instance_id or new_instance_id()
    policy = policy or RulePolicy()
    budgets = budgets or Budgets()
    lifecycle_store = lifecycle_store or store.ops
    dispatcher = ToolDispatcher(tools, decorators=decorators, default_deadline_s=tool_timeout_s)
    plans = StaticToolPlanSource(dispatcher, store=plan_store or PgPlanStore(store.engine))
    lease = InstanceLease(lifecycle_store, instance_id, lease_ttl_s)
    resolutions = ResolutionService(
        lifecycle_store,
        clock,
        allow_self_resolution=allow_self_approval,
        confirmation_ttl_s=confirmation_ttl.total_seconds(),
    )
    reconciler = Reconciler(lifecycle_store, plans, resolutions, reconcile or ReconcileSettings())
    sweeper = RecoverySweeper(lifecycle_store, clock, reconciler=reconciler)
    feed = None if witness is None else WitnessFeed(witness)
    store.ops.append_observers.extend([*append_observers, *([] if feed is None else [feed.note])])
    evidence = EvidenceService(
        lifecycle_store,
        clock,
        key=trusted_key,
        witness=witness_source,
        flags=checkpoints or PgCheckpoints(store.engine),
        # A verify first hands the witness what this process appended; a witness that
        # is failing does not hold it up for long (what is pending is within the grace).
        before_witness=() if feed is None else (lambda: feed.drain(1.0),),
        pending=() if feed is None else (feed.pending_records,),
    )
    admission = AdmissionService(
        store=lifecycle_store,
        plans=plans,
        authorization=ToolAuthorizationService(policy, clock, budgets),
        outbox=IntentOutboxService(audit_sink, store.fingerprint, witness),
        clock=clock,
        confirmation_ttl_s=confirmation_ttl.total_seconds(),
        evidence=evidence,
        redaction=redaction or Redaction(),
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
        consent=ConsentService(lifecycle_store, clock, allow_self_approval=allow_self_approval),
        replay=ReplayService(lifecycle_store, evidence),
        evidence=evidence,
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
        slack = load_slack(file_config.slack, os.environ)
        audit = parse_audit_config(file_config.audit)
        redaction = Redaction.from_section(file_config.journal)
        auth = parse_auth_config(file_config.auth)
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
    clock = SystemClock()
    checkpoints, plan_store = PgCheckpoints(store.engine), PgPlanStore(store.engine)
    checkpointer = None
    if evidence.signing_key is not None:
        checkpointer = Checkpointer(
            evidence.signing_key,
            checkpoints,
            clock,
            evidence.policy,
            journal=store.ops,
            witness=evidence.witness,
        )
    lifecycle = compose_lifecycle(
        store=store,
        tools=loaded.tools,
        policy=policy,
        clock=clock,
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
        append_observers=() if checkpointer is None else (checkpointer.note,),
        plan_store=plan_store,
        checkpoints=checkpoints,
        redaction=redaction,
    )
    outbox = PgOutbox(store.engine)
    approvals = None
    if slack is not None:
        from arvis.slack.service import slack_approvals  # the optional extra's SDK

        posted = PgPostedMessages(store.engine)
        approvals = slack_approvals(slack, lifecycle.consent, posted, clock)
    destinations = () if approvals is None else (approvals.destination,)
    keys = PgKeyStore(store.engine, store.ops)
    return Kernel(
        settings=settings,
        file_config=file_config,
        lifecycle=lifecycle,
        instance_id=instance_id,
        keys=keys,
        identities=Authenticator(keys, load_token_verifier(auth, http)),
        console_sessions=PgSessionStore(store.engine),
        outbox=outbox,
        stats=PgStats(store.engine),
        bundles=BundleExporter(store.ops, plan_store, evidence.public_key, checkpointer),
        resources=Resources(store, http, loaded.upstreams),
        public_url=notifications.config.base_url,
        deliverer=NotificationDeliverer(outbox, notifications, http, clock, destinations),
        checkpointer=checkpointer,
        tracing=tracing,
        slack=approvals,
    )


@dataclass
class Administration:
    """What key administration needs, without a lifecycle: ``arvis keys`` and the quick
    start's demo keys, which run before (or beside) any served instance."""

    keys: PgKeyStore


@asynccontextmanager
async def administration(url: str) -> AsyncIterator[Administration]:
    """The store at ``url``, opened for administration and closed after."""
    store = await PgStore.open(url, pool_size=2)
    try:
        yield Administration(keys=PgKeyStore(store.engine, store.ops))
    finally:
        await store.close()


def _shut(tracing: Tracing | None) -> None:
    if tracing is not None:
        tracing.shutdown()
