"""Every route needs a live key of the right role, and sees only its key's tenant."""

from __future__ import annotations

from typing import Any

import pytest

from arvis.store.database import PgStore
from arvis.store.keys import PgKeyStore
from tests.support.http import Api

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
        keys = PgKeyStore(store.engine)
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
    response = await _call(api, method, path, body, api.auth("acme:admin"))
    assert response.status_code not in (401, 403), response.text


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
