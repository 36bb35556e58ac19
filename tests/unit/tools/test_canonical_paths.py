"""The canonical form of a file tool's path (DESIGN §10): what policy is shown is what the
tool opens — normalised, sandbox-relative, symlinks inside the sandbox resolved — and
what the tool would refuse has no canonical form."""

from __future__ import annotations

from pathlib import Path

import pytest

from arvis.tools.base import NullReporter
from arvis.tools.builtins import FilesWriteTool
from arvis.tools.sandbox import FileRefusal, canonical_path
from tests.support.fakes import invocation


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    root = tmp_path / "sandbox"
    (root / "secrets").mkdir(parents=True)
    (root / "alias").symlink_to("secrets")
    (root / "deep").mkdir()
    (root / "deep" / "up").symlink_to("../secrets")
    (tmp_path / "outside").mkdir()
    (root / "out").symlink_to(tmp_path / "outside")
    return root


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("secrets/keys", "secrets/keys"),
        ("./secrets/keys", "secrets/keys"),
        ("secrets//./k2", "secrets/k2"),
        ("./secrets//./k2", "secrets/k2"),
        ("alias/k3", "secrets/k3"),
        ("deep/up/k4", "secrets/k4"),
        ("Secrets/k5", "Secrets/k5"),  # another name on a case-sensitive filesystem
        ("notes/a.txt", "notes/a.txt"),
    ],
)
def test_a_path_is_shown_as_the_file_the_tool_opens(
    sandbox: Path, raw: str, canonical: str
) -> None:
    assert canonical_path(sandbox, raw) == canonical


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("a/../secrets/x", "path_outside_sandbox"),
        ("../secrets/x", "path_outside_sandbox"),
        ("/etc/passwd", "path_outside_sandbox"),
        ("out/x", "path_outside_sandbox"),
        (".", "path_outside_sandbox"),
        ("a\\..\\x", "path_outside_sandbox"),
        ("x/", "invalid_path"),
        ("", "invalid_path"),
    ],
)
def test_a_path_the_tool_would_refuse_has_no_canonical_form(
    sandbox: Path, raw: str, code: str
) -> None:
    with pytest.raises(FileRefusal) as refused:
        canonical_path(sandbox, raw)
    assert refused.value.code == code


async def test_the_tool_writes_where_its_canonical_form_says(sandbox: Path) -> None:
    tool = FilesWriteTool(sandbox)
    payload = {"path": "./alias//./k6", "content": "x"}
    assert tool.canonical(payload) == {"path": "secrets/k6", "content": "x"}
    result = await tool.execute(invocation("files.write", payload), NullReporter())
    assert not result.is_problem
    assert (sandbox / tool.canonical(payload)["path"]).read_text() == "x"
