"""The MCP configuration in the docs is configuration ARVIS accepts."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from arvis.tools.registry import parse_tools_config

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _blocks(doc: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (DOCS / doc).read_text(), re.S)


@pytest.mark.parametrize("doc", ["mcp.md", "configuration.md"])
def test_every_documented_tools_mcp_entry_validates(doc: str) -> None:
    entries = [
        tomllib.loads(block)["tools"]["mcp"]
        for block in _blocks(doc, "toml")
        if "[[tools.mcp]]" in block
    ]
    assert entries
    for declared in entries:
        config = parse_tools_config({"mcp": declared})
        assert {server.name for server in config.mcp}


def test_the_documented_client_configuration_is_json_with_a_url_and_a_bearer_header() -> None:
    [block] = [b for b in _blocks("mcp.md", "json") if "mcpServers" in b]
    server = json.loads(block)["mcpServers"]["arvis"]
    assert server["url"].endswith("/mcp")
    assert server["headers"]["Authorization"].startswith("Bearer arvis_")
