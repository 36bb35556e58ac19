"""``arvis policy schema | validate | check``: the deployment's policy, offline.

Nothing here opens the database or runs a tool: the policy and the plan are
built from ``arvis.toml`` exactly as start-up builds them.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from arvis.cli.common import JsonFlag, fail, settings_or_exit
from arvis.cli.output import emit_json
from arvis.config import Settings, load_file_config
from arvis.deployment import declared_plan
from arvis.domain.authorization import PolicyDecision
from arvis.domain.context import AuthorizedEffectContext
from arvis.domain.errors import ArvisError
from arvis.domain.ids import CausalId, InstanceId, PlanId, PrincipalId, RunId, TenantId
from arvis.domain.payload import freeze_payload
from arvis.lifecycle.authorization import ToolAuthorizationService
from arvis.lifecycle.clock import SystemClock
from arvis.lifecycle.policy.budgets import AmountProblem, Budgets, parse_budgets_config
from arvis.lifecycle.policy.engines import build_policy
from arvis.lifecycle.policy.policy import PolicyQuery, ToolPolicy, parse_policy_config
from arvis.lifecycle.policy.shadow import ShadowPolicy
from arvis.tools.errors import CanonicalFormRefused
from arvis.tools.plans import ToolPlan

policy_app = typer.Typer(help="The deployment's policy: schema, validation, a dry decision.")


def _deployment(settings: Settings) -> tuple[ToolPlan, ToolPolicy, Budgets]:
    try:
        file_config = load_file_config(settings)
        plan = asyncio.run(declared_plan(settings, file_config))
        config = parse_policy_config(file_config.policy)
        policy = build_policy(config, settings.config_dir, plan.definitions.values())
        budgets = Budgets(parse_budgets_config(file_config.budgets))
    except ArvisError as exc:
        fail(exc.message)
    return plan, policy, budgets


@policy_app.command("schema")
def schema() -> None:
    """Print the Cedar schema policies are validated against (for the declared plan)."""
    from arvis.lifecycle.policy.cedar import payload_type, render_schema

    settings = settings_or_exit()
    try:
        plan = asyncio.run(declared_plan(settings))
    except ArvisError as exc:
        fail(exc.message)
    typer.echo(render_schema(payload_type(plan.definitions.values())), nl=False)


@policy_app.command("validate")
def validate(json_out: JsonFlag = False) -> None:
    """Parse and validate the policy files as start-up does; exit 1 naming file and line."""
    from arvis.lifecycle.policy.cedar import CedarPolicy

    _, policy, budgets = _deployment(settings_or_exit())
    cedar = policy.shadow if isinstance(policy, ShadowPolicy) else policy
    summary: dict[str, Any] = {"engine": "rules", "budgets": [b.name for b in budgets.configs]}
    if isinstance(cedar, CedarPolicy):
        summary |= {
            "engine": "cedar",
            "mode": "shadow" if isinstance(policy, ShadowPolicy) else "enforce",
            "files": [name for name, _ in cedar.compiled.files],
            "policies": [p.label for p in cedar.compiled.policies.values()],
            "fingerprint": cedar.fingerprint,
        }
    if json_out:
        emit_json(summary)
        return
    if summary["engine"] == "rules":
        typer.echo('ok: the rules of [policy] (engine = "rules"); no Cedar files to validate')
        return
    typer.echo(
        f"ok: {len(summary['policies'])} policies in {len(summary['files'])} file(s), "
        f"mode {summary['mode']}, fingerprint {summary['fingerprint']}"
    )


def _verdict(decision: PolicyDecision) -> dict[str, Any]:
    return {
        "decision": (
            ("allow with consent" if decision.consent_required else "allow")
            if decision.allowed
            else "deny"
        ),
        "reason": None if decision.reason is None else decision.reason.value,
        "detail": decision.detail,
        "policies": list(decision.policy_ids),
        "engine": decision.policy_engine,
        "policy_version": decision.policy_version,
        "policy_digest": decision.policy_digest,
    }


@policy_app.command("check")
def check(
    principal: Annotated[str, typer.Option(help="The principal that would ask.")],
    tenant: Annotated[str, typer.Option(help="Its tenant.")],
    tool: Annotated[str, typer.Option(help="The tool of the declared plan.")],
    payload: Annotated[str, typer.Option(help="The payload, as JSON.")] = "{}",
    roles: Annotated[str, typer.Option(help="Comma-separated roles.")] = "agent",
    key_id: Annotated[str | None, typer.Option(help="The API key's id.")] = None,
    run: Annotated[str, typer.Option(help="The run id the context carries.")] = "policy-check",
    attempt: Annotated[int, typer.Option(min=1, help="The attempt number.")] = 1,
    json_out: JsonFlag = False,
) -> None:
    """Print the decision and the deciding policies for one call, without running it."""
    plan, policy, budgets = _deployment(settings_or_exit())
    definition = plan.definitions.get(tool)
    if definition is None:
        fail(f"tool {tool!r} is not in the declared plan")
    try:
        frozen = freeze_payload(json.loads(payload))
    except json.JSONDecodeError as exc:
        fail(f"--payload is not JSON: {exc}")
    except ArvisError as exc:
        fail(exc.message)
    now = datetime.now(UTC)
    problem = ToolAuthorizationService(policy, SystemClock()).schema_problem(
        definition, frozen.value
    )
    acted_on = frozen
    if problem is None:
        # Policy is shown the payload in the form the tool acts on, as at admission.
        try:
            acted_on = plan.acted_on(tool, frozen)
        except CanonicalFormRefused as exc:
            problem = exc.message
    context = AuthorizedEffectContext(
        tenant_id=TenantId(tenant),
        principal_id=PrincipalId(principal),
        auth_method="api_key",
        key_id=key_id,
        roles=tuple(r.strip() for r in roles.split(",") if r.strip()),
        run_id=RunId(run),
        causal_id=CausalId("policy-check"),
        plan_id=PlanId(plan.plan_id),
        instance_id=InstanceId("policy-check"),
    )
    enforced = policy.enforced if isinstance(policy, ShadowPolicy) else policy
    destination = plan.destination(tool)
    answer: dict[str, Any] = {"tool": tool}
    if problem is not None:
        # Admission checks the payload against the tool's schema, and computes the form
        # the tool acts on, before any policy.
        answer |= {
            "decision": "deny",
            "reason": "payload_invalid",
            "detail": problem,
            "policies": [],
            "engine": None,
            "policy_digest": None,
        }
    else:
        query = PolicyQuery(context, definition, acted_on, destination, attempt, now)
        answer |= _verdict(enforced.evaluate(query))
        if isinstance(policy, ShadowPolicy):
            answer["shadow"] = _verdict(policy.shadow.evaluate(query))
    charges = budgets.charges(tenant, principal, tool, frozen.value, now)
    answer["budgets"] = (
        charges.detail
        if isinstance(charges, AmountProblem)
        else [
            f"{c.budget}: {c.amount} of {c.limit} until {c.resets_at:%Y-%m-%dT%H:%M:%SZ}"
            for c in charges
        ]
    )
    if json_out:
        emit_json(answer)
        return
    for key in ("decision", "reason", "detail", "policies", "engine", "policy_digest"):
        value = answer[key]
        if value not in (None, "", []):
            typer.echo(f"{key}: {', '.join(value) if isinstance(value, list) else value}")
    if "shadow" in answer:
        shadow = answer["shadow"]
        typer.echo(f"shadow: {shadow['decision']} [{', '.join(shadow['policies'])}]")
    if answer["budgets"]:
        charged = answer["budgets"]
        typer.echo(f"budgets: {charged if isinstance(charged, str) else '; '.join(charged)}")
