"""Confinement of built-in file tools to ``$ARVIS_DATA_DIR/sandbox``.

Everything here runs before a file tool's point of no return. A refusal is a
:class:`FileRefusal` whose class-level ``code`` the tool answers as a problem
result with ``effect_started=False``; the codes are listed in
:mod:`arvis.tools.builtins`. An ``OSError`` that escapes these functions is a
real I/O failure, never something the caller's input could cause.

The agent controls the path and, through earlier calls, which files and
directories exist; the operator or another process may add symlinks, FIFOs,
devices and hard links. So a final component is never followed (``O_NOFOLLOW``),
never opened unless it is a regular file, never opened blocking, and a file
with a second hard link (which may live outside the sandbox) is refused. A
parent directory swapped for a symlink between the check and the open (a race
with another local process) is not defended against: the sandbox directory
is the operator's, not the caller's.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from arvis.domain.errors import ArvisError

MAX_PATH_CHARS = 1024
NAME_MAX = 255
"""Bytes in one path component: the limit of every Linux filesystem ARVIS runs on."""
PATH_MAX = 4096
"""Bytes in a whole path handed to the kernel, including the terminating NUL."""

# Flags shared by every open of an entry the caller named: never follow a final
# symlink, never wait for a FIFO's other end, never leak into a child process.
OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def shown(raw: object) -> str:
    """The caller's path as it appears in a message: quoted, and short enough for any detail."""
    text = repr(raw)
    return text if len(text) <= 120 else f"{text[:117]}..."


class FileRefusal(ArvisError, code="file_refused"):
    """Input a file tool refuses before it touched anything."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"path {shown(path)}: {reason}")
        self.path = str(path)[:MAX_PATH_CHARS]
        self.reason = reason


class InvalidPath(FileRefusal, code="invalid_path"):
    """Not a string, empty, too long, NUL, not Unicode, or names no file (a trailing ``/``)."""


class SandboxViolation(FileRefusal, code="path_outside_sandbox"):
    """A path that is absolute, climbs with ``..`` or resolves outside the sandbox."""


class NameTooLong(FileRefusal, code="name_too_long"):
    """A component over :data:`NAME_MAX` bytes, or a whole path over :data:`PATH_MAX`."""


class SymlinkLoop(FileRefusal, code="symlink_loop"):
    """Symbolic links that never end, or a link where the resolved path had none."""


class NotFound(FileRefusal, code="not_found"):
    """Nothing to read at the path."""


class NotADirectory(FileRefusal, code="not_a_directory"):
    """A parent component exists and is not a directory."""


class IsADirectory(FileRefusal, code="is_a_directory"):
    """The path names a directory where a file is expected."""


class NotARegularFile(FileRefusal, code="not_a_regular_file"):
    """A FIFO, socket or device: opening one may block or act on hardware."""


class LinkedFile(FileRefusal, code="linked_file"):
    """A file with more than one hard link: the other name may be outside the sandbox."""


class PermissionDenied(FileRefusal, code="permission_denied"):
    """The operating system refused access to the path."""


_BY_ERRNO: dict[int, tuple[type[FileRefusal], str]] = {
    errno.ENAMETOOLONG: (NameTooLong, "the path is longer than the system allows"),
    errno.ELOOP: (SymlinkLoop, "too many levels of symbolic links"),
    errno.ENOENT: (NotFound, "no such file or directory"),
    errno.ENOTDIR: (NotADirectory, "a parent component is not a directory"),
    errno.EISDIR: (IsADirectory, "is a directory"),
    errno.ENXIO: (NotARegularFile, "is not a regular file"),
    errno.EACCES: (PermissionDenied, "permission denied"),
    errno.EPERM: (PermissionDenied, "operation not permitted"),
}


@contextmanager
def refusing(raw: object) -> Iterator[None]:
    """Turn an ``OSError`` that the path explains into its :class:`FileRefusal`."""
    try:
        yield
    except OSError as exc:
        known = _BY_ERRNO.get(exc.errno or 0)
        if known is None:
            raise
        refusal, reason = known
        raise refusal(raw, reason) from None


def confine(sandbox: Path, raw: object) -> Path:
    """The resolved path of ``raw`` inside ``sandbox``, or a :class:`FileRefusal`.

    Symlinks are resolved before the check, so a link pointing out is refused
    and a link inside the sandbox is followed.
    """
    if not isinstance(raw, str) or not raw or len(raw) > MAX_PATH_CHARS or "\x00" in raw:
        raise InvalidPath(raw, f"must be a relative path of 1-{MAX_PATH_CHARS} chars, no NUL")
    pure = PurePosixPath(raw)
    if pure.is_absolute() or raw.startswith("\\") or (pure.parts and ":" in pure.parts[0]):
        raise SandboxViolation(raw, "absolute paths are not allowed")
    if ".." in pure.parts or "\\" in raw:
        raise SandboxViolation(raw, "'..' and backslashes are not allowed")
    if not pure.parts:  # ".", "./": the sandbox itself
        raise SandboxViolation(raw, "names the sandbox itself, not a file in it")
    # PurePosixPath drops a trailing "/" or "/."; the caller meant a directory.
    if raw.rsplit("/", 1)[-1] in ("", "."):
        raise InvalidPath(raw, "must name a file (it ends in '/' or '/.')")
    try:
        parts = [os.fsencode(part) for part in pure.parts]
    except UnicodeError:
        raise InvalidPath(raw, "is not valid Unicode") from None
    if any(len(part) > NAME_MAX for part in parts):
        raise NameTooLong(raw, f"a path component is longer than {NAME_MAX} bytes")
    try:
        root = sandbox.resolve()
        joined = root / pure
        if len(os.fsencode(joined)) >= PATH_MAX:
            raise NameTooLong(raw, f"the whole path is longer than {PATH_MAX - 1} bytes")
        with refusing(raw):
            resolved = joined.resolve()
    except RuntimeError:  # pathlib's report of a symlink loop (RecursionError included)
        raise SymlinkLoop(raw, "too many levels of symbolic links") from None
    if resolved == root or not resolved.is_relative_to(root):
        raise SandboxViolation(raw, "resolves outside the sandbox (through a symlink)")
    return resolved


def canonical_path(sandbox: Path, raw: object) -> str:
    """``raw`` in the form the file tools open it: normalised, symlinks inside the
    sandbox resolved, relative to the sandbox (``./secrets//./k2`` → ``secrets/k2``).

    It is :func:`confine`'s answer, which is also what the tools open, so what policy
    is shown (DESIGN §10) and what is opened cannot differ. Refuses what
    :func:`confine` refuses.
    """
    return confine(sandbox, raw).relative_to(sandbox.resolve()).as_posix()


def open_parent(target: Path, raw: object, *, create: bool) -> int:
    """A descriptor of ``target``'s directory, made first (with its parents) when ``create``.

    Everything after this opens names relative to the descriptor, so the
    directory checked is the directory written.
    """
    with refusing(raw):
        if create:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except FileExistsError:
                raise NotADirectory(raw, "a parent component is not a directory") from None
        return os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | OPEN_FLAGS)


def check_file(status: os.stat_result, raw: object) -> None:
    """Refuse anything but a regular file with exactly one hard link."""
    mode = status.st_mode
    if stat.S_ISLNK(mode):
        raise SymlinkLoop(raw, "a symbolic link appeared where the resolved path had none")
    if stat.S_ISDIR(mode):
        raise IsADirectory(raw, "is a directory")
    if not stat.S_ISREG(mode):
        raise NotARegularFile(raw, "is not a regular file (a FIFO, socket or device)")
    if status.st_nlink > 1:
        raise LinkedFile(raw, f"has {status.st_nlink} hard links; only a file with one is used")


def inspect_entry(directory: int, name: str, raw: object) -> os.stat_result | None:
    """``name`` in ``directory`` without following or opening it; ``None`` when absent.

    This spares a FIFO or a device the open; the authoritative check is
    :func:`check_file` on the opened descriptor.
    """
    with refusing(raw):
        try:
            status = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            return None
    check_file(status, raw)
    return status


def open_entry(directory: int, name: str, raw: object, flags: int, mode: int = 0o644) -> int:
    """Open ``name`` in ``directory`` with ``flags`` and check what was opened."""
    with refusing(raw):
        fd = os.open(name, flags | OPEN_FLAGS, mode, dir_fd=directory)
    try:
        check_file(os.fstat(fd), raw)
    except BaseException:
        os.close(fd)
        raise
    return fd
