"""How a tool an upstream MCP server lists becomes a plan definition, and what
``[[tools.mcp]]`` accepts (DESIGN §3: hints are believed only where the operator says so)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from arvis.domain.errors import ConfigurationError, DefinitionError
from arvis.tools.mcp.config import McpServerConfig
from arvis.tools.mcp.tools import derive_definition
from arvis.tools.plans import derive_plan_id
from arvis.tools.registry import ToolHost, build_tool_set, parse_tools_config
from tests.support.fakes import FakeTool, definition, returns_ok


def server(**fields: Any) -> McpServerConfig:
    return McpServerConfig.model_validate({"name": "notes", "command": ["notes"], **fields})


def listed(name: str = "add_note", **hints: bool) -> types.Tool:
    return types.Tool(
        name=name,
        description=f"{name} from upstream",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        annotations=types.ToolAnnotations(**hints) if hints else None,
    )


def governance(config: McpServerConfig, tool: types.Tool) -> tuple[str, str, list[str]]:
    built = derive_definition(config, tool)
    return built.effect.value, built.replay_safety.value, list(built.capabilities)


def test_an_untrusted_tool_is_mutating_and_unsafe_whatever_its_hints_say() -> None:
    hinted = listed(read_only_hint=True, idempotent_hint=True, open_world_hint=True)
    assert governance(server(), hinted) == ("mutating", "unsafe", [])


def test_trusted_hints_map_back_to_governance_and_absent_hints_assert_nothing() -> None:
    trusted = server(trust_annotations=True)
    assert governance(trusted, listed(read_only_hint=True)) == ("read_only", "safe", [])
    assert governance(trusted, listed(idempotent_hint=True)) == ("mutating", "idempotent", [])
    assert governance(trusted, listed(open_world_hint=True)) == (
        "mutating",
        "unsafe",
        ["network.access"],
    )
    assert governance(trusted, listed()) == ("mutating", "unsafe", [])


def test_an_override_always_wins_over_trusted_hints() -> None:
    config = server(
        trust_annotations=True,
        overrides={"add_note": {"effect": "mutating", "capabilities": ["filesystem.write"]}},
    )
    assert governance(config, listed(read_only_hint=True)) == (
        "mutating",
        "unsafe",
        ["filesystem.write"],
    )
    reader = server(overrides={"add_note": {"effect": "read_only"}})
    assert governance(reader, listed()) == ("read_only", "safe", [])


def test_a_contradiction_stops_start_up_naming_the_tool_and_the_entry() -> None:
    config = server(trust_annotations=True, overrides={"add_note": {"effect": "read_only"}})
    with pytest.raises(DefinitionError) as caught:
        derive_definition(config, listed(open_world_hint=True))
    assert caught.value.tool == "notes.add_note"
    assert "write capabilities" in caught.value.rule
    assert "[[tools.mcp]] 'notes'" in caught.value.rule


def test_a_tool_name_that_cannot_be_a_plan_name_stops_start_up_naming_it() -> None:
    with pytest.raises(DefinitionError) as caught:
        derive_definition(server(), listed("AddNote"))
    assert caught.value.tool == "notes.AddNote"


def test_a_changed_listing_is_a_new_plan_and_an_unchanged_one_the_same() -> None:
    config = server()
    before = [derive_definition(config, listed("add_note")), derive_definition(config, listed("x"))]
    same = [derive_definition(config, listed("add_note")), derive_definition(config, listed("x"))]
    reworded = types.Tool(
        name="x", description="now it deletes things", input_schema={"type": "object"}
    )
    after = [derive_definition(config, listed("add_note")), derive_definition(config, reworded)]
    assert derive_plan_id(before) == derive_plan_id(same)
    assert derive_plan_id(before) != derive_plan_id(after)


def test_a_server_without_a_description_still_gets_one() -> None:
    bare = types.Tool(name="ping", input_schema={"type": "object"})
    assert "ping" in derive_definition(server(), bare).description


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"command": None}, "exactly one of command"),
        ({"url": "http://127.0.0.1:9000/mcp"}, "exactly one of command"),
        ({"headers": {"X-Zone": "eu"}}, "headers and headers_env are for a url server"),
        ({"name": "Notes"}, "name"),
        ({"name": "no.dots"}, "name"),
        ({"overrides": {"add_note": {"effect": "sometimes"}}}, "effect"),
    ],
)
def test_a_bad_entry_stops_start_up_with_one_line(fields: dict[str, Any], expected: str) -> None:
    entry = {"name": "notes", "command": ["notes"], **fields}
    with pytest.raises(ConfigurationError) as caught:
        parse_tools_config({"mcp": [entry]})
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


URL = "https://mcp.example/mcp"


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        # Raised by ARVIS's own client: no answer at all, for any server.
        ({"command": ["notes"], "not_started_codes": [-32000]}, "-32000 is raised by ARVIS"),
        (
            {"command": ["notes"], "overrides": {"add_note": {"not_started_codes": [-32001]}}},
            "-32001 is raised by ARVIS",
        ),
        # Made up by the HTTP client from answers it could not read (202, 404, a page...).
        ({"url": URL, "not_started_codes": [-32602, -32600]}, "-32600 cannot be declared"),
        (
            {"url": URL, "overrides": {"add_note": {"not_started_codes": [-32601]}}},
            "overrides.add_note.not_started_codes: -32601 cannot be declared",
        ),
        ({"command": ["notes"], "not_started_codes": [7, 7]}, "listed twice"),
    ],
)
def test_only_codes_the_server_itself_answers_can_be_declared_not_started(
    entry: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_tools_config({"mcp": [{"name": "notes", **entry}]})
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_stdio_server_may_declare_any_code_its_server_answers() -> None:
    codes = [-32700, -32600, -32601, -32602, -32603, 7]
    config = server(not_started_codes=codes, overrides={"fail": {"not_started_codes": []}})
    assert config.declared_not_started("add_note") == codes
    assert config.declared_not_started("fail") == []


@pytest.mark.parametrize("header", ["Mcp-Session-Id", "Accept", "Mcp-Param-Region", "Host"])
def test_headers_the_mcp_transport_sets_cannot_be_configured(header: str) -> None:
    for field in ("headers", "headers_env"):
        entry = {"name": "web", "url": URL, field: {header: "X_VAR"}}
        with pytest.raises(ConfigurationError, match="set by the MCP transport"):
            parse_tools_config({"mcp": [entry]})


def test_a_credential_in_plain_headers_is_refused_pointing_at_headers_env() -> None:
    entry = {"name": "web", "url": "https://mcp.example/mcp", "headers": {"Authorization": "x"}}
    with pytest.raises(ConfigurationError) as caught:
        parse_tools_config({"mcp": [entry]})
    assert "headers_env" in str(caught.value)


def test_two_servers_of_one_name_are_refused() -> None:
    entry = {"name": "notes", "command": ["notes"]}
    with pytest.raises(ConfigurationError, match="declared twice"):
        parse_tools_config({"mcp": [entry, entry]})


def _build(tmp_path: Path, mcp_tools: dict[str, list[Any]] | None) -> list[str]:
    host = ToolHost(sandbox_dir=tmp_path, http=httpx.AsyncClient(), mcp_tools=mcp_tools or {})
    section = {"mcp": [{"name": "notes", "command": ["notes"]}]}
    return [tool.name for tool in build_tool_set(section, host)]


def test_the_registry_takes_an_opened_servers_tools_like_any_declared_tool(tmp_path: Path) -> None:
    tool = FakeTool(definition("notes.add_note"), returns_ok)
    assert "notes.add_note" in _build(tmp_path, {"notes": [tool]})
    with pytest.raises(ConfigurationError, match="was not opened"):
        _build(tmp_path, None)


def test_an_upstream_tool_may_not_take_another_declared_tools_name(tmp_path: Path) -> None:
    clash = FakeTool(definition("crm.update"), returns_ok)
    host = ToolHost(sandbox_dir=tmp_path, http=httpx.AsyncClient(), mcp_tools={"notes": [clash]})
    http_entry = {
        "name": "crm.update",
        "description": "Update a CRM record.",
        "url": "https://crm.example/arvis",
        "effect": "mutating",
        "replay_safety": "idempotent",
    }
    tools = {"http": [http_entry], "mcp": [{"name": "notes", "command": ["notes"]}]}
    with pytest.raises(ConfigurationError, match="declared by both"):
        build_tool_set(tools, host)


@pytest.mark.parametrize("builtins", [True, False])
def test_an_upstream_or_http_tool_may_not_take_a_builtins_name(
    tmp_path: Path, builtins: bool
) -> None:
    shadow = FakeTool(definition("files.write"), returns_ok)
    host = ToolHost(sandbox_dir=tmp_path, http=httpx.AsyncClient(), mcp_tools={"files": [shadow]})
    http_entry = {
        "name": "echo",
        "description": "Not the built-in echo.",
        "url": "https://echo.example/arvis",
        "effect": "read_only",
        "replay_safety": "safe",
    }
    for section in (
        {"builtins": builtins, "mcp": [{"name": "files", "command": ["files"]}]},
        {"builtins": builtins, "http": [http_entry]},
    ):
        if builtins:
            with pytest.raises(ConfigurationError, match="both the built-in tools and"):
                build_tool_set(section, host)
        else:  # without the built-ins the name is free
            assert len(build_tool_set(section, host)) == 1
