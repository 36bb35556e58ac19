"""``arvis.client`` against a served ARVIS (the real app and store, in process).

The transport behaviour over real HTTP, across a killed and restarted server, is in
tests/e2e/test_client_http.py.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import httpx
import pytest

from arvis.client import (
    NO_RETRY,
    AlreadyApproved,
    AsyncArvisClient,
    AttemptInFlight,
    Boundary,
    ChainBroken,
    ConfirmationRequired,
    Conflict,
    Deduplicated,
    Executed,
    ForbiddenRole,
    NotFound,
    Refused,
    SelfApproval,
    Unauthenticated,
    ValidationFailed,
)
from tests.support.client import Losses, asgi_client
from tests.support.http import Api, serve_api

pytestmark = pytest.mark.db

CONFIG = '[tools]\nfactories = ["tests.support.slowtools:make_tools"]\n'


@pytest.fixture(scope="module")
async def api(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    data_dir = tmp_path_factory.mktemp("arvis-client")
    async with serve_api(database_url, data_dir, config=CONFIG) as served:
        yield served


@pytest.fixture
def agent(agent_client: AsyncArvisClient) -> AsyncArvisClient:
    """The agent's client (``agent_client``, as ``approver``, from tests/e2e/conftest.py)."""
    return agent_client


@pytest.fixture
async def auditor(api: Api) -> AsyncIterator[AsyncArvisClient]:
    async with asgi_client(api, "acme:auditor") as client:
        yield client


async def test_a_call_is_executed_once_and_its_repeat_is_the_recorded_result(
    agent: AsyncArvisClient,
) -> None:
    payload = {"path": "client/a.txt", "content": "hello"}
    first = await agent.execute("run-exec", "write-1", "files.write", payload)
    again = await agent.execute("run-exec", "write-1", "files.write", payload)

    assert isinstance(first, Executed)
    assert first.boundary is Boundary.EFFECT_COMPLETED
    assert first.result == {"bytes": 5, "path": "client/a.txt"}
    assert first.receipt is not None
    assert first.journal_position == 1
    assert isinstance(again, Deduplicated)
    assert (again.idempotency_key, again.receipt, again.journal_position) == (
        first.idempotency_key,
        first.receipt,
        first.journal_position,
    )


async def test_consent_is_asked_given_by_an_approver_and_the_same_call_then_runs_once(
    agent: AsyncArvisClient, approver: AsyncArvisClient, api: Api
) -> None:
    payload = {"path": "client/consent.log", "line": "approved line"}
    asked = await agent.execute("run-consent", "append-1", "files.append", payload)
    assert isinstance(asked, ConfirmationRequired)

    pending = [c async for c in approver.iter_confirmations(state="PENDING")]
    mine = [c for c in pending if c.causal_id == "append-1" and c.run_id == "run-consent"]
    assert [c.id for c in mine] == [asked.confirmation.id]
    assert (mine[0].tool, mine[0].payload) == ("files.append", payload)

    approved = await approver.approve(asked.confirmation.id, reason="looks fine")
    assert approved.state == "APPROVED"
    ran = await agent.execute("run-consent", "append-1", "files.append", payload)
    again = await agent.execute("run-consent", "append-1", "files.append", payload)

    assert isinstance(ran, Executed)
    assert ran.boundary is Boundary.EFFECT_COMPLETED
    assert isinstance(again, Deduplicated)
    assert api.sql(
        "SELECT count(*) FROM journal_entries WHERE run_id = 'run-consent' AND kind = 'execution'"
    ) == [(1,)]
    with pytest.raises(AlreadyApproved) as repeated:  # a Conflict: the approval stands
        await approver.approve(asked.confirmation.id)
    assert isinstance(repeated.value, Conflict)


async def test_a_denied_decision_is_refused_and_says_who_denied_it(
    agent: AsyncArvisClient, approver: AsyncArvisClient
) -> None:
    payload = {"path": "client/denied.log", "line": "never"}
    asked = await agent.execute("run-deny", "append-1", "files.append", payload)
    assert isinstance(asked, ConfirmationRequired)

    denied = await approver.deny(asked.confirmation.id, reason="not today")
    answer = await agent.execute("run-deny", "append-1", "files.append", payload)

    assert (denied.state, denied.reason) == ("DENIED", "not today")
    assert denied.decided_by is not None
    assert isinstance(answer, Refused)
    assert answer.boundary is Boundary.PRE_EFFECT_REFUSAL


async def test_an_approver_may_not_approve_their_own_request(api: Api) -> None:
    async with asgi_client(api, "acme:admin") as admin:
        asked = await admin.execute(
            "run-self", "append-1", "files.append", {"path": "client/self.log", "line": "x"}
        )
        assert isinstance(asked, ConfirmationRequired)

        with pytest.raises(SelfApproval) as caught:
            await admin.approve(asked.confirmation.id)

    assert (caught.value.code, caught.value.status) == ("self_approval", 403)


async def test_each_problem_is_raised_as_its_typed_exception(
    api: Api, agent: AsyncArvisClient, auditor: AsyncArvisClient
) -> None:
    await agent.execute("run-problems", "echo-1", "echo", {"n": 1})
    stranger = AsyncArvisClient(
        "http://arvis.test",
        "arvis_k0000000000000000_nope",
        transport=httpx.ASGITransport(app=api.app),
    )
    async with stranger, asgi_client(api, "globex:auditor") as other_tenant:
        with pytest.raises(Unauthenticated):
            await stranger.tools()
        with pytest.raises(ForbiddenRole):
            await agent.journal("run-problems")
        with pytest.raises(NotFound):
            await other_tenant.verify("run-problems")
        with pytest.raises(ValidationFailed) as caught:
            await agent.execute("run-problems", "not a causal id", "echo", {})

    assert any("causal_id" in error["path"] for error in caught.value.errors)
    assert (await auditor.verify("run-problems")).ok


async def test_journal_and_replay_are_read_page_by_page(
    agent: AsyncArvisClient, auditor: AsyncArvisClient
) -> None:
    for n in range(5):
        await agent.execute("run-paged", f"echo-{n}", "echo", {"n": n})

    entries = [e async for e in auditor.iter_journal("run-paged", page_size=2)]
    replayed = [r async for r in agent.iter_replay("run-paged", page_size=2)]
    verified = await auditor.verify("run-paged")

    assert [e.position for e in entries] == [1, 2, 3, 4, 5]
    assert all(e.prev_hash == p.entry_hash for p, e in itertools.pairwise(entries))
    assert [r.result for r in replayed] == [{"n": n} for n in range(5)]
    assert (verified.ok, verified.entries, verified.broken_at) == (True, 5, None)


async def test_replay_of_a_tampered_run_raises_chain_broken_naming_the_position(
    api: Api, agent: AsyncArvisClient, auditor: AsyncArvisClient
) -> None:
    for n in range(3):
        await agent.execute("run-tampered", f"echo-{n}", "echo", {"n": n})
    api.sql(
        "UPDATE journal_entries SET body = jsonb_set(body::jsonb, '{result}', '{\"n\": 9}')::text"
        " WHERE run_id = 'run-tampered' AND position = 2"
    )

    with pytest.raises(ChainBroken) as caught:
        await agent.replay("run-tampered")
    verified = await auditor.verify("run-tampered")

    assert caught.value.broken_at == 2
    assert (verified.ok, verified.broken_at) == (False, 2)


async def test_a_lost_answer_is_re_posted_with_the_same_ids_and_nothing_runs_twice(
    api: Api,
) -> None:
    losses = Losses()
    losses.lose(1)
    payload = {"path": "client/lost.txt", "content": "once"}
    async with asgi_client(api, losses=losses) as client:
        answer = await client.execute("run-lost", "write-1", "files.write", payload)

    assert isinstance(answer, Deduplicated)
    assert losses.lost == 1
    bodies = losses.bodies()
    assert len(bodies) == 2
    assert bodies[0] == bodies[1]
    assert api.sql("SELECT count(*) FROM journal_entries WHERE run_id = 'run-lost'") == [(1,)]


async def test_a_call_in_flight_refuses_a_twin_and_the_retry_waits_for_its_result(
    api: Api, agent: AsyncArvisClient
) -> None:
    payload = {"seconds": 0.6}
    first = asyncio.create_task(agent.execute("run-flight", "slow-1", "slow.write", payload))
    for _ in range(200):
        if api.sql("SELECT 1 FROM attempts WHERE causal_id = 'slow-1'"):
            break
        await asyncio.sleep(0.01)

    with pytest.raises(AttemptInFlight):
        await agent.execute("run-flight", "slow-1", "slow.write", payload, retry=NO_RETRY)
    waited = await agent.execute("run-flight", "slow-1", "slow.write", payload)
    ran = await first

    assert isinstance(ran, Executed)
    assert isinstance(waited, Deduplicated)
    assert waited.journal_position == ran.journal_position
