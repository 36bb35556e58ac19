"""Built-in tools for the quick start: ``echo`` and sandboxed ``files.*``.

They are fallbacks: an application tool of the same name replaces one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError
from arvis.tools.sandbox import MAX_PATH_CHARS, SandboxViolation, confine

MAX_FILE_BYTES = 1024 * 1024

_PATH = {"type": "string", "minLength": 1, "maxLength": MAX_PATH_CHARS}


def _schema(**properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(properties),
        "additionalProperties": False,
    }


ECHO = ToolDefinition(
    name="echo",
    description="Return the payload unchanged.",
    input_schema={"type": "object"},
    effect=Effect.READ_ONLY,
    replay_safety=ReplaySafety.SAFE,
)
FILES_READ = ToolDefinition(
    name="files.read",
    description="Read a UTF-8 text file from the sandbox.",
    input_schema=_schema(path=_PATH),
    effect=Effect.READ_ONLY,
    replay_safety=ReplaySafety.SAFE,
)
FILES_WRITE = ToolDefinition(
    name="files.write",
    description="Replace a sandbox file's whole content with UTF-8 text, atomically.",
    input_schema=_schema(path=_PATH, content={"type": "string", "maxLength": MAX_FILE_BYTES}),
    effect=Effect.MUTATING,
    replay_safety=ReplaySafety.IDEMPOTENT,
    capabilities=["filesystem.write"],
)
FILES_APPEND = ToolDefinition(
    name="files.append",
    description="Append one line of UTF-8 text to a sandbox file.",
    input_schema=_schema(
        path=_PATH, line={"type": "string", "maxLength": 65536, "pattern": "^[^\\r\\n]*$"}
    ),
    effect=Effect.MUTATING,
    replay_safety=ReplaySafety.UNSAFE,
    capabilities=["filesystem.write"],
)


class _Builtin:
    definition: ToolDefinition

    def __init__(self, sandbox_dir: Path) -> None:
        self.sandbox_dir = sandbox_dir

    @property
    def name(self) -> str:
        return self.definition.name

    def _target(self, invocation: ToolInvocation) -> tuple[str, Path]:
        payload = invocation.payload.value
        raw = payload.get("path") if isinstance(payload, dict) else None
        return str(raw), confine(self.sandbox_dir, raw)


def _refused(exc: SandboxViolation) -> ToolResult:
    return ToolResult.fail(exc.code, exc.message, effect_started=False)


class EchoTool(_Builtin):
    definition = ECHO

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        return ToolResult.ok(invocation.payload.value)


class FilesReadTool(_Builtin):
    definition = FILES_READ

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        try:
            raw, target = self._target(invocation)
        except SandboxViolation as exc:
            return _refused(exc)
        try:
            data = await asyncio.to_thread(_read_bounded, target)
        except OSError:  # missing, a directory, unreadable: nothing was read
            return ToolResult.fail(
                "not_found", f"no readable file at {raw!r}", effect_started=False
            )
        if data is None:
            return ToolResult.fail(
                "too_large", f"larger than {MAX_FILE_BYTES} bytes", effect_started=False
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ToolResult.fail("not_text", f"{raw!r} is not UTF-8 text", effect_started=False)
        return ToolResult.ok({"path": raw, "content": text})


def _read_bounded(target: Path) -> bytes | None:
    with target.open("rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    return None if len(data) > MAX_FILE_BYTES else data


class FilesWriteTool(_Builtin):
    definition = FILES_WRITE

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        try:
            raw, target = self._target(invocation)
        except SandboxViolation as exc:
            return _refused(exc)
        if target.is_dir():
            return ToolResult.fail(
                "is_a_directory", f"{raw!r} is a directory", effect_started=False
            )
        data = str(invocation.payload.value.get("content", "")).encode("utf-8")
        try:
            temp = await asyncio.to_thread(_stage, target, data)
        except OSError:
            raise ToolExecutionError(
                invocation.call_id,
                effect_started=False,
                retryable=True,
                code="io_error",
                message=f"could not stage the new content of {raw!r}",
            ) from None
        try:
            # The replace is the point of no return: before it, the target is untouched.
            await reporter.effect_started(invocation.call_id)
            await asyncio.to_thread(_commit, temp, target)
        except OSError:
            raise ToolExecutionError(
                invocation.call_id,
                effect_started=True,
                retryable=True,
                code="io_error",
                message=f"could not replace {raw!r}",
            ) from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
        return ToolResult.ok({"path": raw, "bytes": len(data)})


def _stage(target: Path, data: bytes) -> str:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        os.unlink(temp)
        raise
    return temp


def _commit(temp: str, target: Path) -> None:
    os.replace(temp, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself must survive a crash
    finally:
        os.close(directory)


class FilesAppendTool(_Builtin):
    definition = FILES_APPEND

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        try:
            raw, target = self._target(invocation)
        except SandboxViolation as exc:
            return _refused(exc)
        if target.is_dir():
            return ToolResult.fail(
                "is_a_directory", f"{raw!r} is a directory", effect_started=False
            )
        data = (str(invocation.payload.value.get("line", "")) + "\n").encode("utf-8")
        try:
            fd = await asyncio.to_thread(_open_for_append, target)
        except OSError:
            return ToolResult.fail("io_error", f"could not open {raw!r}", effect_started=False)
        try:
            await reporter.effect_started(invocation.call_id)
            await asyncio.to_thread(_append, fd, data)
        except OSError:
            # A short write may have landed part of the line: nobody can say.
            raise ToolExecutionError(
                invocation.call_id,
                effect_started=None,
                retryable=False,
                code="io_error",
                message=f"appending to {raw!r} failed part-way",
            ) from None
        finally:
            os.close(fd)
        return ToolResult.ok({"path": raw, "bytes": len(data)})


def _open_for_append(target: Path) -> int:
    target.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(target, flags, 0o644)


def _append(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def builtin_tools(sandbox_dir: Path) -> list[Tool]:
    """The four built-ins, confined to ``sandbox_dir``."""
    return [
        EchoTool(sandbox_dir),
        FilesReadTool(sandbox_dir),
        FilesWriteTool(sandbox_dir),
        FilesAppendTool(sandbox_dir),
    ]
