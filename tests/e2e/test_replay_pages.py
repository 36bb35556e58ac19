"""Replay over HTTP is paged like the journal, so a long run is never one huge answer."""

from __future__ import annotations

from tests.support.http import Api


async def test_replay_pages_until_next_after_is_null(api: Api) -> None:
    for n in range(5):
        answer = await api.syscall("echo", {"n": n}, run_id="run-pages", causal_id=f"c{n}")
        assert answer.status_code == 200

    seen: list[object] = []
    after = 0
    while True:
        page = await api.client.post(
            f"/v1/runs/run-pages/replay?after={after}&limit=2", headers=api.auth()
        )
        assert page.status_code == 200
        body = page.json()
        assert len(body["results"]) <= 2
        seen += [r["result"] for r in body["results"]]
        if body["next_after"] is None:
            break
        after = body["next_after"]

    assert seen == [{"n": n} for n in range(5)]
    too_big = await api.client.post("/v1/runs/run-pages/replay?limit=5000", headers=api.auth())
    assert too_big.status_code == 422
