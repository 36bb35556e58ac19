"""The README walk-through, step by step, as a newcomer would run it."""

from __future__ import annotations

from tests.support.http import Api

RUN = "demo-run"


async def test_the_readme_walkthrough(api: Api) -> None:
    agent, approver, auditor = (
        api.auth("acme:agent"),
        api.auth("acme:approver"),
        api.auth("acme:auditor"),
    )

    # 1. echo: read-only, runs at once.
    echo = await api.syscall("echo", {"hello": "world"}, run_id=RUN, causal_id="step-1")
    assert echo.status_code == 200
    assert echo.json()["outcome"] == "executed"
    assert echo.json()["boundary"] == "EFFECT_COMPLETED"
    assert echo.json()["result"] == {"hello": "world"}
    assert len(echo.json()["idempotency_key"]) == 64
    assert echo.json()["receipt"]["intent_commitment"]

    # 2. files.append: mutating and unsafe, so it needs consent; nothing runs yet.
    line = {"path": "notes.txt", "line": "hello from the walk-through"}
    asked = await api.syscall("files.append", line, run_id=RUN, causal_id="step-2")
    assert asked.status_code == 202
    assert asked.json()["outcome"] == "confirmation_required"
    confirmation = asked.json()["confirmation"]
    assert confirmation["state"] == "PENDING"

    # 3. The approver sees it and approves it.
    pending = await api.client.get("/v1/confirmations?state=PENDING", headers=approver)
    assert confirmation["id"] in [c["id"] for c in pending.json()["confirmations"]]
    approved = await api.client.post(
        f"/v1/confirmations/{confirmation['id']}/approve", headers=approver
    )
    assert approved.status_code == 200
    assert approved.json()["state"] == "APPROVED"

    # 4. The agent re-posts the same syscall: now it runs, once.
    ran = await api.syscall("files.append", line, run_id=RUN, causal_id="step-2")
    assert ran.status_code == 200
    assert ran.json()["outcome"] == "executed"
    assert ran.json()["boundary"] == "EFFECT_COMPLETED"
    again = await api.syscall("files.append", line, run_id=RUN, causal_id="step-2")
    assert again.json()["outcome"] == "deduplicated"

    # 5. The auditor reads the journal: a hash chain.
    journal = await api.client.get(f"/v1/runs/{RUN}/journal", headers=auditor)
    entries = journal.json()["entries"]
    # The approval is on the record too: who approved, and when (DESIGN §4).
    assert [(e["causal_id"], e["kind"]) for e in entries] == [
        ("step-1", "execution"),
        ("step-2", "confirmation"),
        ("step-2", "execution"),
    ]
    assert entries[1]["body"]["decision"] == "APPROVED"
    assert entries[1]["body"]["decided_by"]["principal_id"] == "approver-of-acme"
    assert entries[1]["prev_hash"] == entries[0]["entry_hash"]
    page = await api.client.get(f"/v1/runs/{RUN}/journal?after=1&limit=1", headers=auditor)
    assert [e["position"] for e in page.json()["entries"]] == [2]

    # 6. ...verifies it...
    verified = await api.client.get(f"/v1/runs/{RUN}/verify", headers=auditor)
    assert verified.json() == {
        "ok": True,
        "entries": 3,
        "broken_at": None,
        "reason": None,
        # No signing key in this deployment: no checkpoints to check (issue 19).
        "checkpoints": None,
        "rewritten_before": None,
        # Nor a witness (issue 23), and nothing was ever found broken.
        "unsigned": None,
        "witness": None,
        "flagged": None,
    }

    # 7. ...and a resumed agent replays it: the recorded results, nothing re-run.
    before = api.journal_count()
    replayed = await api.client.post(f"/v1/runs/{RUN}/replay", headers=agent)
    results = replayed.json()["results"]
    assert [(r["causal_id"], r["outcome"]) for r in results] == [
        ("step-1", "executed"),
        ("step-2", "executed"),
    ]
    assert api.journal_count() == before


async def test_a_denied_confirmation_refuses_the_action(api: Api) -> None:
    line = {"path": "notes.txt", "line": "never"}
    asked = await api.syscall("files.append", line, run_id="run-deny", causal_id="c-1")
    confirmation_id = asked.json()["confirmation"]["id"]
    denied = await api.client.post(
        f"/v1/confirmations/{confirmation_id}/deny",
        json={"reason": "not today"},
        headers=api.auth("acme:approver"),
    )
    assert denied.json()["state"] == "DENIED"
    assert denied.json()["reason"] == "not today"
    twice = await api.client.post(
        f"/v1/confirmations/{confirmation_id}/approve", headers=api.auth("acme:approver")
    )
    assert twice.status_code == 409
    assert twice.json()["code"] == "conflict"
    refused = await api.syscall("files.append", line, run_id="run-deny", causal_id="c-1")
    assert refused.status_code == 200
    assert refused.json()["outcome"] == "refused"
