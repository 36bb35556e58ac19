"""LangGraph (``pip install 'arvis[langgraph]'``) with ARVIS as its tool executor: every
tool call of the graph is a governed ``tool.execute``, so a resumed graph never runs an
effect twice.

::

    governed = await GovernedTools.load(AsyncArvisClient(url, agent_key), only=["files.write"])
    model = chat_model.bind_tools(governed.specs)        # name, description, schema only
    graph = StateGraph(MessagesState)
    graph.add_node("agent", call_model)
    graph.add_node("tools", governed.node)               # instead of ToolNode(tools)
    ...
    app = graph.compile(checkpointer=saver)
    result = await app.ainvoke({"messages": [...]}, {"configurable": {"thread_id": "t-1"}})
    for request in consent_requests(result):              # ARVIS answered confirmation_required
        await approver_client.approve(request["confirmation_id"])
    result = await app.ainvoke(Command(resume=True), config)   # the same call, run once

See docs/integrations.md.
"""

from arvis.integrations._require import require

require("langgraph", "langgraph", "langchain_core", "langgraph.types")

from arvis.integrations.langgraph._node import (  # noqa: E402
    ConsentRequest,
    GovernedTools,
    causal_id_for_step,
    consent_requests,
)

__all__ = ["ConsentRequest", "GovernedTools", "causal_id_for_step", "consent_requests"]
