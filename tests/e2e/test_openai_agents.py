"""The OpenAI Agents SDK with ARVIS as its tool executor, offline, through a served ARVIS.

The model is the SDK's own ``ScriptedModel``: no network. Every tool call the agent
makes must be a governed ``tool.execute`` under the run id, with the model's call id
as causal id; consent is the SDK's approval interruption; an uncertain outcome reaches
the model as "do not retry".
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, RunState, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from arvis.client import AsyncArvisClient, ForbiddenRole
from arvis.integrations.openai_agents import DO_NOT_RETRY, GovernedTools
from tests.support.client import asgi_client
from tests.support.http import Api, serve_api

pytestmark = pytest.mark.db

CONFIG = """
[tools]
factories = ["tests.support.agenttools:make_tools"]

[policy.default]
deny_tools = ["files.read"]
"""
OFFLINE = RunConfig(tracing_disabled=True)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("arvis-agents")


@pytest.fixture(scope="module")
async def api(database_url: str, data_dir: Path) -> AsyncIterator[Api]:
    async with serve_api(database_url, data_dir, config=CONFIG) as served:
        yield served


def _outputs(model: ScriptedModel) -> dict[str, Any]:
    """The tool outputs the model was shown on its last call, by call id."""
    last = model.last_call
    assert last is not None
    return {
        item["call_id"]: json.loads(item["output"])
        for item in last.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def _agent(model: ScriptedModel, tools: Sequence[Any]) -> Agent[Any]:
    return Agent(name="clerk", instructions="Use the tools.", model=model, tools=list(tools))


async def test_each_call_of_the_agent_is_a_governed_syscall_under_the_run_and_call_id(
    api: Api, agent_client: AsyncArvisClient, sandbox: Callable[[str], str | None]
) -> None:
    governed = GovernedTools(agent_client, "run-agent-plain")
    model = ScriptedModel(
        [
            [
                function_call(
                    "files_write", {"path": "agent/a.txt", "content": "hi"}, call_id="call_w"
                ),
                function_call("echo", {"said": "hello"}, call_id="call_e"),
            ],
            [assistant_message("done")],
        ]
    )
    tools = await governed.tools(only=["files.write", "echo"])

    result = await Runner.run(_agent(model, tools), "write and echo", run_config=OFFLINE)

    assert result.final_output == "done"
    assert sorted(tool.name for tool in tools) == ["echo", "files_write"]
    assert _outputs(model) == {
        "call_w": {"bytes": 2, "path": "agent/a.txt"},
        "call_e": {"said": "hello"},
    }
    assert sorted(api.journal_rows("run-agent-plain")) == [
        ("execution", "call_e", "EFFECT_COMPLETED"),
        ("execution", "call_w", "EFFECT_COMPLETED"),
    ]
    assert sandbox("agent/a.txt") == "hi"


async def test_consent_interrupts_the_run_and_the_approved_call_runs_once_after_resume(
    api: Api,
    agent_client: AsyncArvisClient,
    approver: AsyncArvisClient,
    sandbox: Callable[[str], str | None],
) -> None:
    run_id = "run-agent-consent"
    model = ScriptedModel(
        [
            [
                function_call(
                    "files_append", {"path": "agent/c.log", "line": "one"}, call_id="call_a"
                ),
                function_call(
                    "files_write", {"path": "agent/c.txt", "content": "now"}, call_id="call_w"
                ),
            ],
            [assistant_message("appended")],
        ]
    )
    first = GovernedTools(agent_client, run_id)
    result = await Runner.run(_agent(model, await first.tools()), "append", run_config=OFFLINE)

    assert [item.call_id for item in result.interruptions] == ["call_a"]
    assert sandbox("agent/c.log") is None  # nothing ran without consent
    assert sandbox("agent/c.txt") == "now"  # the call that needed none ran at once
    pending = [c async for c in approver.iter_confirmations(state="PENDING")]
    assert [(c.run_id, c.causal_id) for c in pending if c.run_id == run_id] == [(run_id, "call_a")]

    # Resume in a "new process": the state from JSON, tools that never saw the first run.
    saved = result.to_state().to_json()
    resumed = GovernedTools(agent_client, run_id)
    agent = _agent(model, await resumed.tools())
    state = await RunState.from_json(agent, saved)
    [item] = state.get_interruptions()
    assert resumed.causal_id_of(item) == "call_a"
    approved = await resumed.approve(state, item, approver)
    assert approved is not None
    assert approved.state == "APPROVED"
    done = await Runner.run(agent, state, run_config=OFFLINE)

    assert done.final_output == "appended"
    assert _outputs(model)["call_a"] == {"bytes": 4, "path": "agent/c.log"}
    assert sandbox("agent/c.log") == "one\n"
    assert api.journal_rows(run_id).count(("execution", "call_a", "EFFECT_COMPLETED")) == 1
    assert [k for k, c, _ in api.journal_rows(run_id) if c == "call_w"] == ["execution"]


async def test_a_rejected_call_is_denied_in_arvis_and_never_runs(
    api: Api,
    agent_client: AsyncArvisClient,
    approver: AsyncArvisClient,
    sandbox: Callable[[str], str | None],
) -> None:
    run_id = "run-agent-reject"
    model = ScriptedModel(
        [
            [
                function_call(
                    "files_append", {"path": "agent/r.log", "line": "no"}, call_id="call_r"
                )
            ],
            [assistant_message("understood")],
        ]
    )
    governed = GovernedTools(agent_client, run_id)
    agent = _agent(model, await governed.tools())
    result = await Runner.run(agent, "append", run_config=OFFLINE)
    state = result.to_state()
    [item] = result.interruptions

    denied = await governed.reject(state, item, approver, reason="not on a Sunday")
    done = await Runner.run(agent, state, run_config=OFFLINE)

    assert denied is not None
    assert (denied.state, denied.reason) == ("DENIED", "not on a Sunday")
    assert done.final_output == "understood"
    assert sandbox("agent/r.log") is None
    assert [kind for kind, _, _ in api.journal_rows(run_id)] == ["confirmation"]


async def test_an_uncertain_outcome_reaches_the_model_as_do_not_retry(
    api: Api, agent_client: AsyncArvisClient
) -> None:
    model = ScriptedModel(
        [
            [function_call("probe_lost", {"target": "ledger"}, call_id="call_u")],
            [assistant_message("I will not retry.")],
        ]
    )
    governed = GovernedTools(agent_client, "run-agent-uncertain")

    await Runner.run(
        _agent(model, await governed.tools(only=["probe.lost"])), "go", run_config=OFFLINE
    )

    told = _outputs(model)["call_u"]
    assert told["status"] == "uncertain"
    assert told["instruction"] == DO_NOT_RETRY
    assert api.journal_rows("run-agent-uncertain") == [
        ("execution", "call_u", "EFFECT_STATE_UNKNOWN")
    ]


async def test_a_refusal_is_shown_to_the_model_with_its_reason(
    api: Api, agent_client: AsyncArvisClient
) -> None:
    model = ScriptedModel(
        [
            [function_call("files_read", {"path": "agent/a.txt"}, call_id="call_f")],
            [assistant_message("refused")],
        ]
    )
    governed = GovernedTools(agent_client, "run-agent-refused")

    await Runner.run(_agent(model, await governed.tools()), "read", run_config=OFFLINE)

    told = _outputs(model)["call_f"]
    assert (told["status"], told["reason"]) == ("refused", "policy_denied")
    assert api.journal_rows("run-agent-refused") == [("refusal", "call_f", "PRE_EFFECT_REFUSAL")]


async def test_an_applications_own_function_tool_runs_inside_arvis_only(
    api: Api, agent_client: AsyncArvisClient
) -> None:
    local_calls: list[str] = []

    @function_tool
    def shout(text: str) -> str:
        """Say `text` louder."""
        local_calls.append(text)
        return text.upper()

    governed = GovernedTools(agent_client, "run-agent-own")
    model = ScriptedModel(
        [[function_call("shout", {"text": "hello"}, call_id="call_s")], [assistant_message("ok")]]
    )

    await Runner.run(_agent(model, [governed.govern(shout)]), "shout", run_config=OFFLINE)

    assert _outputs(model)["call_s"] == {"said": "HELLO!", "causal_id": "call_s"}
    assert local_calls == []
    assert api.journal_rows("run-agent-own") == [("execution", "call_s", "EFFECT_COMPLETED")]

    def asks_first(text: str) -> str:
        return text

    # Consent is ARVIS's to ask: a tool that asks on its own is refused, not stripped of it.
    with pytest.raises(ValueError, match="needs_approval"):
        governed.govern(function_tool(asks_first, name_override="shout", needs_approval=True))


async def test_a_key_without_the_agent_role_ends_the_run_with_the_typed_error(
    api: Api, agent_client: AsyncArvisClient
) -> None:
    plan = await agent_client.tools()
    async with asgi_client(api, "acme:auditor") as auditor:
        governed = GovernedTools(auditor, "run-agent-badkey")
        model = ScriptedModel([[function_call("echo", {"n": 1}, call_id="call_k")]])

        with pytest.raises(Exception) as caught:  # noqa: PT011 - the SDK wraps the cause
            await Runner.run(_agent(model, governed.from_plan(plan)), "go", run_config=OFFLINE)

    causes = []
    error: BaseException | None = caught.value
    while error is not None:
        causes.append(error)
        error = error.__cause__
    assert any(isinstance(cause, ForbiddenRole) for cause in causes), causes
    assert api.journal_rows("run-agent-badkey") == []
