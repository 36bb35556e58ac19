"""What ``arvis.toml`` declares, read and checked: the ``[audit]`` section, the tool
set, and the deployment check ``arvis serve`` runs before it starts workers.

None of it needs a database; :mod:`arvis.bootstrap` wires what it returns.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import httpx
from pydantic import BaseModel, ConfigDict, Field

from arvis.config import FileConfig, Settings, load_file_config, load_object
from arvis.domain.errors import ArvisError, ConfigurationError
from arvis.domain.redaction import Redaction
from arvis.domain.sections import parse_section
from arvis.evidence.setup import load_evidence
from arvis.lifecycle.consent.notify import load_notifications
from arvis.lifecycle.consent.reconcile import parse_reconcile_config
from arvis.lifecycle.policy.budgets import parse_budgets_config
from arvis.lifecycle.policy.engines import build_policy
from arvis.lifecycle.policy.policy import parse_confirmations_config, parse_policy_config
from arvis.lifecycle.ports import AuditSink
from arvis.slack.config import load_slack
from arvis.store.audit import AuditHost
from arvis.telemetry import telemetry_settings
from arvis.tools.base import Tool
from arvis.tools.dispatcher import ToolDispatcher
from arvis.tools.mcp.pool import McpUpstreams
from arvis.tools.plans import StaticToolPlanSource, ToolPlan
from arvis.tools.registry import ToolHost, build_tool_set, parse_tools_config

if TYPE_CHECKING:
    from arvis.telemetry.tracing import Tracing


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
    upstreams = await McpUpstreams.open(
        config.mcp, os.environ, inject=inject, egress_scopes=scopes, http=http
    )
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


def check_file(settings: Settings) -> FileConfig:
    """Every section of ``arvis.toml`` read and checked on its own, nothing started.

    Every ``arvis`` command runs this (``settings_or_exit``), so a file that ``serve``
    would refuse is refused by all of them, with the same line. What needs the tools
    themselves (their definitions, upstream MCP servers, Cedar policies against them)
    is :func:`check_deployment`'s."""
    file_config = load_file_config(settings)
    parse_tools_config(file_config.tools)
    parse_policy_config(file_config.policy)
    parse_budgets_config(file_config.budgets)
    parse_confirmations_config(file_config.confirmations)
    parse_reconcile_config(file_config.reconcile)
    Redaction.from_section(file_config.journal)
    load_notifications(file_config.notify, os.environ)
    load_slack(file_config.slack, os.environ)
    telemetry_settings(file_config.telemetry, os.environ)
    audit = parse_audit_config(file_config.audit)
    if audit.sink is not None:
        load_object(audit.sink, "audit")
    load_evidence(settings.signing_key_file, audit.checkpoints, audit.witness, settings.config_dir)
    if file_config.provider:
        from arvis.providers.config import load_provider_config

        load_provider_config(file_config.provider)
    return file_config


async def check_deployment(settings: Settings) -> ToolPlan:
    """Everything ``arvis.toml`` declares, built and checked, without a database; the
    declared plan.

    ``arvis serve`` runs this before it starts workers (and ``arvis tools`` to list the
    plan), so a contradictory tool or a broken section stops start-up with one line
    naming it, not a traceback.
    """
    file_config = check_file(settings)
    plan = await declared_plan(settings, file_config)
    build_policy(
        parse_policy_config(file_config.policy), settings.config_dir, plan.definitions.values()
    )
    return plan
