"""The built-in file tools through the SyscallHandler, on a real sandbox (issue 12, finding 11).

What a user sees: input refused before anything is touched is journaled
``EFFECT_NOT_STARTED`` with a stable code — never a crash recorded as an
uncertain effect — so even the replay-unsafe ``files.append`` runs when the
same decision comes again after the cause is gone; FIFOs cannot pin the
worker threads the other tools need; nothing outside the sandbox is read or
written.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from arvis.domain.boundary import EffectBoundary
from arvis.lifecycle.policy.policy import PolicyConfig, TenantRules
from arvis.lifecycle.results import SyscallResult
from arvis.tools import builtin_tools
from tests.support.lifecycle import Harness, make_harness

SECRET = "the secret outside the sandbox\n"
# files.append is mutating and replay-unsafe, so it needs consent by default;
# exempt it, so what is under test is the retry table on its own.
APPEND_WITHOUT_CONSENT = PolicyConfig(default=TenantRules(no_consent_tools=["files.append"]))


@dataclass
class Files:
    harness: Harness
    sandbox: Path
    outside: Path

    def outside_state(self) -> dict[str, str]:
        return {str(p.relative_to(self.outside)): p.read_text() for p in self.outside.rglob("*")}

    def journal_text(self) -> str:
        rows = self.harness.sql(
            "SELECT body FROM journal_entries WHERE run_id = %s", self.harness.run_id
        )
        return "\n".join(row[0] for row in rows)


@pytest.fixture
async def files(database_url: str, tmp_path: Path) -> AsyncIterator[Files]:
    sandbox = tmp_path / "sandbox"
    outside = tmp_path / "outside"
    sandbox.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    harness = await make_harness(
        database_url,
        tools={},
        extra_tools=builtin_tools(sandbox),
        policy=APPEND_WITHOUT_CONSENT,
    )
    try:
        yield Files(harness, sandbox, outside)
    finally:
        await harness.close()


def refused_before_start(result: SyscallResult, code: str) -> bool:
    problem = result.problem or {}
    return (
        result.outcome == "executed"
        and result.boundary is EffectBoundary.EFFECT_NOT_STARTED
        and problem.get("code") == code
        and problem.get("effect_started") is False
        and not result.audit_incomplete
    )


Setup = Callable[[Path, Path], None]


def nothing(sandbox: Path, outside: Path) -> None:
    return None


def loop(sandbox: Path, outside: Path) -> None:
    (sandbox / "loop").symlink_to("loop")


def fifo(sandbox: Path, outside: Path) -> None:
    os.mkfifo(sandbox / "pipe")


def hard_link_out(sandbox: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", sandbox / "alias.txt")


def symlink_out(sandbox: Path, outside: Path) -> None:
    (sandbox / "link").symlink_to(outside)


def directory(sandbox: Path, outside: Path) -> None:
    (sandbox / "dir").mkdir()


def plain_file(sandbox: Path, outside: Path) -> None:
    (sandbox / "file.txt").write_text("plain\n")


def nul_text(sandbox: Path, outside: Path) -> None:
    (sandbox / "nul.txt").write_bytes(b"before\x00after")


def payload(tool: str, path: str) -> dict[str, str]:
    if tool == "files.write":
        return {"path": path, "content": "new content"}
    if tool == "files.append":
        return {"path": path, "line": "new line"}
    return {"path": path}


# What the tool's canonical form refuses (DESIGN §10): the path has no form the tool
# could act on, so admission refuses it before policy, and nothing is admitted.
ADMISSION_REFUSALS: list[tuple[str, str, Setup, str]] = [
    ("files.write", "l" * 300, nothing, "name_too_long"),
    ("files.append", "l" * 300, nothing, "name_too_long"),
    ("files.append", "d/" + "l" * 256, nothing, "name_too_long"),
    ("files.write", "loop", loop, "symlink_loop"),
    ("files.append", "loop/a.log", loop, "symlink_loop"),
    ("files.read", "loop", loop, "symlink_loop"),
    ("files.append", "link/secret.txt", symlink_out, "path_outside_sandbox"),
    ("files.read", "link/secret.txt", symlink_out, "path_outside_sandbox"),
    ("files.append", "../outside/secret.txt", nothing, "path_outside_sandbox"),
    ("files.append", "a.log/", nothing, "invalid_path"),
]
# What only opening the file can tell: the tool refuses it before its start.
REFUSALS: list[tuple[str, str, Setup, str]] = [
    ("files.append", "alias.txt", hard_link_out, "linked_file"),
    ("files.write", "alias.txt", hard_link_out, "linked_file"),
    ("files.read", "alias.txt", hard_link_out, "linked_file"),
    ("files.append", "dir", directory, "is_a_directory"),
    ("files.write", "dir", directory, "is_a_directory"),
    ("files.append", "file.txt/a.log", plain_file, "not_a_directory"),
    ("files.write", "file.txt/a.txt", plain_file, "not_a_directory"),
    ("files.write", "pipe", fifo, "not_a_regular_file"),
    ("files.read", "nul.txt", nul_text, "not_text"),
]


@pytest.mark.parametrize(
    ("tool", "path", "setup", "code"),
    ADMISSION_REFUSALS,
    ids=[f"{t}-{c}-{i}" for i, (t, _, _, c) in enumerate(ADMISSION_REFUSALS)],
)
async def test_a_path_without_a_canonical_form_is_refused_at_admission_as_payload_invalid(
    files: Files, tool: str, path: str, setup: Setup, code: str
) -> None:
    setup(files.sandbox, files.outside)

    result = await files.harness.execute(tool, payload(tool, path))

    assert (result.outcome, result.boundary) == ("refused", EffectBoundary.PRE_EFFECT_REFUSAL)
    assert result.reason == "payload_invalid"
    assert result.detail is not None
    assert f"({code})" in result.detail
    assert files.harness.capability_states(result.idempotency_key) == []
    assert files.outside_state() == {"secret.txt": SECRET}
    assert SECRET.strip() not in files.journal_text()


@pytest.mark.parametrize(
    ("tool", "path", "setup", "code"),
    REFUSALS,
    ids=[f"{t}-{c}-{i}" for i, (t, _, _, c) in enumerate(REFUSALS)],
)
async def test_input_refused_before_anything_is_touched_is_journaled_as_not_started(
    files: Files, tool: str, path: str, setup: Setup, code: str
) -> None:
    setup(files.sandbox, files.outside)

    result = await files.harness.execute(tool, payload(tool, path))

    assert refused_before_start(result, code), result
    assert files.outside_state() == {"secret.txt": SECRET}
    assert SECRET.strip() not in files.journal_text()


async def test_an_unsafe_append_refused_for_a_fifo_runs_when_retried_after_the_fifo_is_replaced(
    files: Files,
) -> None:
    pipe = files.sandbox / "pipe"
    os.mkfifo(pipe)
    # A reader on the other end: the FIFO accepts writes, the line would vanish into it.
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    try:
        first = await files.harness.execute(
            "files.append", {"path": "pipe", "line": "one"}, causal_id="c"
        )
        assert refused_before_start(first, "not_a_regular_file"), first
        assert os.read(reader, 100) == b""
    finally:
        os.close(reader)

    pipe.unlink()
    pipe.write_text("zero\n")
    again = await files.harness.execute(
        "files.append", {"path": "pipe", "line": "one"}, causal_id="c"
    )

    assert (again.outcome, again.boundary, again.attempt) == (
        "executed",
        EffectBoundary.EFFECT_COMPLETED,
        2,
    )
    assert again.idempotency_key == first.idempotency_key
    assert files.harness.capability_states(again.idempotency_key) == ["CONSUMED", "CONSUMED"]
    assert pipe.read_text() == "zero\none\n"


def make_loop(target: Path, outside: Path) -> None:
    target.symlink_to(target.name)


def make_directory(target: Path, outside: Path) -> None:
    target.mkdir()


def make_hard_link(target: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", target)


@pytest.mark.parametrize(
    ("make", "remove", "code"),
    [
        (make_loop, Path.unlink, "symlink_loop"),
        (make_directory, Path.rmdir, "is_a_directory"),
        (make_hard_link, Path.unlink, "linked_file"),
    ],
)
async def test_an_unsafe_append_refused_for_a_bad_target_runs_when_retried_after_it_is_gone(
    files: Files,
    make: Callable[[Path, Path], None],
    remove: Callable[[Path], None],
    code: str,
) -> None:
    target = files.sandbox / "a.log"
    make(target, files.outside)
    decision = {"path": "a.log", "line": "one"}
    first = await files.harness.execute("files.append", decision, causal_id="c")
    if code == "symlink_loop":  # no canonical form: refused at admission
        assert (first.reason, first.attempt) == ("payload_invalid", 1), first
        assert first.detail is not None
        assert f"({code})" in first.detail
    else:
        assert refused_before_start(first, code), first

    remove(target)
    again = await files.harness.execute("files.append", decision, causal_id="c")

    assert (again.outcome, again.boundary, again.attempt) == (
        "executed",
        EffectBoundary.EFFECT_COMPLETED,
        2,
    )
    assert target.read_text() == "one\n"
    assert files.outside_state() == {"secret.txt": SECRET}


async def test_forty_fifos_do_not_starve_concurrent_calls(files: Files) -> None:
    pipes = [files.sandbox / f"pipe-{n}" for n in range(40)]
    for pipe in pipes:
        os.mkfifo(pipe)
    (files.sandbox / "plain.txt").write_text("still served\n")
    try:
        # Nobody is on the other end of any FIFO: a tool that opened one
        # would hold a worker thread until someone came.
        tools = ["files.read", "files.append"] * 20
        stuck = [
            asyncio.create_task(files.harness.execute(tool, payload(tool, pipe.name)))
            for tool, pipe in zip(tools, pipes, strict=True)
        ]
        echo, read = await asyncio.gather(
            files.harness.execute("echo", {"still": "served"}),
            files.harness.execute("files.read", {"path": "plain.txt"}),
        )
        refused = await asyncio.gather(*stuck)
        after = await files.harness.execute("files.read", {"path": "plain.txt"})
    finally:
        for pipe in pipes:  # release any thread a regression left blocked on a FIFO
            os.close(os.open(pipe, os.O_RDWR | os.O_NONBLOCK))

    assert (echo.boundary, echo.result) == (EffectBoundary.EFFECT_COMPLETED, {"still": "served"})
    assert read.result == {"path": "plain.txt", "content": "still served\n"}, read.problem
    assert after.result == read.result, after.problem
    assert all(refused_before_start(result, "not_a_regular_file") for result in refused)


async def test_a_name_of_255_bytes_is_written_atomically_and_read_back(files: Files) -> None:
    name = "n" * 255
    written = await files.harness.execute("files.write", {"path": name, "content": "long name"})
    read = await files.harness.execute("files.read", {"path": name})

    assert (written.boundary, written.result) == (
        EffectBoundary.EFFECT_COMPLETED,
        {"path": name, "bytes": 9},
    )
    assert read.result == {"path": name, "content": "long name"}
    assert os.listdir(files.sandbox) == [name]  # no temporary file left behind
