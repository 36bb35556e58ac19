"""The import graph of ``arvis/`` has no circle and its arrows point inward (DESIGN §9).

The graph is read from the source with :mod:`ast`, so nothing is imported and the
test sees every import: at module level, inside a function (a lazy import is still
a dependency) and under ``TYPE_CHECKING`` (a circle of annotations is still a
circle a reader has to untangle).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "arvis"

CORE = {"domain", "tools", "lifecycle"}

# Which groups each group of ``arvis`` may import (a group is the first name under
# ``arvis``: ``arvis.tools.base`` is in ``tools``). ``arvis`` itself holds only
# ``__version__`` and may be imported by anyone.
ALLOWED: dict[str, set[str]] = {
    "domain": {"domain"},
    # Tool kinds (built-in, HTTP, upstream MCP) are the core's: they know the domain only.
    "tools": {"domain", "tools"},
    "lifecycle": {"domain", "tools", "lifecycle"},
    # Settings know no subsystem: each one validates its own section of arvis.toml.
    "config": {"domain", "config"},
    # Adapters: inward only, never one another.
    "store": {*CORE, "store"},
    "providers": {"domain", "providers"},
    # Who is calling: API keys (through the key store's port), JWTs of trusted issuers,
    # delegation. What the HTTP adapters, the console and the CLI share of identity.
    "identity": {"domain", "identity"},
    # What the HTTP adapters share: identity extraction, problems, metrics, middleware.
    "web": {*CORE, "config", "kernel", "identity", "web"},
    "api": {*CORE, "config", "kernel", "identity", "web", "api"},
    "mcp": {*CORE, "config", "kernel", "identity", "web", "mcp"},
    "console": {*CORE, "config", "kernel", "identity", "web", "console"},
    # The client ships to agent runtimes: of the server, only the error base class.
    "client": {"domain", "client"},
    "integrations": {"client", "integrations"},
    # Tracing is an adapter too: it implements the lifecycle's tracer port.
    "telemetry": {*CORE, "telemetry"},
    # Evidence beyond the database (signing keys, witnesses, bundles): an adapter.
    "evidence": {*CORE, "evidence"},
    # Delivering notifications over HTTP: the lifecycle's rules, an HTTP client's posts.
    "webhooks": {*CORE, "webhooks"},
    # Approvals in Slack: an outbox destination (like webhooks) and an HTTP entry point
    # (like api) for Slack's signed clicks, deciding through the lifecycle's consent.
    "slack": {*CORE, "config", "kernel", "web", "slack"},
    # The composition root wires every adapter but no entry point; what arvis.toml
    # declares is read and checked by ``deployment``; ``kernel`` is what it wires (the
    # services entry points use, and the instance's life).
    "bootstrap": {
        *{*CORE, "config", "store", "telemetry", "evidence", "webhooks", "deployment"},
        *{"identity", "kernel", "bootstrap", "slack"},
    },
    "deployment": {*CORE, *{"config", "store", "providers", "telemetry", "evidence", "slack"}},
    "kernel": {*CORE, "config", "store", "telemetry", "evidence", "webhooks", "identity", "slack"},
    # The ASGI app: mounts the v1 routes, /mcp and /console on one kernel.
    "serving": {
        *{*CORE, "config", "bootstrap", "kernel", "identity", "web", "api", "mcp", "console"},
        *{"serving", "slack"},
    },
    # The arvis command is the process itself: it migrates the store, manages keys
    # (through the composition root's administration), starts the HTTP server (serving)
    # and drives a provider's turn. Of the store it sees only CLI_STORE_MODULES. In
    # remote mode it is a client of a served ARVIS, through the client agents use.
    "cli": {
        *{*CORE, "config", "bootstrap", "deployment", "kernel", "store", "providers", "web"},
        *{"serving", "evidence", "identity", "client", "cli"},
    },
    "__main__": {"cli"},
}

# The adapters of DESIGN §9 that must never import one another: only the composition
# root and the app assembly (and the process, the CLI, which starts the app) see several.
ENTRY_POINTS = {"api", "mcp", "console"}
SEES_ALL = {"bootstrap", "serving", "cli", "__main__"}


CLI_STORE_MODULES = {
    "arvis.store.database",  # which database: the embedded server or the URL
    "arvis.store.engine",  # a sync engine to check the schema's revision before work
    "arvis.store.errors",  # what an unreachable database says, in one line
    "arvis.store.migrate",  # ``arvis migrate`` and migrate-then-serve
}
"""The CLI's only arrows into the store: finding, reaching and migrating the database.
Every adapter (keys, outbox, plans, checkpoints) comes from the composition root."""


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> Iterator[Import]:
    """Every ``arvis`` module ``name`` imports, resolved to a module of ours."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            # ``from arvis.tools import errors`` imports the module, not the package.
            targets = [
                f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            resolved = _nearest(target, known)
            if resolved is not None and resolved != name:
                yield Import(name, resolved, node.lineno)


def _nearest(target: str, known: set[str]) -> str | None:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


@functools.cache
def graph() -> dict[str, list[Import]]:
    # Read once per session: every test of this module asks for the same graph.
    found = modules()
    known = set(found)
    return {
        name: list(dict.fromkeys(imports_of(name, path, known))) for name, path in found.items()
    }


def group(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "arvis"


def circles(edges: dict[str, list[Import]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each as a
    path that closes on its first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for edge in edges[module]:
            if edge.target not in index:
                visit(edge.target)
                low[module] = min(low[module], low[edge.target])
            elif edge.target in on_stack:
                low[module] = min(low[module], index[edge.target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(_path(sorted(component), edges))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def _path(component: list[str], edges: dict[str, list[Import]]) -> list[str]:
    # A shortest way back from the first member to itself, through the component.
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for edge in edges[module]:
                if edge.target == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if edge.target in members and edge.target not in previous:
                    previous[edge.target] = module
                    following.append(edge.target)
        frontier = following
    return component


def test_the_graph_is_read_from_every_module() -> None:
    edges = graph()
    assert "arvis.tools.base" in edges
    assert "arvis.tools.base" in {edge.target for edge in edges["arvis.tools.outcome"]}
    # A lazy import (inside a function) is a dependency like any other.
    assert "arvis.providers.config" in {edge.target for edge in edges["arvis.deployment"]}


def test_no_module_of_arvis_imports_itself_back_through_others() -> None:
    found = circles(graph())
    assert found == [], "import circles: " + "; ".join(" -> ".join(c) for c in found)


def test_every_group_of_arvis_has_a_layering_rule() -> None:
    groups = {group(module) for module in graph()} - {"arvis"}
    assert groups <= set(ALLOWED), f"no rule for {sorted(groups - set(ALLOWED))}"


@pytest.mark.parametrize("source", sorted(ALLOWED))
def test_imports_point_inward(source: str) -> None:
    wrong = [
        str(edge)
        for module, found in graph().items()
        if group(module) == source
        for edge in found
        if group(edge.target) not in ALLOWED[source] | {"arvis"}
    ]
    assert wrong == [], f"{source} may import only {sorted(ALLOWED[source])}: {wrong}"


def test_no_entry_point_imports_another() -> None:
    """``api``, ``mcp`` and ``console`` share what they share through ``web``; nothing
    but ``serving``, ``bootstrap`` and the CLI imports an entry point at all."""
    wrong = [
        str(edge)
        for module, found in graph().items()
        for edge in found
        if group(edge.target) in ENTRY_POINTS
        and group(module) != group(edge.target)
        and group(module) not in SEES_ALL
    ]
    assert wrong == [], f"entry points are imported only by {sorted(SEES_ALL)}: {wrong}"


def test_the_migrations_stand_at_the_top_of_the_repository() -> None:
    """DESIGN §9: ``migrations/`` is a top-level folder, shipped as ``arvis.migrations``."""
    assert not (PACKAGE / "migrations").exists()
    assert (PACKAGE.parent / "migrations" / "env.py").is_file()


def test_the_circle_finder_names_a_circle() -> None:
    edges = {
        "a": [Import("a", "b", 1)],
        "b": [Import("b", "c", 1)],
        "c": [Import("c", "a", 1), Import("c", "d", 2)],
        "d": [],
    }
    assert circles(edges) == [["a", "b", "c", "a"]]


def test_the_cli_reaches_the_store_only_to_find_reach_and_migrate_the_database() -> None:
    wrong = [
        str(edge)
        for module, found in graph().items()
        if group(module) == "cli"
        for edge in found
        if group(edge.target) == "store" and edge.target not in CLI_STORE_MODULES
    ]
    assert wrong == [], f"the CLI builds a store adapter itself: {wrong}"
