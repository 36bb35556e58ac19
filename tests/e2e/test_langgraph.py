"""LangGraph with ARVIS as its tool executor, offline, through a served ARVIS.

The model is langchain-core's ``GenericFakeChatModel`` (scripted messages, no network);
the graph is the one of ``examples/langgraph_agent.py``. Every tool call is a governed
``tool.execute`` under the thread's run with a causal id from the step and the call id;
consent is an ``interrupt()``; a resumed graph — after an approval, or from its last
checkpoint after a crash — re-posts the same calls and never runs an effect twice.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib.util
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from arvis.bootstrap import build_kernel
from arvis.client import AsyncArvisClient
from arvis.integrations.langgraph import GovernedTools, consent_requests
from arvis.serving.app import create_app
from tests.support.client import Losses, asgi_client
from tests.support.http import Api, app_settings, serve_api
from tests.support.server import running

pytestmark = pytest.mark.db

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_agent.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("langgraph_agent_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = _example()


class Crash(BaseException):
    """The process dies: nothing after it runs, nothing more is checkpointed."""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("arvis-langgraph")


@pytest.fixture(scope="module")
async def api(database_url: str, data_dir: Path) -> AsyncIterator[Api]:
    async with serve_api(database_url, data_dir) as served:
        yield served


def _model(*messages: AIMessage) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(messages))


def _calls(*calls: tuple[str, dict[str, Any], str]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in calls])


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


def _tool_outputs(result: dict[str, Any]) -> dict[str, str]:
    return {
        str(m.tool_call_id): str(m.content)
        for m in result["messages"]
        if isinstance(m, ToolMessage)
    }


def _restarted(saver: InMemorySaver) -> InMemorySaver:
    """A new process's checkpointer: what the dead one had written, and nothing else."""
    fresh = InMemorySaver()
    for name in ("storage", "writes", "blobs"):
        getattr(fresh, name).update(copy.deepcopy(dict(getattr(saver, name))))
    return fresh


async def test_each_tool_call_is_a_syscall_under_the_thread_with_a_step_and_call_causal_id(
    api: Api, agent_client: AsyncArvisClient, sandbox: Callable[[str], str | None]
) -> None:
    governed = await GovernedTools.load(agent_client, only=["files.write", "echo"])
    model = _model(
        _calls(
            ("files_write", {"path": "lg/a.txt", "content": "hi"}, "call_w"),
            ("echo", {"said": "hello"}, "call_e"),
        ),
        AIMessage(content="done"),
    )
    app = example.build_graph(model, governed, InMemorySaver())

    result = await app.ainvoke({"messages": [HumanMessage("go")]}, _config("lg-plain"))

    assert result["messages"][-1].content == "done"
    assert sorted(spec["function"]["name"] for spec in governed.specs) == ["echo", "files_write"]
    assert "effect" not in str(governed.specs)  # the model sees name, description, schema
    outputs = _tool_outputs(result)
    assert outputs == {"call_w": '{"bytes": 2, "path": "lg/a.txt"}', "call_e": '{"said": "hello"}'}
    journal = api.journal_rows("lg-plain")
    assert [(kind, boundary) for kind, _, boundary in journal] == [
        ("execution", "EFFECT_COMPLETED"),
        ("execution", "EFFECT_COMPLETED"),
    ]
    causal_ids = [causal for _, causal, _ in journal]
    assert causal_ids[0].endswith(".call_w")
    assert causal_ids[1].endswith(".call_e")
    assert causal_ids[0].split(".")[0] == causal_ids[1].split(".")[0]  # one step
    assert sandbox("lg/a.txt") == "hi"


async def test_consent_is_an_interrupt_and_the_resumed_graph_runs_each_effect_once(
    api: Api,
    agent_client: AsyncArvisClient,
    approver: AsyncArvisClient,
    sandbox: Callable[[str], str | None],
) -> None:
    config = _config("lg-consent")
    governed = await GovernedTools.load(agent_client, only=["files.write", "files.append"])
    app = example.build_graph(example.scripted_model(), governed, InMemorySaver())

    paused = await app.ainvoke({"messages": [HumanMessage("note and log")]}, config)

    [request] = consent_requests(paused)
    assert (request["tool"], request["payload"]) == (
        "files.append",
        {"path": "demo/log.txt", "line": "one"},
    )
    assert request["run_id"] == "lg-consent"
    assert request["tool_call_id"] == "a1"
    assert sandbox("demo/note.txt") == "hi"  # the call that needed no consent ran
    assert sandbox("demo/log.txt") is None  # nothing ran without consent
    assert consent_requests((await app.aget_state(config)).interrupts) == [request]

    # Resumed before anyone approved: it asks again, and still nothing runs.
    again = await app.ainvoke(Command(resume=True), config)
    assert [r["confirmation_id"] for r in consent_requests(again)] == [request["confirmation_id"]]
    assert sandbox("demo/log.txt") is None

    approved = await approver.approve(request["confirmation_id"])
    assert approved.state == "APPROVED"
    done = await app.ainvoke(Command(resume=True), config)

    assert done["messages"][-1].content == "done"
    assert sandbox("demo/log.txt") == "one\n"
    assert sandbox("demo/note.txt") == "hi"
    journal = api.journal_rows("lg-consent")
    write_id = next(causal for _, causal, _ in journal if causal.endswith(".w1"))
    assert [entry for entry in journal if entry[1] == write_id] == [
        ("execution", write_id, "EFFECT_COMPLETED")  # re-posted twice: deduplicated, not rerun
    ]
    appends = [entry for entry in journal if entry[1] == request["causal_id"]]
    assert [kind for kind, _, _ in appends].count("execution") == 1
    assert _tool_outputs(done)["a1"] == '{"bytes": 4, "path": "demo/log.txt"}'


async def test_a_graph_resumed_after_a_crash_gets_the_recorded_result_and_runs_nothing_again(
    api: Api, approver: AsyncArvisClient, sandbox: Callable[[str], str | None]
) -> None:
    config = _config("lg-crash")
    saver = InMemorySaver()
    losses = Losses()
    async with asgi_client(api, losses=losses) as first_client:
        first = await GovernedTools.load(first_client, only=["files.append"])
        model = _model(_calls(("files_append", {"path": "lg/crash.log", "line": "x"}, "c1")))
        app = example.build_graph(model, first, saver)
        paused = await app.ainvoke({"messages": [HumanMessage("log")]}, config)
        [request] = consent_requests(paused)
        await approver.approve(request["confirmation_id"])

        def crash() -> None:
            raise Crash

        # ARVIS runs the append and answers; the process dies before reading the answer.
        losses.lose(1, then=crash)
        with pytest.raises(Crash):
            await app.ainvoke(Command(resume=True), config)
    assert sandbox("lg/crash.log") == "x\n"

    # A new process: new client, new model, new graph, the checkpoints the dead one left.
    async with asgi_client(api) as second_client:
        second = await GovernedTools.load(second_client, only=["files.append"])
        app = example.build_graph(_model(AIMessage(content="logged")), second, _restarted(saver))
        done = await app.ainvoke(None, config)

    assert done["messages"][-1].content == "logged"
    assert sandbox("lg/crash.log") == "x\n"  # the effect ran once
    assert _tool_outputs(done)["c1"] == '{"bytes": 2, "path": "lg/crash.log"}'
    executions = [e for e in api.journal_rows("lg-crash") if e[0] == "execution"]
    assert executions == [("execution", request["causal_id"], "EFFECT_COMPLETED")]


async def test_the_example_runs_as_a_user_runs_it_against_a_served_arvis(
    api: Api, database_url: str, tmp_path: Path
) -> None:
    settings = app_settings(database_url, tmp_path)
    app = create_app(functools.partial(build_kernel, settings))
    env = {
        **os.environ,
        "ARVIS_API_KEY": api.tokens["acme:agent"],
        "ARVIS_APPROVER_KEY": api.tokens["acme:approver"],
    }
    with running(app) as url:
        ran = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, str(EXAMPLE)],
            env={**env, "ARVIS_URL": url},
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert ran.returncode == 0, ran.stderr
    assert "consent asked for files.append" in ran.stdout
    assert ran.stdout.rstrip().endswith("AIMessage: done")
    assert (tmp_path / "sandbox" / "demo" / "log.txt").read_text() == "one\n"
