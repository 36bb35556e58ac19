"""DESIGN §10 "A decision belongs to its principal": the ids an entry point derives for a
client that names none (MCP) are per principal and never depend on the tool plan, so a plan
change cannot make a decided action new.

One deployment lives twice on one database: the second life has one more tool (a new plan).
A client sending no ids makes the same calls in both lives: an uncertain call of an unsafe
tool stays refused and never runs again, a completed call answers its record with the same
idempotency key — for any key of the same principal, and for no other principal.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.support.adversarial.answers import Answer
from tests.support.adversarial.deployment import Deployment, config_text, deploy
from tests.support.adversarial.entrypoints import McpDriver
from tests.support.adversarial.identities import Credentials
from tests.support.adversarial.stubs import HostileStubs
from tests.support.adversarial.toolkinds import APP, BUILTIN, HTTP, ToolKind, http_tool_toml

pytestmark = pytest.mark.db

AGENT, SAME_PRINCIPAL, OTHER = "acme:agent", "acme:agent-alt", "acme:agent2"
UNCERTAIN = [
    pytest.param(APP, "raise_untyped", id="app"),
    pytest.param(HTTP, "status_500", id="http"),
]
WRITE = {"path": "default-ids.txt", "content": "written once"}


@dataclass
class Lives:
    first: dict[str, Answer]
    second: dict[str, Answer]
    effects: dict[str, int]


async def _calls(deployment: Deployment, who: str, *, uncertain: bool) -> dict[str, Answer]:
    mcp, answers = McpDriver(deployment), {}
    if uncertain:
        for param in UNCERTAIN:
            kind, mode = param.values
            assert isinstance(kind, ToolKind)
            assert isinstance(mode, str)
            token = f"token:default-ids:{kind.name}"
            answers[kind.name] = await mcp.post(
                who, None, None, kind.tool(mode), kind.payload(token)
            )
    answers["write"] = await mcp.post(who, None, None, "files.write", WRITE)
    return answers


@pytest.fixture(scope="module")
async def lives(
    database_url: str,
    stubs: HostileStubs,
    credentials: Credentials,
    tmp_path_factory: pytest.TempPathFactory,
) -> Lives:
    data_dir = tmp_path_factory.mktemp("arvis-lives")
    first_plan = credentials.trusted(config_text(stubs, (BUILTIN, APP, HTTP)))
    second_plan = first_plan + "\n" + http_tool_toml("web.added", stubs.http_url("ok"))
    with deploy(database_url, data_dir, stubs, first_plan) as deployed:
        first = credentials.held_by(deployed)
        before = await _calls(first, AGENT, uncertain=True)
        tokens = first.tokens
    with deploy(database_url, data_dir, stubs, second_plan, tokens=tokens) as second:
        after = await _calls(second, AGENT, uncertain=True)
        after |= {
            f"same-principal-{k}": v
            for k, v in (await _calls(second, SAME_PRINCIPAL, uncertain=False)).items()
        }
        after |= {
            f"other-{k}": v for k, v in (await _calls(second, OTHER, uncertain=False)).items()
        }
        effects = {}
        for param in UNCERTAIN:
            kind = param.values[0]
            assert isinstance(kind, ToolKind)
            effects[kind.name] = second.effects(kind, f"token:default-ids:{kind.name}")
    return Lives(before, after, effects)


@pytest.mark.parametrize(("kind", "mode"), UNCERTAIN)
def test_an_uncertain_unsafe_call_stays_refused_after_a_plan_change(
    lives: Lives, kind: ToolKind, mode: str
) -> None:
    assert lives.first[kind.name].boundary == "EFFECT_STATE_UNKNOWN", lives.first[kind.name].raw
    assert lives.second[kind.name].outcome == "refused", lives.second[kind.name].raw
    assert lives.effects[kind.name] == 1


def test_a_completed_call_is_deduplicated_with_the_same_key_after_a_plan_change(
    lives: Lives,
) -> None:
    first, second = lives.first["write"], lives.second["write"]
    assert first.boundary == "EFFECT_COMPLETED", first.raw
    assert (second.outcome, second.idempotency_key) == ("deduplicated", first.idempotency_key), (
        second.raw
    )


def test_another_key_of_the_same_principal_names_the_same_decision(lives: Lives) -> None:
    first, other_key = lives.first["write"], lives.second["same-principal-write"]
    assert (other_key.outcome, other_key.idempotency_key) == (
        "deduplicated",
        first.idempotency_key,
    ), other_key.raw


def test_another_principal_never_gets_anothers_decision(lives: Lives) -> None:
    first, other = lives.first["write"], lives.second["other-write"]
    assert other.outcome != "deduplicated", other.raw
    assert other.idempotency_key != first.idempotency_key
