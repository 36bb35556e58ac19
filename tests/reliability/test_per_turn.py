"""Scenario 7: one ARVIS process per agent turn, a random 20 % of them SIGKILLed mid-turn.

Turns run one after another, each its own ``arvis serve-turn RUN`` against the shared
database, under one ``ARVIS_INSTANCE_ID`` and a short lease. A turn posts its new
decisions at once (an unsafe append that lingers after its effect, an idempotent write,
a read) plus the decisions of its run that an earlier, killed turn left unanswered. A
killed turn's calls are settled by the later turns' recovery (their start-up sweep, or
their periodic one); nobody runs ``arvis recover``. Checked afterwards: every intent
settled, no unsafe effect twice, every completed one exactly once, every uncertain
outcome journaled as such and its unsafe re-post refused ``retry_prohibited_uncertain``,
every turn stopped by SIGTERM exited 0, every run's chain verifies.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.http import mint_keys
from tests.support.perturn import TurnInstance, turn_env
from tests.support.postgres import sql as _sql
from tests.support.reliability import Tally, auth, report, size, syscall_body
from tests.support.turntools import CONFIG

pytestmark = [pytest.mark.db, pytest.mark.reliability]

TURNS = size(ci=16, full=200)
KILLED = round(TURNS * 0.2)
RUNS = 4
NEW_PER_TURN = 3
LEASE_TTL_S = 2
UNCERTAIN = ("EFFECT_STATE_UNKNOWN", "EFFECT_STARTED")


@dataclass
class Decision:
    run: str
    causal: str
    tool: str
    payload: dict[str, Any]
    answer: dict[str, Any] | None = None
    posts: int = 0

    def body(self) -> dict[str, Any]:
        return syscall_body(self.run, self.causal, self.tool, self.payload)


@dataclass
class Figures:
    turns: int = 0
    killed: int = 0
    lost_at_kill: int = 0
    clean_exits: int = 0
    clean_stops: int = 0
    closing_turns: int = 0
    ready_s: list[float] = field(default_factory=list)
    stop_problems: list[str] = field(default_factory=list)


def _new_decisions(rng: random.Random, run: str, turn: int) -> list[Decision]:
    made = []
    for k in range(NEW_PER_TURN):
        causal = f"t{turn}-d{k}"
        roll = rng.random()
        if roll < 0.6:
            linger = round(rng.uniform(0.1, 0.5), 3)
            payload: dict[str, Any] = {"file": run, "line": causal, "linger_s": linger}
            made.append(Decision(run, causal, "turn.append", payload))
        elif roll < 0.8:
            payload = {"path": f"w/{causal}.txt", "content": f"content of {causal}"}
            made.append(Decision(run, causal, "files.write", payload))
        else:
            made.append(Decision(run, causal, "echo", {"turn": turn}))
    return made


async def _settle(
    client: httpx.AsyncClient, url: str, token: str, decision: Decision, tally: Tally
) -> None:
    """Post until a governed answer; a lost answer (the process died) leaves it unanswered."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        decision.posts += 1
        started = time.monotonic()
        try:
            response = await client.post(
                f"{url}/v1/syscalls", json=decision.body(), headers=auth(token), timeout=30
            )
        except httpx.TransportError:
            tally.transport_errors += 1
            return
        tally.saw(response, time.monotonic() - started)
        if response.status_code == 200:
            decision.answer = response.json()
            return
        code = response.json().get("code")
        # A killed turn's call stays in flight until its lease expires and a sweep settles it.
        if (response.status_code, code) in ((409, "attempt_in_flight"), (503, "store_unavailable")):
            await asyncio.sleep(0.2)
            continue
        tally.unexpected.append(f"{response.status_code} {code} for {decision.causal}")
        return
    tally.unexpected.append(f"no governed answer for {decision.causal}")


async def _agent(
    instance: TurnInstance,
    token: str,
    decisions: list[Decision],
    tally: Tally,
    kill_after_s: float | None,
) -> None:
    async with httpx.AsyncClient() as client:
        posts = [
            asyncio.ensure_future(_settle(client, instance.url, token, d, tally)) for d in decisions
        ]
        if kill_after_s is not None:
            await asyncio.sleep(kill_after_s)
            instance.kill9()
        await asyncio.gather(*posts)


def _turn(
    database_url: str,
    data_dir: Path,
    run: str,
    number: int,
    decisions: list[Decision],
    token: str,
    tally: Tally,
    figures: Figures,
    kill_after_s: float | None,
) -> None:
    env = turn_env(
        database_url,
        data_dir,
        ARVIS_INSTANCE_ID="per-turn",
        ARVIS_LEASE_TTL_S=str(LEASE_TTL_S),
        ARVIS_SWEEP_INTERVAL_S="0.5",
        ARVIS_SHUTDOWN_GRACE_S="10",
    )
    instance = TurnInstance(run, env, data_dir / "turns.log").start()
    figures.turns += 1
    figures.ready_s.append(instance.ready_after_s)
    try:
        asyncio.run(_agent(instance, token, decisions, tally, kill_after_s))
    except BaseException:
        instance.kill9()
        raise
    if kill_after_s is not None:
        figures.killed += 1
        figures.lost_at_kill += sum(1 for d in decisions if d.answer is None)
        return
    code, stopped = instance.stop()
    figures.clean_stops += 1
    if code == 0 and stopped is not None and stopped["unjournaled"] == 0:
        figures.clean_exits += 1
    else:
        figures.stop_problems.append(f"turn {number}: exit {code}, {stopped}")


async def _verify(url: str, token: str, runs: list[str]) -> dict[str, dict[str, Any]]:
    async with httpx.AsyncClient() as client:
        verdicts = {}
        for run in runs:
            response = await client.get(f"{url}/v1/runs/{run}/verify", headers=auth(token))
            assert response.status_code == 200, response.text
            verdicts[run] = response.json()
        return verdicts


def test_per_turn_instances_sigkilled_mid_turn_lose_nothing_and_run_nothing_twice(
    database_url: str, tmp_path: Path
) -> None:
    tokens = asyncio.run(mint_keys(database_url, tenants=("acme",), roles=("agent", "auditor")))
    (tmp_path / "arvis.toml").write_text(CONFIG)
    rng = random.Random(7)
    killed = set(rng.sample(range(TURNS), KILLED))
    runs = [f"turn-run-{r}" for r in range(RUNS)]
    every: list[Decision] = []
    unanswered: dict[str, list[Decision]] = {run: [] for run in runs}
    tally, figures = Tally(), Figures()
    agent = tokens["acme:agent"]

    def play(number: int, run: str, kill_after_s: float | None, fresh: bool) -> None:
        decisions = unanswered[run] + (_new_decisions(rng, run, number) if fresh else [])
        every.extend(d for d in decisions if d.posts == 0)
        _turn(database_url, tmp_path, run, number, decisions, agent, tally, figures, kill_after_s)
        unanswered[run] = [d for d in decisions if d.answer is None]

    for number in range(TURNS):
        kill_after_s = round(rng.uniform(0.05, 0.4), 3) if number in killed else None
        play(number, runs[number % RUNS], kill_after_s, fresh=True)
    # The runs whose last turn was killed get one more turn, as an agent would.
    for run in runs:
        if unanswered[run]:
            figures.closing_turns += 1
            play(TURNS + figures.closing_turns, run, None, fresh=False)

    auditor = TurnInstance("audit", turn_env(database_url, tmp_path), tmp_path / "audit.log")
    auditor.start()
    try:
        chains = asyncio.run(_verify(auditor.url, tokens["acme:auditor"], runs))
    finally:
        auditor.stop()

    # An attempt row lives while its attempt is unsettled (the journal entry deletes it).
    unsettled = _sql(database_url, "SELECT count(*) FROM attempts")[0][0]
    rows = _sql(
        database_url,
        "SELECT run_id, causal_id, kind, boundary FROM journal_entries"
        " WHERE kind IN ('execution', 'recovery')",
    )
    uncertain = {(run, causal) for run, causal, _, boundary in rows if boundary in UNCERTAIN}
    uncertain_rows = sum(1 for *_, boundary in rows if boundary in UNCERTAIN)
    recovered = sum(1 for _, _, kind, _ in rows if kind == "recovery")
    # A turn stopped by SIGTERM journals every call it admitted: only recovery, settling
    # what a killed turn left, ever journals an outcome as uncertain.
    uncertain_by_execution = sum(
        1 for _, _, kind, boundary in rows if kind == "execution" and boundary in UNCERTAIN
    )
    lines: Counter[tuple[str, str]] = Counter()
    for path in (tmp_path / "sandbox").glob("*.lines"):
        for line in path.read_text().splitlines():
            lines[(path.stem, line)] += 1
    duplicates = sum(n - 1 for n in lines.values() if n > 1)

    lost: list[str] = []
    wrong: list[tuple[str, Any]] = []
    refused_uncertain = 0
    for d in every:
        answer = d.answer
        if answer is None:
            lost.append(d.causal)
        elif d.tool == "turn.append" and (d.run, d.causal) in uncertain:
            # The unsafe append may have happened: its re-post is refused, never re-run.
            if answer.get("reason") == "retry_prohibited_uncertain":
                refused_uncertain += 1
            else:
                wrong.append((d.causal, answer))
        elif answer.get("boundary") != "EFFECT_COMPLETED":
            wrong.append((d.causal, answer))
        elif d.tool == "turn.append" and lines[(d.run, d.causal)] != 1:
            lost.append(d.causal)
        elif d.tool == "files.write":
            written = tmp_path / "sandbox" / d.payload["path"]
            if not written.exists() or written.read_text() != d.payload["content"]:
                lost.append(d.causal)
    broken = [run for run, verdict in chains.items() if not verdict["ok"]]
    ready = sorted(figures.ready_s)
    report(
        f"per-turn: {figures.turns} turns ({figures.killed} SIGKILLed mid-turn with"
        f" {figures.lost_at_kill} calls unanswered, {figures.closing_turns} closing turns),"
        f" {len(every)} decisions, {duplicates} duplicate effects, {unsettled} unsettled"
        f" intents, {uncertain_rows} uncertain journaled by later turns' recovery"
        f" ({refused_uncertain} unsafe re-posts refused retry_prohibited_uncertain),"
        f" {len(lost)} lost, {len(broken)} broken chains of {len(chains)},"
        f" {figures.clean_exits}/{figures.clean_stops} SIGTERMed turns exited 0,"
        f" ready p50 {statistics.median(ready):.2f} s (max {ready[-1]:.2f} s)"
    )
    assert figures.killed == KILLED
    assert tally.unexpected == []
    assert figures.stop_problems == []
    assert unsettled == 0
    assert duplicates == 0
    assert lost == []
    assert wrong == []
    assert uncertain_by_execution == 0
    assert recovered == uncertain_rows
    assert broken == []
    assert tally.count(lambda s: s >= 500) == 0
