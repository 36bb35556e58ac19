"""The client's reading of the wire format, and its requests, on a scripted transport.

The transport answers what a test scripts (ARVIS's own answer shapes, copied from
docs/http.md); served ARVIS is in tests/e2e/test_client*.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from arvis.client import (
    AnswerLost,
    ArvisClient,
    AsyncArvisClient,
    Boundary,
    ConfirmationRequired,
    Deduplicated,
    Executed,
    Refused,
    RetryPolicy,
    Unauthenticated,
    UnexpectedAnswer,
)

NOW = RetryPolicy(total_s=5, initial_backoff_s=0, max_backoff_s=0)
BASE = {
    "boundary": None,
    "result": None,
    "problem": None,
    "reason": None,
    "detail": None,
    "idempotency_key": "k" * 64,
    "attempt": 1,
    "run_id": "run-1",
    "causal_id": "step-1",
    "receipt": None,
    "journal_position": None,
    "confirmation": None,
    "audit_incomplete": False,
}
EXECUTED = {
    **BASE,
    "outcome": "executed",
    "boundary": "EFFECT_COMPLETED",
    "result": {"bytes": 2},
    "receipt": {"position": 1, "intent_commitment": "c" * 64, "store_fingerprint": "1:0004"},
    "journal_position": 1,
}


def _problem(code: str, status: int) -> httpx.Response:
    body = {"type": f"urn:arvis:problem:{code}", "title": code, "status": status}
    body |= {"detail": code, "code": code}
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


Script = list[Callable[[httpx.Request], httpx.Response]]


def _answer(response: httpx.Response) -> Callable[[httpx.Request], httpx.Response]:
    return lambda _: response


def _lost(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadError("connection reset", request=request)


class Recorder:
    def __init__(self, script: Script) -> None:
        self.script = list(script)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.script.pop(0)(request)


def _client(recorder: Recorder, retry: RetryPolicy = NOW) -> ArvisClient:
    return ArvisClient(
        "http://arvis.test", "arvis_k0_secret", transport=httpx.MockTransport(recorder), retry=retry
    )


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (EXECUTED, Executed),
        ({**EXECUTED, "outcome": "deduplicated"}, Deduplicated),
        (
            {
                **BASE,
                "outcome": "refused",
                "boundary": "PRE_EFFECT_REFUSAL",
                "reason": "policy_denied",
            },
            Refused,
        ),
        (
            {
                **BASE,
                "outcome": "confirmation_required",
                "confirmation": {"id": "cnf_1", "state": "PENDING"},
            },
            ConfirmationRequired,
        ),
    ],
)
def test_each_outcome_is_its_own_variant(answer: dict[str, Any], kind: type[object]) -> None:
    recorder = Recorder([_answer(httpx.Response(200, json=answer))])
    with _client(recorder) as client:
        got = client.execute("run-1", "step-1", "files.write", {"path": "a"})

    assert type(got) is kind


def test_an_executed_answer_carries_boundary_result_key_receipt_and_position() -> None:
    recorder = Recorder([_answer(httpx.Response(200, json=EXECUTED))])
    with _client(recorder) as client:
        got = client.execute("run-1", "step-1", "files.write", {"path": "a"})

    assert isinstance(got, Executed)
    assert got.boundary is Boundary.EFFECT_COMPLETED
    assert got.result == {"bytes": 2}
    assert got.idempotency_key == "k" * 64
    assert got.receipt is not None
    assert got.receipt.position == 1
    assert got.journal_position == 1
    assert not got.uncertain


def test_the_request_is_the_documented_syscall_with_the_bearer_key() -> None:
    recorder = Recorder([_answer(httpx.Response(200, json=EXECUTED))])
    with _client(recorder) as client:
        client.execute("run-1", "step-1", "files.write", {"path": "a"})

    request = recorder.requests[0]
    assert (request.method, request.url.path) == ("POST", "/v1/syscalls")
    assert request.headers["authorization"] == "Bearer arvis_k0_secret"
    assert json.loads(request.content) == {
        "name": "tool.execute",
        "run_id": "run-1",
        "causal_id": "step-1",
        "decision": {"tool": "files.write", "payload": {"path": "a"}},
    }


def test_a_field_from_a_newer_server_is_kept_not_refused() -> None:
    answer = {**EXECUTED, "explanation": "from the future"}
    recorder = Recorder([_answer(httpx.Response(200, json=answer))])
    with _client(recorder) as client:
        got = client.execute("run-1", "step-1", "files.write", {})

    assert got.model_extra == {"explanation": "from the future"}


def test_an_outcome_this_client_does_not_know_is_an_unexpected_answer() -> None:
    recorder = Recorder([_answer(httpx.Response(200, json={**EXECUTED, "outcome": "postponed"}))])
    with _client(recorder) as client, pytest.raises(UnexpectedAnswer, match="outcome"):
        client.execute("run-1", "step-1", "files.write", {})


def test_a_lost_answer_is_re_posted_byte_for_byte_until_it_is_answered() -> None:
    recorder = Recorder([_lost, _lost, _answer(httpx.Response(200, json=EXECUTED))])
    with _client(recorder) as client:
        got = client.execute("run-1", "step-1", "files.write", {"path": "a"})

    assert isinstance(got, Executed)
    bodies = {request.content for request in recorder.requests}
    assert len(recorder.requests) == 3
    assert len(bodies) == 1  # same run id, causal id, tool and payload every time


def test_attempt_in_flight_is_waited_out() -> None:
    in_flight = _answer(_problem("attempt_in_flight", 409))
    recorder = Recorder([in_flight, in_flight, _answer(httpx.Response(200, json=EXECUTED))])
    with _client(recorder) as client:
        assert isinstance(client.execute("run-1", "step-1", "files.write", {}), Executed)


def test_a_problem_that_will_not_change_is_raised_without_a_second_request() -> None:
    recorder = Recorder([_answer(_problem("unauthenticated", 401))])
    with _client(recorder) as client, pytest.raises(Unauthenticated) as caught:
        client.tools()

    assert caught.value.status == 401
    assert len(recorder.requests) == 1


def test_an_approval_whose_answer_was_lost_is_not_sent_again() -> None:
    recorder = Recorder([_lost])
    with _client(recorder) as client, pytest.raises(AnswerLost):
        client.approve("cnf_1")

    assert len(recorder.requests) == 1


def test_a_proxy_error_page_is_retried_and_then_reported_as_unexpected() -> None:
    page = _answer(httpx.Response(502, text="<html>Bad Gateway</html>"))
    recorder = Recorder([page, _answer(httpx.Response(200, json=EXECUTED))])
    with _client(recorder) as client:
        assert isinstance(client.execute("run-1", "step-1", "echo", {}), Executed)

    recorder = Recorder([_answer(httpx.Response(400, text="<html>Bad Request</html>"))])
    with _client(recorder) as client, pytest.raises(UnexpectedAnswer) as caught:
        client.tools()
    assert caught.value.status == 400


def _journal_pages() -> Iterator[Callable[[httpx.Request], httpx.Response]]:
    entry = {
        "kind": "execution",
        "causal_id": "c",
        "idempotency_key": "k",
        "attempt": 1,
        "intent_id": "int_1",
        "boundary": "EFFECT_COMPLETED",
        "body": {},
        "prev_hash": "0" * 64,
        "entry_hash": "1" * 64,
        "recorded_at": "2026-01-01T00:00:00Z",
    }
    yield _answer(
        httpx.Response(
            200,
            json={
                "run_id": "r",
                "entries": [{**entry, "position": 1}, {**entry, "position": 2}],
                "next_after": 2,
            },
        )
    )
    yield _answer(
        httpx.Response(
            200, json={"run_id": "r", "entries": [{**entry, "position": 3}], "next_after": None}
        )
    )


def test_iterating_the_journal_follows_next_after_to_the_last_page() -> None:
    recorder = Recorder(list(_journal_pages()))
    with _client(recorder) as client:
        positions = [entry.position for entry in client.iter_journal("r", page_size=2)]

    assert positions == [1, 2, 3]
    assert [r.url.params["after"] for r in recorder.requests] == ["0", "2"]


async def test_the_async_client_re_posts_a_lost_answer_the_same_way() -> None:
    recorder = Recorder([_lost, _answer(httpx.Response(200, json=EXECUTED))])
    client = AsyncArvisClient(
        "http://arvis.test", "arvis_k0_secret", transport=httpx.MockTransport(recorder), retry=NOW
    )
    async with client:
        got = await client.execute("run-1", "step-1", "files.write", {"path": "a"})

    assert isinstance(got, Executed)
    assert recorder.requests[0].content == recorder.requests[1].content


def test_a_token_with_whitespace_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="api_key"):
        ArvisClient("http://arvis.test", "arvis_k0 secret\n")


RUNS_PAGE = {
    "runs": [
        {
            "run_id": "run-1",
            "status": "waiting_for_consent",
            "principal": "alice",
            "actors": ["bot-a"],
            "tools": ["files.append"],
            "started_at": "2026-12-01T12:00:00Z",
            "last_activity": "2026-12-01T12:00:01Z",
            "entries": 0,
            "waiting": 1,
            "uncertain": 0,
            "audit_incomplete": False,
        }
    ],
    "next_cursor": "abc",
}


async def test_runs_sends_every_filter_of_the_list_and_reads_principal_and_actors() -> None:
    filters: dict[str, Any] = {
        "status": "waiting_for_consent",
        "principal": "alice",
        "actor": "bot-a",
        "tool": "files.append",
        "q": "run",
        "started_after": datetime(2026, 12, 1, tzinfo=UTC),
        "started_before": "2026-12-02T00:00:00Z",
        "active_after": datetime(2026, 12, 1, 12),
        "active_before": "2026-12-03",
    }
    sent = {
        **{k: v.isoformat() if isinstance(v, datetime) else v for k, v in filters.items()},
        "cursor": "xyz",
        "limit": "7",
    }
    recorder = Recorder([lambda _: httpx.Response(200, json=RUNS_PAGE)] * 2)
    with _client(recorder) as client:
        page = client.runs(cursor="xyz", limit=7, **filters)
    transport = httpx.MockTransport(recorder)
    async with AsyncArvisClient("http://arvis.test", "k", transport=transport, retry=NOW) as aio:
        again = await aio.runs(cursor="xyz", limit=7, **filters)
    for request in recorder.requests:
        assert (request.method, request.url.path) == ("GET", "/v1/runs")
        assert dict(request.url.params) == sent
    assert page == again
    [run] = page.runs
    assert (run.run_id, run.status, run.principal, run.actors) == (
        "run-1",
        "waiting_for_consent",
        "alice",
        ["bot-a"],
    )
    assert page.next_cursor == "abc"
    # A field the model does not name is kept (a newer server's, or one it only carries).
    assert run.model_dump()["waiting"] == 1


def test_runs_leaves_out_the_filters_not_given() -> None:
    recorder = Recorder([_answer(httpx.Response(200, json={"runs": [], "next_cursor": None}))])
    with _client(recorder) as client:
        assert client.runs().runs == []
    assert dict(recorder.requests[0].url.params) == {"limit": "100"}


async def test_runs_refuses_a_filter_it_does_not_know_before_any_request() -> None:
    recorder = Recorder([])
    with _client(recorder) as client, pytest.raises(TypeError, match="stauts"):
        client.runs(stauts="refused")  # type: ignore[call-arg]
    transport = httpx.MockTransport(recorder)
    async with AsyncArvisClient("http://arvis.test", "k", transport=transport, retry=NOW) as aio:
        with pytest.raises(TypeError, match="stauts"):
            await aio.runs(stauts="refused")  # type: ignore[call-arg]
    assert recorder.requests == []
