"""The OpenAI Agents SDK (``openai-agents``; ``pip install 'arvis[agents]'``) with ARVIS as
its tool executor: every call the agent makes is a governed ``tool.execute``.

::

    governed = GovernedTools(AsyncArvisClient(url, agent_key), run_id="run-42")
    agent = Agent(name="clerk", instructions="…", tools=await governed.tools())
    result = await Runner.run(agent, "…")
    while result.interruptions:                      # ARVIS answered confirmation_required
        state = result.to_state()
        for item in result.interruptions:
            await governed.approve(state, item, approver_client)
        result = await Runner.run(agent, state)      # the same decisions, run once

See docs/client.md.
"""

from arvis.integrations._require import require

require("openai_agents", "agents", "agents")

from arvis.integrations.openai_agents._render import (  # noqa: E402
    DO_NOT_RETRY,
    causal_id_for_call,
    model_name,
    model_output,
)
from arvis.integrations.openai_agents._tools import ConsentPending, GovernedTools  # noqa: E402

__all__ = [
    "DO_NOT_RETRY",
    "ConsentPending",
    "GovernedTools",
    "causal_id_for_call",
    "model_name",
    "model_output",
]
