"""An agent acting for a person (issue 26, DESIGN §7), against a real OpenID provider:
the person is the principal and the agent the actor, both sealed in the context and
journaled; consent is bound to both; four eyes counts both.

Two ways to say so: a token exchanged with an actor token (RFC 8693 ``act``), or an agent's
API key presenting the person's token in ``Arvis-Subject-Token``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from arvis.bootstrap import administration
from tests.support.identity import trust
from tests.support.mcp_client import Served, serve_arvis
from tests.support.oidc import OidcProvider

pytestmark = pytest.mark.db

SUBJECT = "Arvis-Subject-Token"


def config(issuer: str) -> str:
    return (
        trust(issuer)
        + """
[policy.default]
consent_tools = ["files.append"]
"""
    )


async def _key(database_url: str, principal: str, roles: list[str]) -> str:
    async with administration(database_url) as admin:
        _, issued = await admin.keys.create("acme", principal, roles)  # type: ignore[arg-type]
        return issued.token


@pytest.fixture(scope="module")
def served(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider
) -> Iterator[Served]:
    data_dir: Path = tmp_path_factory.mktemp("arvis-acting")
    with serve_arvis(database_url, data_dir, config(oidc_provider.issuer)) as running:
        with ThreadPoolExecutor(1) as pool:
            # The agent's principal holding an approver key too: four eyes must see it.
            running.tokens["acme:agent-as-approver"] = pool.submit(
                asyncio.run, _key(database_url, "agent-of-acme", ["approver"])
            ).result()
            running.tokens["acme:agent2"] = pool.submit(
                asyncio.run, _key(database_url, "agent2-of-acme", ["agent"])
            ).result()
        yield running


def syscall(run_id: str, tool: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "tool.execute",
        "run_id": run_id,
        "causal_id": "c-1",
        "decision": {"tool": tool, "payload": payload},
    }


async def post(served: Served, headers: dict[str, str], body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        return await http.post("/v1/syscalls", json=body, headers=headers)


def delegated(idp: OidcProvider, person: str) -> str:
    """``person``'s token exchanged with the agent's as the actor: ``act: {sub: arvis-agent}``."""
    return idp.token_exchange(
        idp.user_token(person), audience="arvis", actor_token=idp.agent_token()
    ).access_token


async def test_a_token_with_act_is_journaled_as_the_person_with_the_agent_acting(
    served: Served, oidc_provider: OidcProvider
) -> None:
    token = delegated(oidc_provider, "alice")
    answer = await post(
        served, {"Authorization": f"Bearer {token}"}, syscall("run-act", "echo", {"n": 1})
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["outcome"] == "executed"
    [entry] = await served.journal("run-act")
    context = entry["body"]["context"]
    assert (context["principal_id"], context["auth_method"]) == ("alice", "oidc")
    assert context["actor"] == {"principal_id": "arvis-agent", "method": "oidc", "key_id": None}
    assert context["issuer"] == oidc_provider.issuer
    # Acting for alice the agent may call tools; it never holds alice's approver role.
    assert context["roles"] == ["agent"]


async def test_an_agent_key_presenting_the_persons_token_acts_for_that_person(
    served: Served, oidc_provider: OidcProvider
) -> None:
    headers = {**served.auth("acme:agent"), SUBJECT: oidc_provider.user_token("alice")}
    answer = await post(served, headers, syscall("run-subject", "echo", {"n": 2}))
    assert answer.status_code == 200, answer.text
    [entry] = await served.journal("run-subject")
    context = entry["body"]["context"]
    assert context["principal_id"] == "alice"
    assert context["actor"]["principal_id"] == "agent-of-acme"
    assert context["actor"]["method"] == "api_key"
    assert context["actor"]["key_id"] == served.tokens["acme:agent"].split("_")[1]


async def test_a_subject_token_an_agent_may_not_use_is_refused(
    served: Served, oidc_provider: OidcProvider
) -> None:
    gina = oidc_provider.user_token("gina")  # of globex: not a person the acme agent serves
    headers = {**served.auth("acme:agent"), SUBJECT: gina}
    answer = await post(served, headers, syscall("run-gina", "echo", {"n": 3}))
    assert (answer.status_code, answer.json()["code"]) == (403, "delegation_refused")
    approver = {**served.auth("acme:approver"), SUBJECT: oidc_provider.user_token("alice")}
    answer = await post(served, approver, syscall("run-gina", "echo", {"n": 3}))
    assert (answer.status_code, answer.json()["code"]) == (403, "delegation_refused")


async def test_consent_is_bound_to_both_the_person_and_the_agent_and_four_eyes_counts_both(
    served: Served, oidc_provider: OidcProvider
) -> None:
    alice = oidc_provider.user_token("alice")
    body = syscall("run-consent", "files.append", {"path": "acting.txt", "line": "for alice"})
    as_agent = {**served.auth("acme:agent"), SUBJECT: alice}
    asked = await post(served, as_agent, body)
    assert asked.json()["outcome"] == "confirmation_required", asked.text
    confirmation = asked.json()["confirmation"]["id"]

    # Another agent for the same person: not who asked.
    other_agent = {**served.auth("acme:agent2"), SUBJECT: alice}
    refused = await post(served, other_agent, body)
    assert refused.json()["reason"] == "identity_mismatch", refused.text
    # The same agent for another person: not who asked either.
    for_dave = {**served.auth("acme:agent"), SUBJECT: oidc_provider.user_token("dave")}
    refused = (await post(served, for_dave, body)).json()
    assert "identity_mismatch" in (refused.get("reason"), refused.get("code")), refused

    async with httpx.AsyncClient(base_url=served.url, timeout=30) as http:
        path = f"/v1/confirmations/{confirmation}/approve"
        # Four eyes: neither the person ...
        by_person = await http.post(path, headers={"Authorization": f"Bearer {alice}"})
        # ... nor the agent (its principal holding an approver key) may approve.
        by_agent = await http.post(path, headers=served.auth("acme:agent-as-approver"))
        by_other = await http.post(path, headers=served.auth("acme:approver"))
    assert (by_person.status_code, by_person.json()["code"]) == (403, "self_approval")
    assert (by_agent.status_code, by_agent.json()["code"]) == (403, "self_approval")
    assert by_other.status_code == 200, by_other.text

    ran = await post(served, as_agent, body)
    assert ran.json()["outcome"] == "executed", ran.text
    assert served.sandbox_text("acting.txt") == "for alice\n"
