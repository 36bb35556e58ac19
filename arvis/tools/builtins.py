"""Built-in tools for the quick start: ``echo`` and sandboxed ``files.*``.

They are fallbacks: an application tool of the same name replaces one.

A file tool exposes its path's canonical form (``canonical``: normalised,
sandbox-relative, symlinks inside resolved), which policy decides on and which
the tool then opens; a path that has none (``invalid_path``,
``path_outside_sandbox``, ``name_too_long``, ``symlink_loop``) is refused at
admission, ``payload_invalid``, before anything is admitted (DESIGN §10).
A file tool answers input it refuses as a problem result with
``effect_started=False`` (boundary ``EFFECT_NOT_STARTED``), so a corrected
call, or the same call once the cause is gone, may run — even the
replay-unsafe ``files.append``. Every check happens before the tool reports
its point of no return. The problem codes, which stay stable:

``invalid_path``
    not a string, empty, over 1024 characters, NUL, or no file name (ends in ``/``)
``path_outside_sandbox``
    absolute, ``..``, a backslash, the sandbox itself, or resolves outside it
``name_too_long``
    a component over 255 bytes, or a whole path longer than the system allows
``symlink_loop``
    symbolic links that never end (or a link swapped in during the call)
``not_found``
    ``files.read``: nothing at the path
``not_a_directory``
    a parent component is a file (or another non-directory)
``is_a_directory``
    the path names a directory
``not_a_regular_file``
    a FIFO, socket or device: never opened for reading or writing
``linked_file``
    a file with more than one hard link, whose other name may be outside the sandbox
``permission_denied``
    the operating system refused access
``too_large``
    ``files.read``: more than 1 MiB
``not_text``
    ``files.read``: not UTF-8, or holds U+0000 (which PostgreSQL text cannot store)
``io_error``
    a real I/O failure: before the start it did not start; after the start
    ``files.write`` failed (retryable, the old content is intact) and
    ``files.append`` is unknown (a part of the line may have landed)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.tools.base import Reporter, Tool, ToolInvocation, ToolResult
from arvis.tools.errors import ToolExecutionError
from arvis.tools.sandbox import (
    MAX_PATH_CHARS,
    FileRefusal,
    NotFound,
    canonical_path,
    confine,
    inspect_entry,
    open_entry,
    open_parent,
    shown,
)

MAX_FILE_BYTES = 1024 * 1024

_T = TypeVar("_T")
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


class _FileTool(_Builtin):
    def canonical(self, value: Any) -> Any:
        """The payload with its ``path`` as this tool opens it (DESIGN §10).

        Admission shows policy this form; a path the tool would refuse — absolute,
        ``..``, out through a symlink, a loop, too long — is refused there, before
        anything is recorded as admitted. The body opens :func:`confine`'s answer for
        the same path, the function this form is computed by.
        """
        if not isinstance(value, dict):
            return value
        return {**value, "path": canonical_path(self.sandbox_dir, value.get("path"))}


def _field(invocation: ToolInvocation, name: str, default: object = None) -> object:
    payload = invocation.payload.value
    return payload.get(name, default) if isinstance(payload, dict) else default


def _refused(exc: FileRefusal) -> ToolResult:
    return ToolResult.fail(exc.code, exc.message, effect_started=False)


async def _run_to_completion(
    work: Callable[[], _T], *, on_late: Callable[[_T], None] | None = None
) -> _T:
    """Run ``work`` in a worker thread that a cancelled caller cannot abandon.

    A cancelled ``to_thread`` may never start its function, or may leave it
    running on a descriptor the caller then closes (and the kernel reuses).
    Here the function always runs to its end; a result nobody awaits any more
    is handed to ``on_late``, which releases what it holds.
    """
    future = asyncio.get_running_loop().run_in_executor(None, work)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        future.add_done_callback(functools.partial(_settle_late, on_late))
        raise


def _settle_late(on_late: Callable[[_T], None] | None, done: asyncio.Future[_T]) -> None:
    # The caller's cancellation is its outcome; a late error is only collected.
    if done.cancelled() or done.exception() is not None:
        return
    if on_late is not None:
        on_late(done.result())


class EchoTool(_Builtin):
    definition = ECHO

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        return ToolResult.ok(invocation.payload.value)


class FilesReadTool(_FileTool):
    definition = FILES_READ

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        raw = _field(invocation, "path")
        try:
            data = await asyncio.to_thread(_read, self.sandbox_dir, raw)
        except FileRefusal as exc:
            return _refused(exc)
        except OSError:
            return ToolResult.fail("io_error", f"could not read {shown(raw)}", effect_started=False)
        if data is None:
            return ToolResult.fail(
                "too_large", f"larger than {MAX_FILE_BYTES} bytes", effect_started=False
            )
        text = _text(data)
        if text is None:
            return ToolResult.fail(
                "not_text",
                f"{shown(raw)} is not UTF-8 text without U+0000",
                effect_started=False,
            )
        return ToolResult.ok({"path": str(raw), "content": text})


def _text(data: bytes) -> str | None:
    """``data`` as text; ``None`` if not UTF-8 or holding U+0000 (PostgreSQL text cannot)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def _read(sandbox: Path, raw: object) -> bytes | None:
    """The file's bytes, or ``None`` past :data:`MAX_FILE_BYTES`."""
    target = confine(sandbox, raw)
    directory = open_parent(target, raw, create=False)
    try:
        if inspect_entry(directory, target.name, raw) is None:
            raise NotFound(raw, "no such file")
        fd = open_entry(directory, target.name, raw, os.O_RDONLY)
    finally:
        os.close(directory)
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(fd).st_size > MAX_FILE_BYTES:
            return None
        data = handle.read(MAX_FILE_BYTES + 1)
    return None if len(data) > MAX_FILE_BYTES else data


class FilesWriteTool(_FileTool):
    definition = FILES_WRITE

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        raw = _field(invocation, "path")
        data = str(_field(invocation, "content", "")).encode("utf-8")
        try:
            staged = await _run_to_completion(
                functools.partial(_stage, self.sandbox_dir, raw, data), on_late=_Staged.discard
            )
        except FileRefusal as exc:
            return _refused(exc)
        except OSError:
            message = f"could not stage the new content of {shown(raw)}"
            raise _io_error(invocation, message, started=False, retryable=True) from None
        # The replace is the point of no return: before it, the target is untouched.
        await _start(invocation, reporter, staged.discard)
        try:
            await _run_to_completion(staged.commit)
        except OSError:
            message = f"could not replace {shown(raw)}"
            raise _io_error(invocation, message, started=True, retryable=True) from None
        return ToolResult.ok({"path": str(raw), "bytes": len(data)})


@dataclass(frozen=True, slots=True)
class _Staged:
    """New content, durable in a temporary file beside its target, not yet in place."""

    directory: int
    name: str
    temp: str

    def commit(self) -> None:
        try:
            os.replace(self.temp, self.name, src_dir_fd=self.directory, dst_dir_fd=self.directory)
            os.fsync(self.directory)  # the rename itself must survive a crash
        finally:
            self.discard()

    def discard(self) -> None:
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.temp, dir_fd=self.directory)
        finally:
            os.close(self.directory)


def _stage(sandbox: Path, raw: object, data: bytes) -> _Staged:
    target = confine(sandbox, raw)
    directory = open_parent(target, raw, create=True)
    try:
        # os.replace would swap a FIFO or a linked name for a new file; refuse
        # them like the other tools do, and a directory before the point of no return.
        inspect_entry(directory, target.name, raw)
        temp = _write_temp(directory, data)
    except BaseException:
        os.close(directory)
        raise
    return _Staged(directory, target.name, temp)


def _write_temp(directory: int, data: bytes) -> str:
    # A short name of its own, so a target name of up to 255 bytes still fits.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(3):
        temp = f".arvis-{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(temp, flags, 0o600, dir_fd=directory)
        except FileExistsError:
            continue
        try:
            _write_synced(fd, data)
        except BaseException:
            os.unlink(temp, dir_fd=directory)
            raise
        return temp
    raise FileExistsError(f"no free temporary name in {directory}")


def _write_synced(fd: int, data: bytes) -> None:
    """Write and sync ``data``; the descriptor is this function's to close."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


async def _start(
    invocation: ToolInvocation, reporter: Reporter, release: Callable[[], object]
) -> None:
    """Report the point of no return; if that fails, ``release`` what was prepared."""
    try:
        await reporter.effect_started(invocation.call_id)
    except BaseException:
        release()
        raise


def _io_error(
    invocation: ToolInvocation, message: str, *, started: bool | None, retryable: bool
) -> ToolExecutionError:
    return ToolExecutionError(
        invocation.call_id,
        effect_started=started,
        retryable=retryable,
        code="io_error",
        message=message,
    )


class FilesAppendTool(_FileTool):
    definition = FILES_APPEND

    async def execute(self, invocation: ToolInvocation, reporter: Reporter) -> ToolResult:
        raw = _field(invocation, "path")
        data = (str(_field(invocation, "line", "")) + "\n").encode("utf-8")
        try:
            fd = await _run_to_completion(
                functools.partial(_open_for_append, self.sandbox_dir, raw), on_late=os.close
            )
        except FileRefusal as exc:
            return _refused(exc)
        except OSError:
            return ToolResult.fail("io_error", f"could not open {shown(raw)}", effect_started=False)
        await _start(invocation, reporter, functools.partial(os.close, fd))
        try:
            await _run_to_completion(functools.partial(_write_synced, fd, data))
        except OSError:
            # A short write may have landed part of the line: nobody can say.
            message = f"appending to {shown(raw)} failed part-way"
            raise _io_error(invocation, message, started=None, retryable=False) from None
        return ToolResult.ok({"path": str(raw), "bytes": len(data)})


def _open_for_append(sandbox: Path, raw: object) -> int:
    target = confine(sandbox, raw)
    directory = open_parent(target, raw, create=True)
    try:
        inspect_entry(directory, target.name, raw)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        return open_entry(directory, target.name, raw, flags)
    finally:
        os.close(directory)


def builtin_tools(sandbox_dir: Path) -> list[Tool]:
    """The four built-ins, confined to ``sandbox_dir``."""
    return [
        EchoTool(sandbox_dir),
        FilesReadTool(sandbox_dir),
        FilesWriteTool(sandbox_dir),
        FilesAppendTool(sandbox_dir),
    ]
