"""Declared tools: factories named in arvis.toml, built-ins as fallbacks (DESIGN §3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from arvis.domain.errors import ConfigurationError, DefinitionError
from arvis.tools import (
    StaticToolPlanSource,
    ToolDispatcher,
    ToolHost,
    build_tool_set,
    describe_plan,
)
from tests.support.fakes import invocation

HERE = "tests.unit.tools.factories"


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[ToolHost]:
    async with httpx.AsyncClient() as client:
        yield ToolHost(sandbox_dir=tmp_path / "sandbox", http=client)


def build(host: ToolHost, **tools: Any) -> list[Any]:
    return build_tool_set(tools, host)


def test_with_no_configuration_the_four_builtins_are_offered(host: ToolHost) -> None:
    names = [tool.name for tool in build(host)]
    assert names == ["echo", "files.append", "files.read", "files.write"]


async def test_an_application_tool_replaces_the_builtin_fallback_of_its_name(
    host: ToolHost,
) -> None:
    tools = build(host, factories=[f"{HERE}:replacing_echo"])
    assert [tool.name for tool in tools].count("echo") == 1
    outcome = await ToolDispatcher(tools).dispatch(invocation("echo", {"x": 1}))
    assert outcome.result is not None
    assert outcome.result.value == "from the application"


def test_two_application_tools_of_one_name_stop_start_up_naming_both_factories(
    host: ToolHost,
) -> None:
    specs = [f"{HERE}:crm_tools", f"{HERE}:more_crm_tools"]
    for _ in range(2):  # deterministic: the same message every time
        with pytest.raises(ConfigurationError) as caught:
            build(host, factories=specs)
        assert str(caught.value) == (
            f"tool 'crm.update' is declared by both factory '{specs[0]}' and factory "
            f"'{specs[1]}': tool names are one namespace, and only an application factory "
            "may replace a built-in"
        )


def test_a_contradictory_declared_tool_stops_start_up_naming_the_tool_and_rule(
    host: ToolHost,
) -> None:
    with pytest.raises(DefinitionError) as caught:
        build(host, factories=[f"{HERE}:contradictory"])
    assert caught.value.tool == "cache.flush"
    assert "read_only tool may not hold write capabilities" in str(caught.value)
    assert f"{HERE}:contradictory" in str(caught.value)


def test_a_factory_that_raises_stops_start_up_naming_it(host: ToolHost) -> None:
    with pytest.raises(ConfigurationError, match=r"crashing.*factory is broken"):
        build(host, factories=[f"{HERE}:crashing"])


def test_a_factory_returning_non_tools_stops_start_up(host: ToolHost) -> None:
    with pytest.raises(ConfigurationError, match="is not a tool"):
        build(host, factories=[f"{HERE}:not_tools"])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon_here", "must be 'package.module:factory'"),
        ("tests.unit.tools.nonexistent:make", "cannot import"),
        (f"{HERE}:missing", "no callable"),
    ],
)
def test_an_unusable_factory_spec_stops_start_up(host: ToolHost, spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build(host, factories=[spec])


def test_an_unknown_key_in_the_tools_section_stops_start_up(host: ToolHost) -> None:
    with pytest.raises(ConfigurationError, match=r"\[tools\] scan"):
        build(host, scan=True)


def test_factories_receive_the_host(host: ToolHost) -> None:
    assert "host.aware" in [tool.name for tool in build(host, factories=[f"{HERE}:host_aware"])]


def test_builtins_can_be_turned_off(host: ToolHost) -> None:
    assert [t.name for t in build(host, builtins=False, factories=[f"{HERE}:crm_tools"])] == [
        "crm.update"
    ]


def test_the_builtin_plan_is_the_same_on_every_start(host: ToolHost) -> None:
    first = describe_plan(StaticToolPlanSource(ToolDispatcher(build(host))).current)
    again = describe_plan(StaticToolPlanSource(ToolDispatcher(build(host))).current)
    assert first == again
    assert [row["name"] for row in first] == ["echo", "files.append", "files.read", "files.write"]
