"""A LangGraph agent whose tools run only inside ARVIS — offline, with a scripted model.

Start ARVIS (``make run``), make an agent key and an approver key of another principal,
then::

    pip install 'arvis[langgraph]'
    ARVIS_URL=http://127.0.0.1:8000 ARVIS_API_KEY=<agent key> \
    ARVIS_APPROVER_KEY=<approver key> python examples/langgraph_agent.py

The scripted model asks for two calls in one message: ``files.write`` (no consent needed)
and ``files.append`` (mutating and replay-unsafe: ARVIS asks for consent). The graph
pauses on the consent (a LangGraph ``interrupt()``), the approver approves it in ARVIS,
and the resumed graph re-posts both calls: the write answers ``deduplicated`` (it ran
before the pause and is not run again), the append ``executed``, once. Put a real chat
model in place of the scripted one with ``model.bind_tools(governed.specs)``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from arvis.client import AsyncArvisClient
from arvis.integrations.langgraph import GovernedTools, consent_requests


def build_graph(
    model: BaseChatModel, governed: GovernedTools, checkpointer: BaseCheckpointSaver[Any]
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The usual agent loop — model, tools, model — with ARVIS's node as the tools."""

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", governed.node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def scripted_model() -> GenericFakeChatModel:
    """The offline model: one message with two tool calls, then a final answer."""
    calls = [
        {"name": "files_write", "args": {"path": "demo/note.txt", "content": "hi"}, "id": "w1"},
        {"name": "files_append", "args": {"path": "demo/log.txt", "line": "one"}, "id": "a1"},
    ]
    return GenericFakeChatModel(
        messages=iter([AIMessage(content="", tool_calls=calls), AIMessage(content="done")])
    )


async def main() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    url = os.environ.get("ARVIS_URL", "http://127.0.0.1:8000")
    async with (
        AsyncArvisClient(url, os.environ["ARVIS_API_KEY"]) as agent_client,
        AsyncArvisClient(url, os.environ["ARVIS_APPROVER_KEY"]) as approver,
    ):
        governed = await GovernedTools.load(agent_client, only=["files.write", "files.append"])
        app = build_graph(scripted_model(), governed, InMemorySaver())
        config: Any = {"configurable": {"thread_id": "langgraph-demo"}}
        result = await app.ainvoke({"messages": [HumanMessage("note and log")]}, config)
        for request in consent_requests(result):
            print(f"consent asked for {request['tool']} {request['payload']}; approving")
            await approver.approve(request["confirmation_id"])
        result = await app.ainvoke(Command(resume=True), config)
        for message in result["messages"]:
            print(f"{type(message).__name__}: {message.content}")


if __name__ == "__main__":
    asyncio.run(main())
