"""`arvis recover` runs one sweep and prints what it settled."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.lifecycle import crash_during_dispatch, make_harness


async def test_arvis_recover_settles_a_dead_instances_intent_and_says_so(
    database_url: str,
) -> None:
    harness = await make_harness(database_url, instance_id="dead-instance")
    try:
        pending = await harness.execute("write", {"text": "x"}, causal_id="w")
        assert pending.outcome == "executed"
        await crash_during_dispatch(harness, "write", {"text": "crashed"}, causal_id="crashed")
    finally:
        await harness.close()

    run = subprocess.run(
        [sys.executable, "-m", "arvis", "recover", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "ARVIS_DATABASE_URL": database_url},
        timeout=120,
    )

    assert run.returncode == 0, run.stderr
    settled = json.loads(run.stdout)
    assert [(s["causal_id"], s["boundary"]) for s in settled] == [
        ("crashed", "EFFECT_STATE_UNKNOWN")
    ]
    assert settled[0]["owner"].startswith("doomed-")
    again = subprocess.run(
        [sys.executable, "-m", "arvis", "recover"],
        capture_output=True,
        text=True,
        env={**os.environ, "ARVIS_DATABASE_URL": database_url},
        timeout=120,
    )
    assert "nothing to recover" in again.stdout
