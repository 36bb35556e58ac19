"""Sessions to a real stdio upstream: started, restarted, stopped, never leaked."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from arvis.tools.mcp.config import McpServerConfig
from arvis.tools.mcp.upstream import UpstreamServer, UpstreamUnavailable
from tests.support.mcp_client import NOTES_SERVER


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def gone(pid: int, within_s: float = 10.0) -> bool:
    # The child is reaped by the SDK's shutdown; give the kernel a moment to agree.
    for _ in range(int(within_s / 0.05)):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_server_that_never_answers_is_unavailable_in_time_and_its_child_is_stopped(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "pid"
    mute = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    config = McpServerConfig(
        name="mute", command=[sys.executable, "-c", mute, str(pidfile)], startup_timeout_s=1.0
    )
    server = UpstreamServer(config)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(UpstreamUnavailable, match=r"no answer within 1 s"):
        await server.start()
    # Not left connecting for ever: the child is on its way out without waiting for close.
    assert await gone(int(pidfile.read_text()), within_s=5)
    assert loop.time() - started < 8
    await server.aclose()


async def test_closing_stops_a_live_child_and_a_closed_server_sends_nothing(
    tmp_path: Path,
) -> None:
    config = McpServerConfig(
        name="notes", command=[sys.executable, str(NOTES_SERVER), str(tmp_path)]
    )
    server = UpstreamServer(config)
    listed = await server.start()
    assert "add_note" in {tool.name for tool in listed}
    pid = int((tmp_path / "pid").read_text())
    assert alive(pid)
    await server.aclose()
    assert await gone(pid)
    with pytest.raises(UpstreamUnavailable, match="shutting down"):
        await server.call("list_notes", {}, {})
