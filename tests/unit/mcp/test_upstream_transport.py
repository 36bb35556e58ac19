"""A streamable HTTP upstream's calls on the wire: what ARVIS can prove was never sent.

A real server (tests/support/upstream/acting.py) on a local port, the real
session, the one dispatcher. The server acts on every call it reads before it
answers, so only a connection that could not be made is "not started".
"""

from __future__ import annotations

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.domain.definitions import ReplaySafety
from arvis.tools import ToolDispatcher
from arvis.tools.mcp.config import McpServerConfig
from arvis.tools.mcp.tools import McpTool
from arvis.tools.mcp.upstream import UpstreamServer
from tests.support.fakes import definition, invocation, read_only
from tests.support.server import running
from tests.support.upstream.acting import ActingUpstream


async def test_a_call_whose_connection_is_refused_on_a_live_session_did_not_start() -> None:
    stub = ActingUpstream()
    with running(stub) as url:
        config = McpServerConfig(name="act", url=f"{url}/mcp", timeout_s=5, startup_timeout_s=5)
        server = UpstreamServer(config)
        await server.start()
        ok = McpTool(definition("act.ok", replay_safety=ReplaySafety.UNSAFE), server, "ok")
        dispatcher = ToolDispatcher([ok])
        reached = await dispatcher.dispatch(invocation("act.ok", {"text": "a"}, call_id="c-1"))
    # The server is gone; the session still looks live, so the call is attempted.
    try:
        refused = await dispatcher.dispatch(invocation("act.ok", {"text": "b"}, call_id="c-2"))
    finally:
        await server.aclose()
    assert reached.boundary is EffectBoundary.EFFECT_COMPLETED
    assert refused.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert refused.failure is not None
    assert refused.failure.code == "upstream_unavailable"
    assert stub.effect_count("ok") == 1


@pytest.mark.parametrize("answer", ["accepted", "not_found", "bad_json", "rpc_error"])
async def test_a_read_only_tool_with_no_result_did_not_start_anything(answer: str) -> None:
    stub = ActingUpstream()
    with running(stub) as url:
        config = McpServerConfig(name="act", url=f"{url}/mcp", timeout_s=5, startup_timeout_s=5)
        server = UpstreamServer(config)
        await server.start()
        try:
            reader = McpTool(read_only(f"act.{answer}"), server, answer)
            outcome = await ToolDispatcher([reader]).dispatch(invocation(f"act.{answer}"))
        finally:
            await server.aclose()
    assert outcome.boundary is EffectBoundary.EFFECT_NOT_STARTED
    assert outcome.failure is not None
    assert outcome.failure.retryable
