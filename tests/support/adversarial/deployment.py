"""One ARVIS deployment over the hostile stubs: its ``arvis.toml``, its keys, the app served
in-process (HTTP, ``/mcp``, the console), per-turn instances of it, and its CLI.

Every process of a deployment shares its database, data directory, settings and
``arvis.toml``, as the processes of one real deployment do: the stdio stub child each of
them starts writes to the same effect file, so a cell counts effects whichever process ran
the tool. Processes that run no hostile tool (the CLI, the instances of the crash cells)
read ``arvis-lite.toml``: the same deployment without the upstream servers, so they start
in a second instead of starting and listing every upstream first.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from arvis.bootstrap import administration, build_kernel
from arvis.domain.identity import Role
from arvis.serving.app import create_app
from tests.support.adversarial.stubs import HostileStubs
from tests.support.adversarial.toml import value
from tests.support.adversarial.toolkinds import APP, BUILTIN, TOOL_KINDS, ToolKind, terms_tools
from tests.support.http import app_settings, mint_keys
from tests.support.mcp_client import Served
from tests.support.perturn import TurnInstance, turn_env
from tests.support.postgres import sql
from tests.support.server import running
from tests.support.slack import ENVIRONMENT as SLACK_ENVIRONMENT
from tests.support.slack import config as slack_config

REPO = Path(__file__).resolve().parents[3]

POLICY = """
[policy.default]                # acme (and any tenant without a section): no consent asked
consent_for_mutating_unsafe = false
egress_hosts = ["127.0.0.1"]

[policy.tenants.globex]         # the default consent rule: mutating + unsafe needs consent
egress_hosts = ["127.0.0.1"]

[policy.tenants.globex.approvals."terms.group"]   # only an approver of the group leads
approvers = ["leads"]

[policy.tenants.globex.approvals."terms.quorum"]  # two distinct approvers of leads
approvers = ["leads"]
quorum = 2

[policy.tenants.initech]        # refuses: files.append by rule, every host by egress
consent_for_mutating_unsafe = false
deny_tools = ["files.append"]
egress_hosts = []
"""
"""Tenant ``acme`` runs everything without consent; ``globex`` asks for it (with terms for
two tools); ``initech`` refuses ``files.append`` and every host."""

EVIDENCE = """
[audit.checkpoints]             # signed heads at every even position, never when idle
every = 2
idle_s = 0

[audit.witness]
kind = "file"
path = "witness/arvis.jsonl"
"""

KeySpec = tuple[str, str, tuple[Role, ...], tuple[str, ...]]
EXTRA_KEYS: dict[str, KeySpec] = {
    # name: (tenant, principal, roles, approver groups)
    "acme:agent2": ("acme", "agent2-of-acme", ("agent",), ()),
    "acme:agent-alt": ("acme", "agent-of-acme", ("agent",), ()),
    "globex:agent2": ("globex", "agent2-of-globex", ("agent",), ()),
    "globex:lead": ("globex", "lead-of-globex", ("approver",), ("leads",)),
    "globex:lead2": ("globex", "lead2-of-globex", ("approver",), ("leads",)),
    "initech:agent": ("initech", "agent-of-initech", ("agent",), ()),
}
"""Keys beyond one per (tenant, role) of ``tests.support.http.mint_keys``: another agent
of a tenant, a second key of ``acme:agent``'s own principal, approvers in ``leads``."""

LITE_KINDS: tuple[ToolKind, ...] = (BUILTIN, APP)

SLACK_APPROVERS = ("acme:approver", "globex:approver", "globex:lead", "globex:lead2")
"""The keys whose principals are Slack users too (``[slack.users]``, same groups)."""


def slack_user(who: str) -> str:
    """The Slack user id ``[slack.users]`` maps to the principal of the key ``who``."""
    return "U" + hashlib.sha256(who.encode()).hexdigest()[:10].upper()


def slack_section(api_url: str) -> str:
    """``[slack]`` posting to the stand-in at ``api_url``, with :data:`SLACK_APPROVERS`."""
    users = {}
    for who in SLACK_APPROVERS:
        tenant, role = who.split(":", 1)
        found = EXTRA_KEYS.get(who)
        principal, groups = (found[1], found[3]) if found else (f"{role}-of-{tenant}", ())
        users[slack_user(who)] = (tenant, principal, groups)
    return slack_config(api_url, users)


def config_text(
    stubs: HostileStubs,
    kinds: Sequence[ToolKind] = TOOL_KINDS,
    *,
    policy: str = POLICY,
    extra: str = "",
) -> str:
    """The ``arvis.toml`` declaring every kind's tools over ``stubs``."""
    factories = [spec for kind in kinds for spec in kind.factories]
    parts = [f"[tools]\nbuiltins = true\nfactories = {value(factories)}\n"]
    parts += [kind.declare(stubs) for kind in kinds]
    parts += [extra, policy]
    return "\n".join(part for part in parts if part)


async def _mint(database_url: str, keys: dict[str, KeySpec]) -> dict[str, str]:
    async with administration(database_url) as admin:
        tokens: dict[str, str] = {}
        for name, (tenant, principal, roles, groups) in keys.items():
            _, issued = await admin.keys.create(tenant, principal, list(roles), groups)
            tokens[name] = issued.token
        return tokens


@dataclass(frozen=True)
class Cli:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Deployment:
    database_url: str
    data_dir: Path
    stubs: HostileStubs
    served: Served
    tokens: dict[str, str]
    environment: dict[str, str] = field(default_factory=dict)
    """``ARVIS_*`` settings every process of the deployment shares (a signing key file)."""
    turns: dict[str, TurnInstance] = field(default_factory=dict)
    access: list[dict[str, Any]] = field(default_factory=list)
    """The access-log lines of the in-process app (HTTP, ``/mcp``, the console)."""
    people: dict[str, tuple[str, str]] = field(default_factory=dict)
    """``who`` → the username and password that principal signs in to the console with
    at the identity provider (the ``jwt`` identity kind); empty: key sign-in."""

    @property
    def url(self) -> str:
        return self.served.url

    @property
    def config_path(self) -> Path:
        return self.data_dir / "arvis.toml"

    @property
    def lite_config_path(self) -> Path:
        return self.data_dir / "arvis-lite.toml"

    @property
    def sandbox(self) -> Path:
        return self.data_dir / "sandbox"

    def effects(self, kind: ToolKind, token: str) -> int:
        """How many times a tool of ``kind`` acted for ``token``, in any of its processes."""
        return kind.effect_count(self.stubs, self.data_dir, token)

    def tenant_of(self, who: str) -> str:
        return who.split(":", 1)[0]

    def sql(self, query: Any, *params: Any) -> list[tuple[Any, ...]]:
        return sql(self.database_url, query, *params)

    def env(self, *, lite: bool = False, **extra: str) -> dict[str, str]:
        """The environment of another ARVIS process of this deployment."""
        config = self.lite_config_path if lite else self.config_path
        return {
            **turn_env(self.database_url, self.data_dir),
            "ARVIS_CONFIG": str(config),
            "PYTHONPATH": str(REPO),
            "ARVIS_SHUTDOWN_GRACE_S": "2",
            **self.environment,
            **extra,
        }

    def turn(self, run_id: str) -> TurnInstance:
        """``arvis serve-turn RUN`` of this deployment, started on first use."""
        if run_id not in self.turns:
            log = self.data_dir / f"turn-{run_id}.log"
            # At INFO, so its access log is in the file (``Driver.access_log``).
            env = self.env(ARVIS_LOG_LEVEL="INFO")
            self.turns[run_id] = TurnInstance(run_id, env, log).start()
        return self.turns[run_id]

    def stop_turn(self, run_id: str) -> None:
        """SIGTERM the per-turn instance of ``run_id``: it drains, flushes and exits."""
        turn = self.turns.pop(run_id, None)
        if turn is not None:
            stop(turn)

    def drop_turn(self, run_id: str) -> None:
        """SIGKILL the per-turn instance of ``run_id`` (a stalled one)."""
        turn = self.turns.pop(run_id, None)
        if turn is not None:
            turn.kill9()

    async def cli(self, *args: str, **env: str) -> Cli:
        """``arvis ARGS`` of this deployment (its lite configuration), in a subprocess."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "arvis",
            *args,
            env=self.env(lite=True, **env),
            cwd=REPO,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), timeout=120)
        assert process.returncode is not None
        return Cli(process.returncode, out.decode(), err.decode())

    def close_turns(self) -> None:
        for run_id in list(self.turns):
            self.stop_turn(run_id)


def stop(turn: TurnInstance, timeout_s: float = 20) -> None:
    """SIGTERM, and SIGKILL when it does not exit in time (a stalled loop cannot drain)."""
    process = turn.process
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        turn.kill9()


@contextmanager
def deploy(
    database_url: str,
    data_dir: Path,
    stubs: HostileStubs,
    config: str,
    *,
    lite_config: str | None = None,
    tokens: dict[str, str] | None = None,
    settings: dict[str, Any] | None = None,
) -> Iterator[Deployment]:
    """Serve ``config`` in-process; per-turn instances on demand; all stopped at the end.

    ``lite_config`` is what the CLI reads (default: ``config``). ``tokens`` are the keys of
    an earlier life of the deployment (a restart): none are minted then. ``settings`` are
    more ``Settings`` fields, given to every process of the deployment.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "arvis.toml"
    path.write_text(config)
    (data_dir / "arvis-lite.toml").write_text(config if lite_config is None else lite_config)
    overrides = dict(settings or {})
    settings_ = app_settings(database_url, data_dir, config=path, **overrides)
    app = create_app(functools.partial(build_kernel, settings_))
    if tokens is None:
        with ThreadPoolExecutor(1) as pool:
            tokens = {
                **pool.submit(asyncio.run, mint_keys(database_url)).result(),
                **pool.submit(asyncio.run, _mint(database_url, EXTRA_KEYS)).result(),
            }
    # The in-process app reads the [slack] secrets from the environment as it starts.
    with pytest.MonkeyPatch.context() as patch:
        for name, secret in SLACK_ENVIRONMENT.items():
            patch.setenv(name, secret)
        with running(app) as url, _access_log() as access:
            deployment = Deployment(
                database_url=database_url,
                data_dir=data_dir,
                stubs=stubs,
                served=Served(url=url, tokens=tokens, database_url=database_url, data_dir=data_dir),
                tokens=tokens,
                environment={
                    **{f"ARVIS_{name.upper()}": str(item) for name, item in overrides.items()},
                    **SLACK_ENVIRONMENT,  # the secrets of [slack], when the configuration has it
                },
                access=access,
            )
            try:
                yield deployment
            finally:
                deployment.close_turns()


class _Lines(logging.Handler):
    def __init__(self, lines: list[dict[str, Any]]) -> None:
        super().__init__(logging.INFO)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):  # one request's line (not a deadline's error)
            self.lines.append(dict(fields))


@contextmanager
def _access_log() -> Iterator[list[dict[str, Any]]]:
    """Every ``arvis.access`` line of this process meanwhile, parsed."""
    lines: list[dict[str, Any]] = []
    logger = logging.getLogger("arvis.access")
    handler, level = _Lines(lines), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def shared_configs(stubs: HostileStubs, slack_api: str) -> tuple[str, str]:
    """The adversarial suite's deployment: every tool kind, every tenant's policy, two
    tools with consent terms, evidence on (checkpoints and a witness) and approvals in
    Slack (its Web API at ``slack_api``, a stand-in); and its lite form for processes that
    run no upstream tool."""
    extra = terms_tools(stubs) + EVIDENCE + slack_section(slack_api)
    return config_text(stubs, extra=extra), config_text(stubs, LITE_KINDS, extra=EVIDENCE)
