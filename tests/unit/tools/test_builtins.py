"""Built-in tools, confined to the sandbox (issue 3)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from arvis.tools import NullReporter, ToolDispatcher, ToolExecutionError, ToolResult, builtin_tools
from arvis.tools.builtins import FilesAppendTool, FilesReadTool, FilesWriteTool
from arvis.tools.outcome import DispatchOutcome
from tests.support.fakes import RecordingReporter, invocation


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    path = tmp_path / "sandbox"
    path.mkdir()
    return path


async def run(tool: Any, payload: dict[str, Any], reporter: Any = None) -> ToolResult:
    result: ToolResult = await tool.execute(
        invocation(tool.name, payload), reporter or NullReporter()
    )
    return result


def escaped(result: ToolResult) -> bool:
    problem = result.problem
    return (
        problem is not None
        and problem.code == "path_outside_sandbox"
        and problem.effect_started is False
    )


def test_the_four_builtins_carry_the_declared_metadata(sandbox: Path) -> None:
    rows = {
        t.name: (
            t.definition.effect.value,
            t.definition.replay_safety.value,
            t.definition.capabilities,
        )
        for t in builtin_tools(sandbox)
    }
    assert rows == {
        "echo": ("read_only", "safe", ()),
        "files.read": ("read_only", "safe", ()),
        "files.write": ("mutating", "idempotent", ("filesystem.write",)),
        "files.append": ("mutating", "unsafe", ("filesystem.write",)),
    }


def test_builtin_fingerprints_are_the_same_on_every_build(sandbox: Path, tmp_path: Path) -> None:
    first = [t.definition.fingerprint for t in builtin_tools(sandbox)]
    again = [t.definition.fingerprint for t in builtin_tools(tmp_path / "elsewhere")]
    assert first == again


async def test_echo_returns_its_payload(sandbox: Path) -> None:
    dispatcher = ToolDispatcher(builtin_tools(sandbox))
    outcome: DispatchOutcome = await dispatcher.dispatch(
        invocation("echo", {"b": [1, 2], "a": "x"})
    )
    assert outcome.result == ToolResult.ok({"a": "x", "b": [1, 2]})


@pytest.mark.parametrize("tool_class", [FilesReadTool, FilesWriteTool, FilesAppendTool])
async def test_an_absolute_path_is_a_problem_with_the_effect_not_started(
    sandbox: Path, tool_class: Any
) -> None:
    result = await run(tool_class(sandbox), {"path": "/etc/passwd", "content": "x", "line": "x"})
    assert escaped(result)


@pytest.mark.parametrize("tool_class", [FilesReadTool, FilesWriteTool, FilesAppendTool])
async def test_dot_dot_is_a_problem_with_the_effect_not_started(
    sandbox: Path, tool_class: Any
) -> None:
    result = await run(tool_class(sandbox), {"path": "a/../../x", "content": "x", "line": "x"})
    assert escaped(result)


@pytest.mark.parametrize("tool_class", [FilesReadTool, FilesWriteTool, FilesAppendTool])
async def test_a_symlink_out_of_the_sandbox_is_a_problem_with_the_effect_not_started(
    sandbox: Path, tmp_path: Path, tool_class: Any
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (sandbox / "link").symlink_to(outside)
    result = await run(
        tool_class(sandbox), {"path": "link/secret.txt", "content": "x", "line": "x"}
    )
    assert escaped(result)
    assert (outside / "secret.txt").read_text() == "secret"


async def test_a_symlink_inside_the_sandbox_is_followed(sandbox: Path) -> None:
    (sandbox / "real").mkdir()
    (sandbox / "real" / "a.txt").write_text("hello")
    (sandbox / "alias").symlink_to(sandbox / "real")
    result = await run(FilesReadTool(sandbox), {"path": "alias/a.txt"})
    assert result.value == {"path": "alias/a.txt", "content": "hello"}


async def test_files_read_of_a_missing_file_is_a_problem_not_started(sandbox: Path) -> None:
    result = await run(FilesReadTool(sandbox), {"path": "missing.txt"})
    assert result.problem is not None
    assert result.problem.code == "not_found"
    assert result.problem.effect_started is False


async def test_files_write_replaces_the_whole_content_and_reports_the_start(sandbox: Path) -> None:
    (sandbox / "notes").mkdir()
    (sandbox / "notes" / "a.txt").write_text("a much longer old content")
    reporter = RecordingReporter()
    result = await run(FilesWriteTool(sandbox), {"path": "notes/a.txt", "content": "new"}, reporter)
    assert result.value == {"path": "notes/a.txt", "bytes": 3}
    assert (sandbox / "notes" / "a.txt").read_text() == "new"
    assert [kind for kind, _, _ in reporter.events] == ["effect_started"]


async def test_files_write_is_atomic_a_failed_write_leaves_the_old_content(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = sandbox / "a.txt"
    target.write_text("old")

    def failing_replace(src: str, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(ToolExecutionError) as caught:
        await run(FilesWriteTool(sandbox), {"path": "a.txt", "content": "new content"})
    assert caught.value.effect_started is True
    assert caught.value.retryable is True
    assert target.read_text() == "old"
    assert sorted(os.listdir(sandbox)) == ["a.txt"]  # no temp file left


async def test_files_write_that_cannot_stage_did_not_start(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_fsync(fd: int) -> None:
        raise OSError("io error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(ToolExecutionError) as caught:
        await run(FilesWriteTool(sandbox), {"path": "a.txt", "content": "x"})
    assert caught.value.effect_started is False
    assert os.listdir(sandbox) == []


async def test_files_append_adds_one_line(sandbox: Path) -> None:
    tool = FilesAppendTool(sandbox)
    await run(tool, {"path": "log/app.log", "line": "one"})
    await run(tool, {"path": "log/app.log", "line": "two"})
    assert (sandbox / "log" / "app.log").read_text() == "one\ntwo\n"


async def test_files_read_returns_the_content(sandbox: Path) -> None:
    (sandbox / "a.txt").write_text("héllo")
    result = await run(FilesReadTool(sandbox), {"path": "a.txt"})
    assert result.value == {"path": "a.txt", "content": "héllo"}
