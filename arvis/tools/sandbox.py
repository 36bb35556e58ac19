"""Confinement of built-in file tools to ``$ARVIS_DATA_DIR/sandbox``."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from arvis.domain.errors import ArvisError

MAX_PATH_CHARS = 1024


class SandboxViolation(ArvisError):
    """A path that is absolute, climbs with ``..`` or resolves outside the sandbox."""

    code = "path_outside_sandbox"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"path {path!r}: {reason}")
        self.path = path
        self.reason = reason


def confine(sandbox: Path, raw: object) -> Path:
    """The resolved path of ``raw`` inside ``sandbox``, or :class:`SandboxViolation`.

    Symlinks are resolved before the check, so a link pointing out is refused.
    A link swapped in after the check (a race with another local process) is
    not defended against: the sandbox directory is the operator's, not the
    caller's.
    """
    if not isinstance(raw, str) or not raw or len(raw) > MAX_PATH_CHARS or "\x00" in raw:
        raise SandboxViolation(
            str(raw)[:80], f"must be a relative path of 1-{MAX_PATH_CHARS} chars"
        )
    pure = PurePosixPath(raw)
    # "." has no parts at all; it names the sandbox itself, refused below.
    if pure.is_absolute() or raw.startswith("\\") or (pure.parts and ":" in pure.parts[0]):
        raise SandboxViolation(raw, "absolute paths are not allowed")
    if ".." in pure.parts or "\\" in raw:
        raise SandboxViolation(raw, "'..' and backslashes are not allowed")
    root = sandbox.resolve()
    resolved = (root / pure).resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise SandboxViolation(raw, "resolves outside the sandbox (through a symlink)")
    return resolved
