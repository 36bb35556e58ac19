"""Scenario 4: a journal row changed, removed or relinked by SQL; ``arvis verify`` names it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from arvis.cli import app
from arvis.store.engine import libpq_url
from tests.support.lifecycle import make_harness
from tests.support.reliability import report, size

pytestmark = [pytest.mark.db, pytest.mark.reliability]

ENTRIES = size(ci=12, full=40)

# Each tamper is one SQL statement on the row at position %(p)s of the run %(r)s.
TAMPERS = {
    "body": "UPDATE journal_entries SET body = replace(body, 'msg-', 'MSG-')",
    "boundary": "UPDATE journal_entries SET boundary = 'EFFECT_FAILED'",
    "causal_id": "UPDATE journal_entries SET causal_id = causal_id || '-forged'",
    "recorded_at": "UPDATE journal_entries SET recorded_at = recorded_at + interval '1 second'",
    "entry_hash": "UPDATE journal_entries SET entry_hash = repeat('a', 64)",
    "prev_hash": "UPDATE journal_entries SET prev_hash = repeat('b', 64)",
    "deleted": "DELETE FROM journal_entries",
}


async def _run_with_entries(database_url: str) -> str:
    harness = await make_harness(database_url)
    try:
        for n in range(ENTRIES):
            await harness.execute("read", {"msg": f"msg-{n}"}, causal_id=f"t{n}")
        return harness.run_id
    finally:
        await harness.close()


def test_verify_names_the_exact_position_of_every_tampered_row(
    database_url: str, tmp_path: Path
) -> None:
    run = asyncio.run(_run_with_entries(database_url))
    (tmp_path / "arvis.toml").write_text("")
    cli = CliRunner(
        env={
            "ARVIS_DATABASE_URL": database_url,
            "ARVIS_DATA_DIR": str(tmp_path),
            "ARVIS_CONFIG": str(tmp_path / "arvis.toml"),
        }
    )

    def sql(query: str, *params: object) -> None:
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            conn.execute(query, params)  # type: ignore[arg-type]

    sql("CREATE TABLE tamper_backup AS SELECT * FROM journal_entries WHERE run_id = %s", run)
    every = range(1, ENTRIES + 1)
    positions = list(every) if ENTRIES >= 40 else sorted({1, 2, ENTRIES // 2, ENTRIES - 1, ENTRIES})
    named, missed = 0, []
    try:
        intact = cli.invoke(app, ["verify", run, "--tenant", "acme"])
        assert intact.exit_code == 0, intact.output
        assert f"{ENTRIES} entries" in intact.output
        for field, statement in TAMPERS.items():
            for p in positions:
                sql(f"{statement} WHERE run_id = %s AND position = %s", run, p)
                result = cli.invoke(app, ["verify", run, "--tenant", "acme"])
                if result.exit_code == 1 and f"BROKEN at position {p}:" in result.output:
                    named += 1
                else:
                    missed.append((field, p, result.output.strip()))
                sql("DELETE FROM journal_entries WHERE run_id = %s", run)
                sql("INSERT INTO journal_entries SELECT * FROM tamper_backup")
        # What was found stays on the run (issue 23) until an operator clears it.
        flagged = cli.invoke(app, ["verify", run, "--tenant", "acme"])
        sql(
            "UPDATE runs SET evidence_broken_at = NULL, evidence_fault = NULL WHERE run_id = %s",
            run,
        )
        restored = cli.invoke(app, ["verify", run, "--tenant", "acme"])
    finally:
        sql("DROP TABLE tamper_backup")
    tampered = len(TAMPERS) * len(positions)
    report(
        f"tamper: {tampered} rows tampered ({', '.join(TAMPERS)}) at {len(positions)} positions"
        f" of a {ENTRIES}-entry chain, {named} named at the exact position, {len(missed)} missed"
    )
    assert missed == []
    assert flagged.exit_code == 1
    assert "evidence found BROKEN before: position 1: entry altered" in flagged.output
    assert restored.exit_code == 0
