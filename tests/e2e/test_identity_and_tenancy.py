"""Every route needs a live key of the right role, and sees only its key's tenant."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from arvis.store.database import PgStore
from arvis.store.keys import PgKeyStore
from tests.support.cedar import write_policies
from tests.support.http import Api, serve_api

SYSCALL = {
    "name": "tool.execute",
    "run_id": "run-roles",
    "causal_id": "c-1",
    "decision": {"tool": "echo", "payload": {"hello": "world"}},
}

# (method, path, json body, roles that may call it; admin may call everything)
ROUTES: list[tuple[str, str, Any, set[str]]] = [
    ("POST", "/v1/syscalls", SYSCALL, {"agent"}),
    ("GET", "/v1/tools", None, {"agent", "approver", "auditor"}),
    ("GET", "/v1/runs/run-roles/journal", None, {"auditor"}),
    ("GET", "/v1/runs/run-roles/verify", None, {"auditor"}),
    ("POST", "/v1/runs/run-roles/replay", None, {"agent", "auditor"}),
    ("GET", "/v1/confirmations", None, {"approver"}),
    ("POST", "/v1/confirmations/cnf_none/approve", None, {"approver"}),
    # An agent may withdraw the confirmation it asked for (the service checks whose it is).
    ("POST", "/v1/confirmations/cnf_none/deny", None, {"approver", "agent"}),
    ("GET", "/metrics", None, {"admin"}),
    ("GET", "/v1/runs", None, {"auditor"}),
    ("GET", "/v1/keys", None, {"admin"}),
    ("POST", "/v1/keys", {"principal": "made-by-test", "roles": ["agent"]}, {"admin"}),
    ("POST", "/v1/keys/k0000000000000000/revoke", None, {"admin"}),
]
ROUTE_IDS = [f"{m} {p}" for m, p, _, _ in ROUTES]


async def _call(api: Api, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    return await api.client.request(method, path, json=body, headers=headers)


def _assert_problem(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["code"] == code
    assert problem["status"] == status


@pytest.mark.parametrize(("method", "path", "body", "roles"), ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Bearer not-a-token",
        "Bearer arvis_k0000000000000000_" + "A" * 43,
    ],
    ids=["no-key", "empty", "basic", "garbage", "unknown-key"],
)
async def test_a_request_without_a_valid_key_is_unauthenticated(
    api: Api, method: str, path: str, body: Any, roles: set[str], authorization: str | None
) -> None:
    before = api.journal_count()
    headers = {} if authorization is None else {"Authorization": authorization}
    response = await _call(api, method, path, body, headers)
    _assert_problem(response, 401, "unauthenticated")
    assert response.headers["www-authenticate"] == "Bearer"
    assert api.journal_count() == before


async def test_a_wrong_secret_for_a_real_key_id_is_unauthenticated(api: Api) -> None:
    real = api.tokens["acme:auditor"]
    forged = real[:-4] + ("AAAA" if not real.endswith("AAAA") else "BBBB")
    response = await api.client.get("/v1/tools", headers={"Authorization": f"Bearer {forged}"})
    _assert_problem(response, 401, "unauthenticated")


async def test_a_revoked_key_is_unauthenticated_at_once(api: Api) -> None:
    store = await PgStore.open(api.database_url)
    try:
        keys = PgKeyStore(store.engine, store.ops)
        record, issued = await keys.create("acme", "short-lived", ["agent"])
        headers = {"Authorization": f"Bearer {issued.token}"}
        assert (await api.client.get("/v1/tools", headers=headers)).status_code == 200
        assert await keys.revoke(record.key_id)
    finally:
        await store.close()
    response = await api.client.post("/v1/syscalls", json=SYSCALL, headers=headers)
    _assert_problem(response, 401, "unauthenticated")


@pytest.mark.parametrize(("method", "path", "body", "roles"), ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("role", ["agent", "approver", "auditor"])
async def test_each_route_admits_exactly_its_roles(
    api: Api, method: str, path: str, body: Any, roles: set[str], role: str
) -> None:
    before = api.journal_count()
    response = await _call(api, method, path, body, api.auth(f"acme:{role}"))
    if role in roles:
        assert response.status_code not in (401, 403), response.text
    else:
        _assert_problem(response, 403, "forbidden_role")
        assert api.journal_count() == before


@pytest.mark.parametrize(("method", "path", "body", "roles"), ROUTES, ids=ROUTE_IDS)
async def test_admin_may_call_every_route(
    api: Api, method: str, path: str, body: Any, roles: set[str]
) -> None:
    # A run is its opener's, though: the admin's syscall on the agent's run-roles is
    # refused identity_mismatch (and its replay allowed, as for every auditor).
    response = await _call(api, method, path, body, api.auth("acme:admin"))
    assert response.status_code != 401, response.text
    if response.status_code == 403:
        assert (path, response.json()["code"]) == ("/v1/syscalls", "identity_mismatch")


async def test_another_tenants_run_journal_verify_and_replay_are_not_found(api: Api) -> None:
    executed = await api.syscall("echo", {"n": 1}, run_id="run-private", causal_id="c-1")
    assert executed.status_code == 200, executed.text
    assert (
        await api.client.get("/v1/runs/run-private/journal", headers=api.auth("acme:auditor"))
    ).status_code == 200
    for method, path in [
        ("GET", "/v1/runs/run-private/journal"),
        ("GET", "/v1/runs/run-private/verify"),
        ("POST", "/v1/runs/run-private/replay"),
    ]:
        response = await api.client.request(method, path, headers=api.auth("globex:auditor"))
        _assert_problem(response, 404, "not_found")
        response = await api.client.request(method, path, headers=api.auth("globex:admin"))
        _assert_problem(response, 404, "not_found")


async def test_another_tenants_confirmation_cannot_be_seen_approved_or_denied(api: Api) -> None:
    pending = await api.syscall(
        "files.append", {"path": "t.txt", "line": "x"}, run_id="run-consent", causal_id="c-1"
    )
    assert pending.status_code == 202, pending.text
    confirmation_id = pending.json()["confirmation"]["id"]

    listed = await api.client.get("/v1/confirmations", headers=api.auth("globex:approver"))
    assert listed.status_code == 200
    assert confirmation_id not in [c["id"] for c in listed.json()["confirmations"]]
    for action in ("approve", "deny"):
        response = await api.client.post(
            f"/v1/confirmations/{confirmation_id}/{action}", headers=api.auth("globex:approver")
        )
        _assert_problem(response, 404, "not_found")
    state = api.sql("SELECT state FROM confirmations WHERE confirmation_id = %s", confirmation_id)
    assert state == [("PENDING",)]


async def test_the_same_run_id_in_two_tenants_is_two_runs(api: Api) -> None:
    mine = await api.syscall("echo", {"who": "acme"}, run_id="run-shared", causal_id="c-1")
    theirs = await api.syscall(
        "echo", {"who": "globex"}, run_id="run-shared", causal_id="c-1", who="globex:agent"
    )
    assert mine.json()["outcome"] == theirs.json()["outcome"] == "executed"
    assert mine.json()["journal_position"] == theirs.json()["journal_position"] == 1
    journal = await api.client.get(
        "/v1/runs/run-shared/journal", headers=api.auth("globex:auditor")
    )
    assert [e["body"]["result"] for e in journal.json()["entries"]] == [{"who": "globex"}]


CEDAR = """
[policy]
engine = "cedar"
policies = "policies/*.cedar"
"""
POLICIES = {
    "main.cedar": (
        '@id("everyone")\n'
        "permit (principal, action, resource);\n"
        '@id("no-writes-for-bob")\n'
        'forbid (principal == Arvis::Principal::"bob", action,'
        ' resource == Arvis::Tool::"files.write");\n'
    )
}


@pytest.fixture(scope="module")
async def people(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    """A Cedar deployment that forbids bob files.write, with keys for the agents alice
    and bob of tenant acme (alice has two), besides the usual one per role."""
    data_dir = write_policies(tmp_path_factory.mktemp("arvis-people"), POLICIES)
    async with serve_api(database_url, data_dir, config=CEDAR) as served:
        store = await PgStore.open(database_url)
        try:
            keys = PgKeyStore(store.engine, store.ops)
            for who, principal in (("alice", "alice"), ("alice:2", "alice"), ("bob", "bob")):
                _, issued = await keys.create("acme", principal, ["agent"])
                served.tokens[who] = issued.token
        finally:
            await store.close()
        yield served


async def test_another_principal_never_receives_a_runs_result_and_writes_nothing(
    people: Api, caplog: pytest.LogCaptureFixture
) -> None:
    api = people
    secret = {"path": "alice.txt", "content": "alice's secret"}
    mine = await api.syscall(
        "files.write", secret, run_id="run-alice", causal_id="c-1", who="alice"
    )
    assert mine.json()["outcome"] == "executed", mine.text
    journal = api.sql("SELECT position, kind FROM journal_entries WHERE run_id = 'run-alice'")

    # Bob, whom the policy forbids files.write, re-posts her run, causal id and payload.
    with caplog.at_level("INFO", logger="arvis.access"):
        theirs = await api.syscall(
            "files.write", secret, run_id="run-alice", causal_id="c-1", who="bob"
        )
    [logged] = [json.loads(r.getMessage()) for r in caplog.records if r.name == "arvis.access"]
    assert (logged["status"], logged["run_id"], logged["causal_id"]) == (403, "run-alice", "c-1")
    assert logged["problem"] == "identity_mismatch"
    # ...and takes a causal id of hers before she does.
    first = await api.syscall("files.write", secret, run_id="run-alice", causal_id="c-2", who="bob")

    for refused in (theirs, first):
        _assert_problem(refused, 403, "identity_mismatch")
        assert "secret" not in refused.text
    assert api.sql("SELECT position, kind FROM journal_entries WHERE run_id = 'run-alice'") == (
        journal
    )
    assert api.sql("SELECT causal_id FROM decisions WHERE run_id = 'run-alice'") == [("c-1",)]
    # She is not locked out of c-2, and another key of hers is her.
    later = await api.syscall(
        "files.write", secret, run_id="run-alice", causal_id="c-2", who="alice"
    )
    assert later.json()["outcome"] == "executed"
    again = await api.syscall(
        "files.write", secret, run_id="run-alice", causal_id="c-1", who="alice:2"
    )
    assert again.json()["outcome"] == "deduplicated"
    metrics = await api.client.get("/metrics", headers=api.auth("acme:admin"))
    assert 'arvis_syscall_errors_total{code="identity_mismatch"} 2.0' in metrics.text


async def test_an_agent_replays_only_its_own_runs_and_an_auditor_every_run(people: Api) -> None:
    api = people
    done = await api.syscall("echo", {"n": 1}, run_id="run-replayed", causal_id="c", who="alice")
    assert done.status_code == 200, done.text

    def replay(who: str) -> Any:
        return api.client.post("/v1/runs/run-replayed/replay", headers=api.auth(who))

    _assert_problem(await replay("bob"), 403, "identity_mismatch")
    for reader in ("alice", "alice:2", "acme:auditor", "acme:admin"):
        response = await replay(reader)
        assert response.status_code == 200, (reader, response.text)
        assert [r["outcome"] for r in response.json()["results"]] == ["executed"]
    # Another tenant's reader still learns nothing of it.
    _assert_problem(await replay("globex:auditor"), 404, "not_found")
