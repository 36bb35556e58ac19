"""DESIGN §10 "Names are unique", for every pair of tool kinds and every start-up.

Built-in, application, HTTP and upstream-MCP tools share one namespace: two tools of one
name — whatever their kinds — stop start-up, naming both sources. The one exception is the
documented one (DESIGN §3): an application factory's tool replaces a built-in default of
the same name, so that pair is the positive control.
"""

from __future__ import annotations

import itertools
import json
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arvis.cli import app
from tests.support.adversarial.deployment import Deployment
from tests.support.adversarial.stubs import HostileStubs
from tests.support.adversarial.toml import value
from tests.support.adversarial.toolkinds import APP, BUILTIN, HTTP, TOOL_KINDS, ToolKind

REPLACES = {(APP.name, BUILTIN.name), (BUILTIN.name, APP.name)}
"""An application tool replaces a built-in of its name: documented, not a collision."""
PAIRS = [
    (a, b)
    for a, b in itertools.combinations_with_replacement(TOOL_KINDS, 2)
    if a.declare_read is not None
    and b.declare_read is not None
    and not (a is b and a in (BUILTIN, APP))  # one built-in set, one factory module
]


def _server(a: ToolKind, b: ToolKind) -> str:
    return "files" if BUILTIN in (a, b) else "dup"


def _pair_config(stubs: HostileStubs, a: ToolKind, b: ToolKind) -> str:
    server = _server(a, b)
    factories = sorted({spec for kind in (a, b) for spec in kind.factories})
    parts = [
        f"[tools]\nbuiltins = true\nfactories = {value(factories)}\n",
        # The stubs' host is allowed, so the name is what stops start-up (an upstream no
        # tenant may reach stops it first, sending nothing).
        '[policy.default]\negress_hosts = ["127.0.0.1"]\n',
    ]
    for kind in (a, b):
        assert kind.declare_read is not None
        parts.append(kind.declare_read(stubs, server))
    return "\n".join(part for part in parts if part)


@dataclass(frozen=True)
class Started:
    returncode: int
    stdout: str
    stderr: str


def _tools(directory: Path, config: str, env: dict[str, str]) -> Started:
    """``arvis tools --json`` — which builds the plan exactly as start-up does — on
    ``config``: the command itself, run in this process (start-up stops before any
    database is opened, so the command needs none)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "arvis.toml").write_text(config)
    runner = CliRunner(
        env={
            "ARVIS_DATABASE_URL": None,
            "ARVIS_CONFIG": str(directory / "arvis.toml"),
            "ARVIS_DATA_DIR": str(directory / "data"),
            **env,
        }
    )
    ran = runner.invoke(app, ["tools", "--json"])
    if ran.exception is not None and not isinstance(ran.exception, SystemExit):
        raise ran.exception
    return Started(ran.exit_code, ran.stdout, ran.stderr)


@pytest.fixture(scope="module")
def started(
    stubs: HostileStubs, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], Started]:
    """Every pair's start-up."""
    root = tmp_path_factory.mktemp("names")
    ran: dict[tuple[str, str], Started] = {}
    for a, b in PAIRS:
        env = {**a.named_env(_server(a, b)), **b.named_env(_server(a, b))}
        ran[(a.name, b.name)] = _tools(root / f"{a.name}-{b.name}", _pair_config(stubs, a, b), env)
    return ran


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param(a, b, id=f"{a.name}-vs-{b.name}")
        for a, b in PAIRS
        if (a.name, b.name) not in REPLACES
    ],
)
def test_two_tools_of_one_name_stop_start_up_naming_both_sources(
    started: dict[tuple[str, str], Started], a: ToolKind, b: ToolKind
) -> None:
    ran = started[(a.name, b.name)]
    server = _server(a, b)
    name = f"{server}.read"
    assert ran.returncode != 0, f"{name} declared twice and start-up went on: {ran.stdout[:500]}"
    lines = ran.stderr.strip().splitlines()
    # Two upstream servers can only clash by their own name (a server name has no dot).
    assert name in ran.stderr or f"'{server}'" in ran.stderr, ran.stderr
    for kind in (a, b):
        words = kind.source_words(_server(a, b))
        assert any(word in ran.stderr for word in words), (kind.name, words, lines[-3:])


def test_an_application_tool_replaces_the_built_in_of_its_name(
    started: dict[tuple[str, str], Started],
) -> None:
    ran = started[(BUILTIN.name, APP.name)]
    assert ran.returncode == 0, ran.stderr
    [tool] = [row for row in json.loads(ran.stdout) if row["name"] == "files.read"]
    assert tool["effect"] == "mutating", "the application's files.read, not the built-in"


def test_the_collision_pairs_cover_every_tool_kind() -> None:
    covered = {kind.name for pair in PAIRS for kind in pair}
    assert covered == {kind.name for kind in TOOL_KINDS}
    assert (BUILTIN, HTTP) in PAIRS or (HTTP, BUILTIN) in PAIRS


def test_a_per_turn_instance_refuses_to_start_with_two_tools_of_one_name(
    deployment: Deployment, stubs: HostileStubs, tmp_path: Path
) -> None:
    """The same refusal where start-up means serving: ``arvis serve-turn`` in a process of
    its own, on the deployment's database, never gets as far as answering."""
    config = tmp_path / "arvis.toml"
    config.write_text(_pair_config(stubs, BUILTIN, HTTP))
    env = deployment.env(ARVIS_CONFIG=str(config))
    process = subprocess.Popen(
        [sys.executable, "-m", "arvis", "serve-turn", "collision-turn"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        # Its first stdout line is the ready line, if it ever serves.
        readable, _, _ = select.select([process.stdout], [], [], 60)
        first = process.stdout.readline() if readable else ""
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
    err = process.stderr.read()
    assert '"event": "ready"' not in first, f"it served with files.read declared twice: {first}"
    assert process.returncode != 0, err
    assert "files.read" in err, err
