"""Figure 10: the kernel's governed call under each policy engine, side by side.

The same echo syscall as figure 2, through four kernels on one database, in
alternating blocks (bench/sidebyside.py says why): the default rules; Cedar
(``[policy] engine = "cedar"``, a set of ten policies of the kinds docs/policy.md
shows); shadow mode (the rules enforced, Cedar evaluated beside them); and the
rules with two budgets charged on every call (calls per principal, and an amount).
Each figure pools its blocks; the ratios are each variant's p50 over the rules'.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from arvis.lifecycle.policy.budgets import Budgets, parse_budgets_config
from arvis.lifecycle.policy.cedar import CedarPolicy
from arvis.lifecycle.policy.policy import PolicyConfig, RulePolicy
from arvis.lifecycle.policy.shadow import ShadowPolicy
from arvis.tools.builtins import builtin_tools
from bench.httpbench import vacuuming
from bench.kernel import Kernel, open_kernel
from bench.stats import percentile, ratio, summary_ms

VARIANTS = ("rules", "cedar", "shadow", "budgets")

POLICIES = """
@id("bench-agents")
permit (principal in Arvis::Tenant::"bench", action, resource)
when { principal.roles.contains("agent") };

@id("reads-for-auditors")
permit (principal, action, resource) when {
  principal.roles.contains("auditor") && resource.effect == "read_only" };

@id("secret-writes-need-consent")
@consent("required")
permit (principal, action, resource == Arvis::Tool::"files.write")
when { context.payload has path && context.payload.path like "secret/*" };

@id("no-appends-after-three-tries")
forbid (principal, action, resource == Arvis::Tool::"files.append")
when { context.attempt > 3 };

@id("no-shell")
forbid (principal, action, resource) when { resource.capabilities.contains("process.execute") };

@id("no-huge-writes")
forbid (principal, action, resource == Arvis::Tool::"files.write")
when { context.payload has content && context.payload.content like "*BEGIN PRIVATE KEY*" };

@id("no-anonymous")
forbid (principal, action, resource) when { principal.auth_method == "anonymous" };

@id("office-hours-for-appends")
forbid (principal, action, resource == Arvis::Tool::"files.append")
when { context.time < datetime("2000-01-01") };

@id("no-foreign-tenants")
forbid (principal, action, resource) unless { principal.tenant == "bench" };

@id("no-unsafe-retries")
forbid (principal, action, resource)
when { resource.replay_safety == "unsafe" && context.attempt > 1 };
"""
BUDGETS = [
    {"name": "bench-calls", "limit": 10**12, "per": "1d", "scope": ["principal"]},
    {"name": "bench-amount", "limit": 10**15, "per": "1d", "field": "n"},
]


def _cedar() -> CedarPolicy:
    directory = Path(tempfile.mkdtemp(prefix="arvis-bench-cedar-"))
    (directory / "policies").mkdir()
    (directory / "policies" / "bench.cedar").write_text(POLICIES)
    tools = builtin_tools(tempfile.mkdtemp(prefix="arvis-bench-sandbox-"))
    config = PolicyConfig(engine="cedar", policies="policies/*.cedar")
    return CedarPolicy.load(config, directory, (tool.definition for tool in tools))


async def measure_policies(url: str, *, rounds: int, syscalls: int, warmup: int) -> dict[str, Any]:
    cedar = _cedar()
    setups: dict[str, dict[str, Any]] = {
        "rules": {},
        "cedar": {"policy": cedar},
        "shadow": {"policy": ShadowPolicy(RulePolicy(), cedar)},
        "budgets": {"budgets": Budgets(parse_budgets_config(BUDGETS))},
    }
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpu: dict[str, float] = dict.fromkeys(VARIANTS, 0.0)
    per_round: list[dict[str, float | None]] = []
    with vacuuming(url):
        async with AsyncExitStack() as stack:
            kernels: dict[str, Kernel] = {
                name: await stack.enter_async_context(
                    open_kernel(url, f"policy-{name}", **setups[name])
                )
                for name in VARIANTS
            }
            for kernel in kernels.values():
                await kernel.timed(warmup)
            for _ in range(rounds):
                block: dict[str, list[float]] = {}
                for name in VARIANTS:
                    start = time.process_time()
                    block[name] = await kernels[name].timed(syscalls // rounds)
                    cpu[name] += time.process_time() - start
                    samples[name] += block[name]
                rules_p50 = percentile(block["rules"], 50)
                per_round.append(
                    {
                        f"{name}_over_rules": ratio(percentile(block[name], 50), rules_p50)
                        for name in VARIANTS[1:]
                    }
                )
    result: dict[str, Any] = {
        name: {
            "syscall": summary_ms(samples[name]),
            "client_cpu_ms_per_syscall": round(cpu[name] / len(samples[name]) * 1000, 4),
        }
        for name in VARIANTS
    }
    result["policies"] = len(cedar.compiled.policies)
    result["rounds"] = per_round
    for name in VARIANTS[1:]:
        values = [v for r in per_round if (v := r[f"{name}_over_rules"]) is not None]
        result[f"median_round_{name}_over_rules"] = (
            round(statistics.median(values), 3) if values else None
        )
    return result
