"""Cedar policies for tests: files written to a directory, loaded as start-up loads them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from arvis.domain.definitions import ToolDefinition
from arvis.lifecycle.policy.cedar import CedarPolicy
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from tests.support.rules import DEFINITIONS

PERMIT_ALL = '@id("everyone")\npermit (principal, action, resource);\n'


def write_policies(directory: Path, files: Mapping[str, str]) -> Path:
    """``files`` (name → Cedar text) under ``directory/policies``; answers ``directory``."""
    for name, text in files.items():
        path = directory / "policies" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return directory


def cedar_policy(
    directory: Path,
    files: Mapping[str, str] | str,
    *,
    definitions: Iterable[ToolDefinition] | None = None,
    rules: TenantRules | None = None,
    **config: Any,
) -> CedarPolicy:
    """A :class:`CedarPolicy` over ``files`` (one text: ``main.cedar``), validated against
    the schema of ``definitions`` (the rule tests' plan by default); ``rules`` hold the
    gates (by default the egress host the rule tests use)."""
    texts = {"main.cedar": files} if isinstance(files, str) else files
    write_policies(directory, texts)
    policy_config = PolicyConfig(
        engine="cedar",
        policies="policies/**/*.cedar",
        default=rules or TenantRules(egress_hosts=["api.example.com"]),
        **config,
    )
    return CedarPolicy.load(
        policy_config, directory, DEFINITIONS.values() if definitions is None else definitions
    )
