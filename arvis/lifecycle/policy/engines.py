"""Which :class:`ToolPolicy` a deployment runs: the ``[policy]`` engine and mode."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from arvis.domain.definitions import ToolDefinition
from arvis.lifecycle.policy.policy import PolicyConfig, RulePolicy, ToolPolicy


def build_policy(
    config: PolicyConfig, base_dir: Path, definitions: Iterable[ToolDefinition]
) -> ToolPolicy:
    """The deployment's policy. Cedar files are found relative to ``base_dir`` (the
    directory of ``arvis.toml``), parsed and validated against the schema of the plan
    ``definitions`` make, once; an invalid one stops start-up naming its file and line."""
    if config.engine == "rules":
        return RulePolicy(config)
    # Imported only when a deployment names Cedar: the rules need none of it.
    from arvis.lifecycle.policy.cedar import CedarPolicy
    from arvis.lifecycle.policy.shadow import ShadowPolicy

    cedar = CedarPolicy.load(config, base_dir, definitions)
    if config.mode == "shadow":
        return ShadowPolicy(RulePolicy(config), cedar)
    return cedar
