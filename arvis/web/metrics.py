"""Prometheus metrics, one registry per app (tests build many apps in one process)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from arvis.lifecycle.evidence.witnessing import WitnessFeed
from arvis.lifecycle.results import SyscallResult

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ShadowDisagreements(Collector):
    """``arvis_policy_shadow_disagreements_total{kind}``: the shadow policy's own counts
    (arvis.lifecycle.policy.shadow), read at scrape time; nothing when no shadow runs."""

    def __init__(self) -> None:
        self.counts: Mapping[str, int] | None = None

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "arvis_policy_shadow_disagreements",
            "Calls on which the shadow policy's verdict differed from the enforced one, by kind",
            labels=("kind",),
        )
        for kind, count in sorted((self.counts or {}).items()):
            family.add_metric((kind,), count)
        yield family


class WitnessBacklog(Collector):
    """``arvis_witness_entries_pending`` and ``arvis_witness_entry_failures_total``: the
    entries this process appended that the witness has not taken yet, and the writes it
    refused (each retried), read from the feed at scrape time (issue 23)."""

    def __init__(self) -> None:
        self.feed: WitnessFeed | None = None

    def collect(self) -> Iterator[Metric]:
        if self.feed is None:
            return
        pending = GaugeMetricFamily(
            "arvis_witness_entries_pending",
            "Journal entries appended by this process and not yet taken by the witness",
        )
        pending.add_metric((), self.feed.pending)
        yield pending
        failures = CounterMetricFamily(
            "arvis_witness_entry_failures",
            "Writes of journal entries the witness refused (each retried)",
        )
        failures.add_metric((), self.feed.failures)
        yield failures


class ApiMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.syscalls = Counter(
            "arvis_syscalls",
            "tool.execute syscalls answered, by outcome and effect boundary",
            ("outcome", "boundary"),
            registry=self.registry,
        )
        self.syscall_errors = Counter(
            "arvis_syscall_errors",
            "tool.execute syscalls that ended in a problem instead of an outcome, by code",
            ("code",),
            registry=self.registry,
        )
        self.phase_seconds = Histogram(
            "arvis_syscall_phase_seconds",
            "Latency of a syscall's phases; 'total' spans admission, dispatch and journal",
            ("phase",),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.requests = Counter(
            "arvis_http_requests",
            "HTTP requests answered, by method and status",
            ("method", "status"),
            registry=self.registry,
        )
        self.audit_incomplete_runs = Gauge(
            "arvis_audit_incomplete_runs",
            "Runs flagged audit-incomplete (all tenants), as of the last scrape",
            registry=self.registry,
        )
        self.evidence_broken_runs = Gauge(
            "arvis_evidence_broken_runs",
            "Runs whose evidence was found broken (all tenants): nothing of them is served",
            registry=self.registry,
        )
        self.shadow_disagreements = ShadowDisagreements()
        self.registry.register(self.shadow_disagreements)
        self.witness_backlog = WitnessBacklog()
        self.registry.register(self.witness_backlog)

    # The lifecycle's SyscallObserver (arvis.lifecycle.syscalls): every syscall is
    # counted by the handler, whichever entry point (HTTP, its fast lane, /mcp) it took.

    def observe_phase(self, phase: str, seconds: float) -> None:
        """Admission, dispatch, journal."""
        self.phase_seconds.labels(phase).observe(seconds)

    def observe_syscall(self, result: SyscallResult, seconds: float) -> None:
        boundary = result.boundary.value if result.boundary is not None else "none"
        self.syscalls.labels(result.outcome, boundary).inc()
        self.phase_seconds.labels("total").observe(seconds)

    def observe_error(self, code: str) -> None:
        self.syscall_errors.labels(code).inc()
