"""DESIGN §10 "Evidence covers the tail", at every entry point that verifies.

The shared deployment signs a checkpoint every 2 entries and keeps a witness file. A run of
5 entries has its last entry after the last checkpoint: deleting it, or rewriting it with
its hash recomputed, must still be detected by ``verify`` (the witness saw it); so must a
rewrite under a checkpoint, relinked, that the checkpoint disagrees with — on every entry
point that verifies, the console's run page among them (one verify service). The
checkpointer signs only a head that descends from the head it last signed. A bundle
verified with a trusted key must carry signed checkpoints covering its entries (here: an
exported bundle with its last checkpoint, or all of them, taken out), or it is reported
unverified.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arvis.domain.canonical import canonical_bytes, sha256_hex
from tests.support.adversarial.deployment import Deployment
from tests.support.adversarial.entrypoints import EntryPoint, HttpDriver, TurnHttpDriver, offering
from tests.support.evidence import rewrite_run, wait_for

pytestmark = pytest.mark.db

AGENT, AUDITOR = "acme:agent", "acme:auditor"


async def _run_of(deployment: Deployment, run: str, entries: int) -> None:
    """``entries`` echo calls on ``run``, and every checkpoint they are due."""
    driver = HttpDriver(deployment)
    for n in range(entries):
        answer = await driver.post(AGENT, run, f"c{n}", "echo", {"note": f"{run}-note-{n}"})
        assert answer.outcome == "executed", answer.raw
    await wait_for(lambda: len(_checkpoints(deployment, run)) == entries // 2)


def _checkpoints(deployment: Deployment, run: str) -> list[int]:
    rows = deployment.sql(
        "SELECT length FROM run_checkpoints WHERE run_id = %s ORDER BY length", run
    )
    return [int(row[0]) for row in rows]


def _evidence(deployment: Deployment, signing: tuple[Path, Path]) -> dict[str, Path]:
    return {"witness": deployment.data_dir / "witness" / "arvis.jsonl", "public_key": signing[1]}


def _delete_tail(deployment: Deployment, run: str) -> None:
    deployment.sql("DELETE FROM journal_entries WHERE run_id = %s AND position = 5", run)
    deployment.sql(
        "UPDATE runs SET journal_length = 4, journal_head = (SELECT entry_hash FROM"
        " journal_entries WHERE run_id = %s AND position = 4) WHERE run_id = %s",
        run,
        run,
    )


def _rewrite_tail(deployment: Deployment, run: str) -> None:
    rewrite_run(deployment.sql, "acme", run, 5, f"{run}-note-4", f"{run}-NOTE-4")


def _rewrite_signed(deployment: Deployment, run: str) -> None:
    # Under the first checkpoint, relinked to the head: only the checkpoint (and the
    # witness) can tell.
    rewrite_run(deployment.sql, "acme", run, 1, f"{run}-note-0", f"{run}-NOTE-0")


TAILS = [
    pytest.param("untouched", None, True, id="untouched"),
    pytest.param("deleted", _delete_tail, False, id="last-entry-deleted"),
    pytest.param("rewritten", _rewrite_tail, False, id="last-entry-rewritten"),
    pytest.param("signed", _rewrite_signed, False, id="checkpoint-disagrees"),
]


@pytest.mark.parametrize(("label", "tamper", "intact"), TAILS)
@pytest.mark.parametrize("entry", offering("verify"))
async def test_verify_detects_a_tampered_tail_after_the_last_checkpoint(
    deployment: Deployment,
    signing: tuple[Path, Path],
    entry: EntryPoint,
    label: str,
    tamper: object,
    intact: bool,
) -> None:
    run = f"tail-{entry.slug}-{label}"
    await _run_of(deployment, run, 5)
    assert _checkpoints(deployment, run) == [2, 4]
    if callable(tamper):
        tamper(deployment, run)
    verified = await entry.driver(deployment).verify(AUDITOR, run, **_evidence(deployment, signing))
    assert verified.ok is intact, verified.raw


async def test_the_checkpointer_never_signs_a_head_that_does_not_descend_from_its_last(
    deployment: Deployment,
) -> None:
    run = "turn-descend"
    driver = TurnHttpDriver(deployment, run)
    for n in range(2):
        answer = await driver.post(AGENT, run, f"c{n}", "echo", {"note": f"descend-{n}"})
        assert answer.outcome == "executed", answer.raw
    await wait_for(lambda: _checkpoints(deployment, run) == [2])
    # The writer rewrites the signed history, links it, and deletes its checkpoint.
    rewrite_run(deployment.sql, "acme", run, 1, "descend-0", "DESCEND-0")
    deployment.sql("DELETE FROM run_checkpoints WHERE run_id = %s", run)
    for n in range(2, 4):
        answer = await driver.post(AGENT, run, f"c{n}", "echo", {"note": f"descend-{n}"})
        assert answer.outcome == "executed", answer.raw
    deployment.stop_turn(run)  # a clean stop: every checkpoint it would sign is signed
    assert _checkpoints(deployment, run) == [], "a rewritten head was signed"


def _edited(bundle: bytes, checkpoints: slice) -> bytes:
    """The bundle keeping only ``checkpoints`` of its own, its digest recomputed (anyone can:
    the digest is not a signature)."""
    content = json.loads(bundle)
    content["checkpoints"] = content["checkpoints"][checkpoints]
    content.pop("digest")
    content["digest"] = sha256_hex(canonical_bytes(content))
    return canonical_bytes(content) + b"\n"


@pytest.fixture(scope="module")
async def exported(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """``arvis export`` of a run of 4 entries, signed at 2 and 4."""
    await _run_of(deployment, "bundled", 4)
    assert _checkpoints(deployment, "bundled") == [2, 4]
    path = tmp_path_factory.mktemp("bundle") / "run.bundle"
    ran = await deployment.cli("export", "bundled", "--tenant", "acme", "-o", str(path))
    assert ran.returncode == 0, ran.stderr
    return path.read_bytes()


BUNDLES = [
    pytest.param(slice(None), True, id="covered"),
    pytest.param(slice(0, 1), False, id="last-checkpoint-dropped"),
    pytest.param(slice(0, 0), False, id="checkpoints-stripped"),
]


@pytest.mark.parametrize(("kept", "verified"), BUNDLES)
async def test_a_bundle_verified_with_a_trusted_key_needs_checkpoints_covering_its_entries(
    deployment: Deployment,
    signing: tuple[Path, Path],
    exported: bytes,
    tmp_path: Path,
    kept: slice,
    verified: bool,
) -> None:
    bundle = tmp_path / "run.bundle"
    bundle.write_bytes(_edited(exported, kept))
    checked = await deployment.cli(
        "verify", "--bundle", str(bundle), "--public-key", str(signing[1]), "--json"
    )
    assert (checked.returncode == 0) is verified, checked.stdout + checked.stderr
