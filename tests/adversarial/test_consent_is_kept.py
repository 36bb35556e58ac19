"""Consent at every edge: DESIGN §2 (a confirmation is released only when the effect
provably did not start) and §10 "Settling an uncertain outcome meets the consent terms".

Tenant ``globex`` asks consent for every mutating + unsafe tool. A hostile answer after
the tool acted must consume the confirmation, whoever approved it and wherever: posting the
decision again never runs the tool a second time. And an uncertain outcome resolved as
``not_started`` — the one resolution that frees another execution — must meet what the
consent needed (the approver group, the quorum), or the next attempt asks consent anew.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.adversarial.answers import Answer
from tests.support.adversarial.deployment import Deployment
from tests.support.adversarial.entrypoints import EntryPoint, HttpDriver, entry_point, offering
from tests.support.adversarial.toolkinds import HTTP, TOOL_KINDS, ToolKind

pytestmark = pytest.mark.db

AGENT, APPROVER = "globex:agent", "globex:approver"
LEADS = ("globex:lead", "globex:lead2")
"""Approvers in the group ``leads``; ``globex:approver`` is in no group."""

HOSTILE = [
    pytest.param(kind, mode, id=f"{kind.name}-{mode}")
    for kind in TOOL_KINDS
    for mode in kind.hostile
]
SAMPLES = [pytest.param(kind, id=kind.name) for kind in TOOL_KINDS if kind.sample is not None]


async def _confirmation_state(deployment: Deployment, confirmation_id: str) -> str:
    """The confirmation's state, as ``GET /v1/confirmations`` lists it to an approver."""
    headers = {"Authorization": f"Bearer {deployment.tokens[APPROVER]}"}
    after: str | None = None
    async with httpx.AsyncClient(base_url=deployment.url) as http:
        while True:
            params: dict[str, str | int] = {"limit": 500, **({"after": after} if after else {})}
            response = await http.get("/v1/confirmations", headers=headers, params=params)
            assert response.status_code == 200, response.text
            page = response.json()
            for item in page["confirmations"]:
                if item["id"] == confirmation_id:
                    return str(item["state"])
            after = page["next_after"]
            if after is None:
                raise AssertionError(f"no confirmation {confirmation_id}")


async def _consented_hostile_call(
    deployment: Deployment, approver: EntryPoint, kind: ToolKind, mode: str, cell: str
) -> tuple[HttpDriver, str, Answer, Answer]:
    """Ask, approve (through ``approver``), post again: the stub acts and answers ``mode``."""
    agent = HttpDriver(deployment)
    run, causal, token = f"consent-{cell}", f"c.{cell}", f"token:consent:{cell}"
    asked = await agent.post(AGENT, run, causal, kind.tool(mode), kind.payload(token))
    assert asked.outcome == "confirmation_required", asked.raw
    assert asked.confirmation_id is not None
    approved = await approver.driver(deployment).approve(APPROVER, asked.confirmation_id)
    assert approved.ok, approved.raw
    ran = await agent.post(AGENT, run, causal, kind.tool(mode), kind.payload(token))
    return agent, token, asked, ran


@pytest.mark.parametrize(("kind", "mode"), HOSTILE)
async def test_a_hostile_answer_after_the_tool_acted_consumes_the_consent(
    deployment: Deployment, kind: ToolKind, mode: str
) -> None:
    approver = entry_point("http")
    cell = f"{kind.name}.{mode}"
    agent, token, asked, ran = await _consented_hostile_call(deployment, approver, kind, mode, cell)
    assert deployment.effects(kind, token) == 1, ran.raw
    assert asked.confirmation_id is not None
    assert await _confirmation_state(deployment, asked.confirmation_id) == "CONSUMED", ran.raw

    again = await agent.post(
        AGENT, f"consent-{cell}", f"c.{cell}", kind.tool(mode), kind.payload(token)
    )
    assert deployment.effects(kind, token) == 1, again.raw


@pytest.mark.parametrize("kind", SAMPLES)
@pytest.mark.parametrize("approver", offering("approve"))
async def test_consent_given_at_any_approving_entry_point_is_consumed_by_a_hostile_answer(
    deployment: Deployment, approver: EntryPoint, kind: ToolKind
) -> None:
    assert kind.sample is not None
    cell = f"{approver.slug}.{kind.name}.sample"
    agent, token, asked, ran = await _consented_hostile_call(
        deployment, approver, kind, kind.sample, cell
    )
    assert asked.confirmation_id is not None
    assert await _confirmation_state(deployment, asked.confirmation_id) == "CONSUMED", ran.raw
    again = await agent.post(
        AGENT, f"consent-{cell}", f"c.{cell}", kind.tool(kind.sample), kind.payload(token)
    )
    assert deployment.effects(kind, token) == 1, again.raw


@pytest.mark.parametrize("approver", offering("approve"))
async def test_an_approval_at_any_approving_entry_point_meets_the_consent_terms(
    deployment: Deployment, approver: EntryPoint
) -> None:
    """Groups and quorum are the consent service's, whichever way an approval comes in:
    an approver outside the group counts for nothing, the same principal counts once."""
    agent, driver = HttpDriver(deployment), approver.driver(deployment)
    cell = f"{approver.slug}.terms.quorum"
    run, causal, payload = f"approve-{cell}", f"c.{cell}", {"token": f"token:approve:{cell}"}
    asked = await agent.post(AGENT, run, causal, "terms.quorum", payload)
    assert asked.outcome == "confirmation_required", asked.raw
    assert asked.confirmation_id is not None

    outside = await driver.approve(APPROVER, asked.confirmation_id)
    first = await driver.approve(LEADS[0], asked.confirmation_id)
    twice = await driver.approve(LEADS[0], asked.confirmation_id)
    state = await _confirmation_state(deployment, asked.confirmation_id)
    second = await driver.approve(LEADS[1], asked.confirmation_id)

    assert not outside.ok, outside.raw
    assert first.ok, first.raw
    assert not twice.ok, twice.raw
    assert state == "PENDING"
    assert second.ok, second.raw
    assert await _confirmation_state(deployment, asked.confirmation_id) == "APPROVED"


TERMS_CASES = [
    pytest.param("terms.group", (LEADS[0],), APPROVER, id="resolver-outside-the-approver-group"),
    pytest.param("terms.quorum", LEADS, LEADS[0], id="one-resolver-where-the-quorum-is-two"),
]


@pytest.mark.parametrize(("tool", "approvers", "resolver"), TERMS_CASES)
@pytest.mark.parametrize("entry", offering("resolve"))
async def test_resolving_not_started_frees_no_execution_the_consent_terms_would_not(
    deployment: Deployment, entry: EntryPoint, tool: str, approvers: tuple[str, ...], resolver: str
) -> None:
    agent = HttpDriver(deployment)
    cell = f"{entry.slug}.{tool}"
    run, causal, payload = f"terms-{cell}", f"c.{cell}", {"token": f"token:terms:{cell}"}
    asked = await agent.post(AGENT, run, causal, tool, payload)
    assert asked.outcome == "confirmation_required", asked.raw
    assert asked.confirmation_id is not None
    for approver in approvers:
        approved = await agent.approve(approver, asked.confirmation_id)
        assert approved.ok, approved.raw
    uncertain = await agent.post(AGENT, run, causal, tool, payload)
    assert uncertain.boundary == "EFFECT_STATE_UNKNOWN", uncertain.raw
    assert uncertain.idempotency_key is not None
    assert uncertain.attempt is not None

    resolved = await entry.driver(deployment).resolve(
        resolver,
        run,
        uncertain.idempotency_key,
        uncertain.attempt,
        "not_started",
        "looked: nothing",
    )
    again = await agent.post(AGENT, run, causal, tool, payload)
    # Either the resolution was refused, or the consent it would reuse is asked anew.
    assert again.outcome in ("refused", "confirmation_required"), (resolved.raw, again.raw)
    assert deployment.effects(HTTP, payload["token"]) == 1, (resolved.raw, again.raw)
