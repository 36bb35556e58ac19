"""A hostile upstream MCP server over stdio, written with the official SDK.

    python tests/support/adversarial/stdio/hostile_server.py STATE_DIR

Its tools (tests.support.adversarial.catalog, ``STDIO_MODES``) append an effect to
``STATE_DIR/effects.jsonl`` and then answer a JSON-RPC error, ``isError``, die, or hang.
If ``STATE_DIR/refuse`` exists it exits at once, like a server that cannot start.

It lives in a directory of its own because Python puts a script's directory first on
``sys.path``: next to modules named like the standard library it would shadow them. ARVIS
starts it with a minimal environment (no ``PYTHONPATH``), so it finds the repository itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))

import anyio
from mcp.server.stdio import stdio_server

from tests.support.adversarial.catalog import mcp_server
from tests.support.adversarial.effects import EffectLog
from tests.support.adversarial.modes import STDIO_MODES

STATE = Path(sys.argv[1])


async def main() -> None:
    server = mcp_server("hostile-stdio", STDIO_MODES, EffectLog(STATE / "effects.jsonl"))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if (STATE / "refuse").exists():
        sys.exit(3)
    anyio.run(main)
