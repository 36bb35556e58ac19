"""Built-in tools, confined to the sandbox (issue 3)."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from arvis.domain.errors import ArvisError
from arvis.tools import NullReporter, ToolDispatcher, ToolExecutionError, ToolResult, builtin_tools
from arvis.tools.builtins import MAX_FILE_BYTES, FilesAppendTool, FilesReadTool, FilesWriteTool
from arvis.tools.outcome import DispatchOutcome
from arvis.tools.sandbox import confine
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

    def failing_replace(src: str, dst: Any, **dir_fds: int) -> None:
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


# Issue 12, finding 11: no input the agent controls may end as an untyped crash
# (EFFECT_STATE_UNKNOWN for a mutating tool), and a refusal never starts the effect.

ALL_FILE_TOOLS = [FilesReadTool, FilesWriteTool, FilesAppendTool]


async def refusal(tool: Any, path: str) -> str:
    """The code of the problem ``tool`` answers for ``path``, checking that nothing started."""
    reporter = RecordingReporter()
    result = await run(tool, {"path": path, "content": "new", "line": "new"}, reporter)
    assert result.problem is not None, result
    assert result.problem.effect_started is False
    assert reporter.events == []  # refused before the point of no return
    return result.problem.code


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root`` with the bytes of its regular files."""
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
        if not path.is_fifo()
    }


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("secret\n")
    return path


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
@pytest.mark.parametrize("path", ["l" * 256, "l" * 300, "dir/" + "l" * 300, "é" * 128])
async def test_a_component_over_255_bytes_is_refused_as_name_too_long(
    sandbox: Path, tool_class: Any, path: str
) -> None:
    assert await refusal(tool_class(sandbox), path) == "name_too_long"
    assert os.listdir(sandbox) == []  # not even the parent directory was made


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
async def test_a_whole_path_longer_than_the_system_allows_is_name_too_long(
    sandbox: Path, tool_class: Any
) -> None:
    deep = "/".join(["😀" * 60] * 17)  # 1,036 characters, 4,096 bytes in UTF-8
    assert await refusal(tool_class(sandbox), deep[:1024]) == "name_too_long"
    assert os.listdir(sandbox) == []


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
@pytest.mark.parametrize("path", ["loop", "loop/a.txt", "ping/a.txt"])
async def test_a_symlink_loop_is_refused_as_symlink_loop(
    sandbox: Path, tool_class: Any, path: str
) -> None:
    (sandbox / "loop").symlink_to("loop")
    (sandbox / "ping").symlink_to("pong")
    (sandbox / "pong").symlink_to("ping")
    assert await refusal(tool_class(sandbox), path) == "symlink_loop"


@contextmanager
def fifo_with_a_peer(path: Path, tool_class: Any) -> Iterator[Callable[[], bool]]:
    """A FIFO whose other end waits for ``tool_class``; yields "was the FIFO left alone?".

    With a peer a tool that opens the FIFO does not block, so a regression
    fails the test instead of hanging it.
    """
    os.mkfifo(path)
    if tool_class is FilesReadTool:
        # The writer's open blocks until some reader opens the FIFO.
        writer = threading.Thread(target=path.write_bytes, args=(b"from the pipe",))
        writer.start()
        try:
            yield writer.is_alive
        finally:
            reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            writer.join()
            os.close(reader)
    elif tool_class is FilesAppendTool:
        reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            yield lambda: os.read(reader, 100) == b""
        finally:
            os.close(reader)
    else:
        yield path.is_fifo


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
@pytest.mark.parametrize("path", ["pipe", "alias"])
async def test_a_fifo_or_a_symlink_to_one_is_refused_and_never_opened(
    sandbox: Path, tool_class: Any, path: str
) -> None:
    (sandbox / "alias").symlink_to("pipe")
    with fifo_with_a_peer(sandbox / "pipe", tool_class) as left_alone:
        assert await refusal(tool_class(sandbox), path) == "not_a_regular_file"
        assert left_alone()


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
async def test_a_device_is_refused_without_being_opened(sandbox: Path, tool_class: Any) -> None:
    try:
        os.mknod(sandbox / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device needs CAP_MKNOD")
    assert await refusal(tool_class(sandbox), "null") == "not_a_regular_file"


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
async def test_a_hard_link_to_a_file_outside_the_sandbox_is_refused(
    sandbox: Path, outside: Path, tool_class: Any
) -> None:
    os.link(outside / "secret.txt", sandbox / "alias.txt")
    before = snapshot(outside)
    assert await refusal(tool_class(sandbox), "alias.txt") == "linked_file"
    assert snapshot(outside) == before
    assert (sandbox / "alias.txt").read_text() == "secret\n"


async def test_a_symlink_inside_the_sandbox_to_a_hard_linked_file_is_refused(
    sandbox: Path, outside: Path
) -> None:
    os.link(outside / "secret.txt", sandbox / "alias.txt")
    (sandbox / "pointer.txt").symlink_to("alias.txt")
    assert await refusal(FilesReadTool(sandbox), "pointer.txt") == "linked_file"


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
@pytest.mark.parametrize("path", ["dir", "alias"])
async def test_a_directory_or_a_symlink_to_one_is_refused_as_is_a_directory(
    sandbox: Path, tool_class: Any, path: str
) -> None:
    (sandbox / "dir").mkdir()
    (sandbox / "dir" / "keep.txt").write_text("kept")
    (sandbox / "alias").symlink_to("dir")
    assert await refusal(tool_class(sandbox), path) == "is_a_directory"
    assert (sandbox / "dir" / "keep.txt").read_text() == "kept"


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
@pytest.mark.parametrize("path", ["file.txt/new.txt", "file.txt/deeper/new.txt", "pipe/new.txt"])
async def test_a_parent_that_is_not_a_directory_is_refused_as_not_a_directory(
    sandbox: Path, tool_class: Any, path: str
) -> None:
    (sandbox / "file.txt").write_text("plain")
    os.mkfifo(sandbox / "pipe")
    assert await refusal(tool_class(sandbox), path) == "not_a_directory"
    assert (sandbox / "file.txt").read_text() == "plain"


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
@pytest.mark.parametrize("path", ["name/", "dir/name/", "name/.", "name//"])
async def test_a_path_without_a_file_name_is_refused_as_invalid_path(
    sandbox: Path, tool_class: Any, path: str
) -> None:
    assert await refusal(tool_class(sandbox), path) == "invalid_path"
    assert os.listdir(sandbox) == []


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
@pytest.mark.parametrize(
    ("path", "code"),
    [(".", "path_outside_sandbox"), ("./", "path_outside_sandbox"), ("", "invalid_path")],
)
async def test_a_path_naming_the_sandbox_itself_is_refused(
    sandbox: Path, tool_class: Any, path: str, code: str
) -> None:
    assert await refusal(tool_class(sandbox), path) == code


@pytest.mark.parametrize("raw", ["a\x00b", None, 7, "x" * 1025, "a\ud800"])
def test_a_path_that_is_not_a_plain_string_is_refused_as_invalid_path(
    sandbox: Path, raw: object
) -> None:
    # The payload check refuses NUL and lone surrogates first; confine stands on its own.
    with pytest.raises(ArvisError) as caught:
        confine(sandbox, raw)
    assert caught.value.code == "invalid_path"


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
async def test_a_refusal_of_a_long_unprintable_path_keeps_its_detail_short(
    sandbox: Path, tool_class: Any
) -> None:
    path = "\x01/" * 512  # 1,024 characters whose repr is four times as long
    reporter = RecordingReporter()
    result = await run(tool_class(sandbox), {"path": path, "content": "x", "line": "x"}, reporter)
    assert result.problem is not None
    assert result.problem.code == "invalid_path"
    assert len(result.problem.detail) < 300


async def test_files_read_of_a_long_unprintable_missing_path_is_not_found(sandbox: Path) -> None:
    assert await refusal(FilesReadTool(sandbox), "\x01/" * 511 + "\x01") == "not_found"


async def test_files_read_of_text_containing_u0000_is_not_text(sandbox: Path) -> None:
    (sandbox / "nul.txt").write_bytes(b"before\x00after")
    assert await refusal(FilesReadTool(sandbox), "nul.txt") == "not_text"


async def test_files_read_of_bytes_that_are_not_utf8_is_not_text(sandbox: Path) -> None:
    (sandbox / "latin1.txt").write_bytes("héllo".encode("latin-1"))
    assert await refusal(FilesReadTool(sandbox), "latin1.txt") == "not_text"


async def test_files_read_of_a_file_over_the_limit_is_too_large(sandbox: Path) -> None:
    (sandbox / "big.txt").write_bytes(b"x" * (MAX_FILE_BYTES + 1))
    assert await refusal(FilesReadTool(sandbox), "big.txt") == "too_large"


async def test_files_read_of_a_missing_parent_is_not_found(sandbox: Path) -> None:
    assert await refusal(FilesReadTool(sandbox), "missing/a.txt") == "not_found"


@pytest.mark.parametrize("length", [245, 250, 255])
async def test_files_write_works_for_a_name_of_up_to_255_bytes(sandbox: Path, length: int) -> None:
    name = "n" * length
    result = await run(FilesWriteTool(sandbox), {"path": name, "content": "long name"})
    assert result.value == {"path": name, "bytes": 9}
    assert os.listdir(sandbox) == [name]  # the temporary file is gone
    assert (sandbox / name).read_text() == "long name"


async def test_files_append_works_for_a_name_of_255_bytes(sandbox: Path) -> None:
    name = "a" * 255
    result = await run(FilesAppendTool(sandbox), {"path": name, "line": "x"})
    assert result.value == {"path": name, "bytes": 2}


async def test_files_write_makes_a_deep_path_within_the_limits(sandbox: Path) -> None:
    deep = "d/" * 500 + "leaf.txt"
    result = await run(FilesWriteTool(sandbox), {"path": deep, "content": "deep"})
    assert result.value == {"path": deep, "bytes": 4}
    read = await run(FilesReadTool(sandbox), {"path": deep})
    assert read.value == {"path": deep, "content": "deep"}


async def test_files_write_through_a_dangling_symlink_inside_creates_its_target(
    sandbox: Path,
) -> None:
    (sandbox / "alias.txt").symlink_to("real.txt")
    result = await run(FilesWriteTool(sandbox), {"path": "alias.txt", "content": "via link"})
    assert result.value == {"path": "alias.txt", "bytes": 8}
    assert (sandbox / "real.txt").read_text() == "via link"
    assert (sandbox / "alias.txt").is_symlink()


@pytest.mark.parametrize("tool_class", ALL_FILE_TOOLS)
async def test_a_dangling_symlink_pointing_out_is_refused(
    sandbox: Path, outside: Path, tool_class: Any
) -> None:
    (sandbox / "alias.txt").symlink_to(outside / "new.txt")
    assert await refusal(tool_class(sandbox), "alias.txt") == "path_outside_sandbox"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


async def test_files_write_keeps_no_temporary_file_when_the_name_is_refused(
    sandbox: Path,
) -> None:
    (sandbox / "dir").mkdir()
    assert await refusal(FilesWriteTool(sandbox), "dir") == "is_a_directory"
    assert os.listdir(sandbox) == ["dir"]
    assert os.listdir(sandbox / "dir") == []


async def test_a_cancelled_append_keeps_its_file_open_until_its_write_is_done(
    sandbox: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    failures: list[OSError] = []
    real_fsync = os.fsync

    def held_fsync(fd: int) -> None:
        entered.set()
        release.wait()
        try:
            real_fsync(fd)
        except OSError as exc:  # the descriptor was closed under the write
            failures.append(exc)
        finally:
            finished.set()

    monkeypatch.setattr(os, "fsync", held_fsync)
    call = asyncio.create_task(run(FilesAppendTool(sandbox), {"path": "a.log", "line": "one"}))
    await asyncio.to_thread(entered.wait)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    release.set()
    await asyncio.to_thread(finished.wait)

    assert failures == []
    assert (sandbox / "a.log").read_text() == "one\n"
