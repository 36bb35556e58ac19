"""DESIGN §10 "What is served is verified", at every entry point that serves recorded
results: a deduplicated answer and a replay never hand out an entry whose own hash does not
recompute, nor anything of a run whose chain or signed checkpoints disagree
(``chain_broken``) — and nothing runs again instead.

Two tamperings by someone who can write the database: an entry's body edited in place
(its hash no longer recomputes), and a run rewritten with every hash recomputed (the chain
links, its signed checkpoint does not).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.adversarial.deployment import Deployment
from tests.support.adversarial.entrypoints import ENTRY_POINTS, EntryPoint, HttpDriver, offering
from tests.support.evidence import rewrite_run, wait_for

pytestmark = pytest.mark.db

AGENT, AUDITOR = "acme:agent", "acme:auditor"


@dataclass(frozen=True)
class Decided:
    """A completed decision made through an entry point, then tampered with."""

    run: str
    causal: str
    payload: dict[str, Any]
    original: str
    forged: str


async def _decide(deployment: Deployment, label: str) -> dict[str, Decided]:
    """Each posting entry point makes one completed decision (per-turn rows in a run of
    their own), and every run gets an even number of entries, so a checkpoint signs it."""
    decided: dict[str, Decided] = {}
    for row in ENTRY_POINTS:
        if "post" not in row.ops:
            continue
        driver = row.driver(deployment, f"turn-{label}")
        run, slug = driver.run(label), row.slug
        original, forged = f"{label}-original-{slug}", f"{label}-forged-{slug}"
        payload = {"note": original}
        answer = await driver.post(AGENT, run, f"{label}.{slug}", "echo", payload)
        assert answer.boundary == "EFFECT_COMPLETED", answer.raw
        decided[row.name] = Decided(run, f"{label}.{slug}", payload, original, forged)
    for run in {item.run for item in decided.values()}:
        if deployment.sql("SELECT count(*) FROM journal_entries WHERE run_id = %s", run)[0][0] % 2:
            filler = await HttpDriver(deployment).post(AGENT, run, f"{label}.filler", "echo", {})
            assert filler.outcome == "executed", filler.raw
    return decided


def _signed(deployment: Deployment, run: str) -> bool:
    return bool(deployment.sql("SELECT 1 FROM run_checkpoints WHERE run_id = %s", run))


@pytest.fixture(scope="module")
async def tampered(deployment: Deployment) -> dict[str, dict[str, Decided]]:
    """``edited``: an entry's body changed in place. ``rewritten``: changed, and every hash
    after it recomputed, once a checkpoint had signed the run."""
    edited = await _decide(deployment, "edited")
    for item in edited.values():
        deployment.sql(
            "UPDATE journal_entries SET body = replace(body, %s, %s) WHERE run_id = %s",
            item.original,
            item.forged,
            item.run,
        )
    rewritten = await _decide(deployment, "rewritten")
    for item in rewritten.values():
        await wait_for(functools.partial(_signed, deployment, item.run))
        [(position,)] = deployment.sql(
            "SELECT position FROM journal_entries WHERE run_id = %s AND body LIKE %s",
            item.run,
            f"%{item.original}%",
        )
        rewrite_run(deployment.sql, "acme", item.run, position, item.original, item.forged)
    return {"edited": edited, "rewritten": rewritten}


CASES = ["edited", "rewritten"]


@pytest.mark.parametrize("tampering", CASES)
@pytest.mark.parametrize("entry", offering("post"))
async def test_a_deduplicated_answer_is_never_served_from_a_tampered_run(
    deployment: Deployment,
    tampered: dict[str, dict[str, Decided]],
    entry: EntryPoint,
    tampering: str,
) -> None:
    decided = tampered[tampering][entry.name]
    driver = entry.driver(deployment, f"turn-{tampering}")
    again = await driver.post(AGENT, decided.run, decided.causal, "echo", decided.payload)
    assert decided.forged not in again.raw
    assert again.outcome != "executed", "the decision ran again instead: " + again.raw
    assert again.code == "chain_broken", again.raw


@pytest.mark.parametrize("tampering", CASES)
@pytest.mark.parametrize("entry", offering("replay"))
async def test_a_replay_is_never_served_from_a_tampered_run(
    deployment: Deployment,
    tampered: dict[str, dict[str, Decided]],
    entry: EntryPoint,
    tampering: str,
) -> None:
    decided = tampered[tampering]["http"]
    replayed = await entry.driver(deployment).replay(AUDITOR, decided.run)
    assert not replayed.ok, replayed.raw
    assert decided.forged not in replayed.raw
    assert replayed.results == []
