"""Approvals in Slack, against a local stand-in of Slack (no network).

A consent request becomes a ``chat.postMessage`` with the frozen arguments, the asking
principal, the policy's terms, the ids and Approve/Deny buttons. A click is acted on only
when Slack's signature over the body verifies within the tolerance, once, from a Slack
user ``[slack.users]`` names (by id); the decision is the consent service's — four eyes,
groups, quorum — and the message is updated with the outcome.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from arvis.kernel import Kernel
from tests.support import slack
from tests.support.http import Api, serve_api

pytestmark = pytest.mark.db

USERS = {
    "U0APPROVER": ("acme", "approver-of-acme", ()),
    "U0LEAD1": ("acme", "lead1", ("leads",)),
    "U0LEAD2": ("acme", "lead2", ("leads",)),
    "U0REQUESTER": ("acme", "agent-of-acme", ()),  # the agent's own principal
    "U0GLOBEX": ("globex", "approver-of-globex", ()),
}
POLICY = """
[notify]
interval_s = 600   # the test delivers (deliver_once); the background pass stays out of it

[policy.default]
consent_tools = ["files.write"]

[policy.default.approvals."files.append"]
approvers = ["leads"]
quorum = 2
"""


@pytest.fixture(scope="module")
def stand_in() -> Iterator[slack.SlackStandIn]:
    with slack.slack_stand_in() as running:
        yield running


@pytest.fixture(scope="module")
async def api(
    database_url: str, tmp_path_factory: pytest.TempPathFactory, stand_in: slack.SlackStandIn
) -> AsyncIterator[Api]:
    config = slack.config(stand_in.url, USERS) + POLICY
    with pytest.MonkeyPatch.context() as patch:
        for name, value in slack.ENVIRONMENT.items():
            patch.setenv(name, value)
        data_dir = tmp_path_factory.mktemp("arvis-slack")
        async with serve_api(database_url, data_dir, config=config) as served:
            yield served


def _kernel(api: Api) -> Kernel:
    kernel: Kernel = api.app.state.kernel
    return kernel


async def _ask(api: Api, run_id: str, tool: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The agent posts a call that needs consent; the outbox is delivered to Slack."""
    response = await api.syscall(tool, payload, run_id=run_id, causal_id="c1")
    answer: dict[str, Any] = response.json()
    assert answer["outcome"] == "confirmation_required", answer
    await _kernel(api).deliverer.deliver_once()
    return answer


def _posted(stand_in: slack.SlackStandIn, confirmation_id: str) -> dict[str, Any]:
    [message] = [m for m in stand_in.of("chat.postMessage") if confirmation_id in json.dumps(m)]
    return message


def _button(message: dict[str, Any], action_id: str) -> str:
    [actions] = [block for block in message["blocks"] if block["type"] == "actions"]
    [button] = [e for e in actions["elements"] if e["action_id"] == action_id]
    return str(button["value"])


async def _click(
    api: Api, user: str, action_id: str, value: str, **signing: Any
) -> tuple[int, dict[str, Any]]:
    body = slack.click_body(user, action_id, value)
    response = await api.client.post(
        "/slack/interactions", content=body, headers=slack.signed(body, **signing)
    )
    return response.status_code, response.json()


async def _confirmation(api: Api, confirmation_id: str) -> dict[str, Any]:
    response = await api.client.get(
        "/v1/confirmations", headers=api.auth("acme:approver"), params={"limit": 500}
    )
    [found] = [c for c in response.json()["confirmations"] if c["id"] == confirmation_id]
    return dict(found)


async def test_a_consent_request_is_posted_with_its_arguments_asker_terms_ids_and_buttons(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    payload = {"path": "slack/a.txt", "content": "pay 100 EUR to ACME-7"}
    asked = await _ask(api, "slack-post", "files.write", payload)
    confirmation_id = asked["confirmation"]["id"]

    message = _posted(stand_in, confirmation_id)
    text = json.dumps(message["blocks"])
    assert message["channel"] == slack.CHANNEL
    assert "pay 100 EUR to ACME-7" in text  # the frozen arguments
    assert "agent-of-acme" in text  # who asks
    assert "ARVIS's policy asks consent for `files.write`" in text
    for value in ("slack-post", "c1", confirmation_id):
        assert value in text
    assert json.loads(_button(message, "arvis_approve")) == {"t": "acme", "c": confirmation_id}
    assert _button(message, "arvis_deny") == _button(message, "arvis_approve")

    await _kernel(api).deliverer.deliver_once()  # delivered once: not posted again
    assert len([m for m in stand_in.of("chat.postMessage") if confirmation_id in str(m)]) == 1


async def test_an_approval_in_slack_is_recorded_as_the_slack_users_principal_and_the_call_runs(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    payload = {"path": "slack/b.txt", "content": "ok"}
    asked = await _ask(api, "slack-approve", "files.write", payload)
    confirmation_id = asked["confirmation"]["id"]
    value = _button(_posted(stand_in, confirmation_id), "arvis_approve")

    status, answer = await _click(api, "U0APPROVER", "arvis_approve", value)

    assert (status, answer["state"]) == (200, "APPROVED")
    [approval] = (await _confirmation(api, confirmation_id))["approvals"]
    assert (approval["principal_id"], approval["auth_method"], approval["key_id"]) == (
        "approver-of-acme",
        "slack",
        "U0APPROVER",
    )
    [update] = [u for u in stand_in.of("chat.update") if confirmation_id in json.dumps(u)]
    assert update["ts"] == "1700000000.000001"
    assert "APPROVED" in json.dumps(update["blocks"])
    assert "approved in Slack by approver-of-acme" in json.dumps(update["blocks"])
    ran = (await api.syscall("files.write", payload, run_id="slack-approve", causal_id="c1")).json()
    assert ran["outcome"] == "executed"


async def test_a_deny_in_slack_refuses_the_call_for_ever(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    payload = {"path": "slack/c.txt", "content": "no"}
    asked = await _ask(api, "slack-deny", "files.write", payload)
    value = _button(_posted(stand_in, asked["confirmation"]["id"]), "arvis_deny")

    status, answer = await _click(api, "U0APPROVER", "arvis_deny", value)

    assert (status, answer["state"]) == (200, "DENIED")
    again = (await api.syscall("files.write", payload, run_id="slack-deny", causal_id="c1")).json()
    assert again["outcome"] == "refused"


async def test_the_requester_cannot_approve_their_own_call_from_slack(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    asked = await _ask(api, "slack-self", "files.write", {"path": "slack/d.txt", "content": "x"})
    confirmation_id = asked["confirmation"]["id"]
    value = _button(_posted(stand_in, confirmation_id), "arvis_approve")

    status, problem = await _click(api, "U0REQUESTER", "arvis_approve", value)

    assert (status, problem["code"]) == (403, "self_approval")
    assert (await _confirmation(api, confirmation_id))["state"] == "PENDING"
    [told] = [t for t in stand_in.of("chat.postEphemeral") if t["user"] == "U0REQUESTER"]
    assert "may not approve" in told["text"]


async def test_groups_and_quorum_hold_in_slack_as_everywhere(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    asked = await _ask(api, "slack-quorum", "files.append", {"path": "slack/q.log", "line": "q"})
    confirmation_id = asked["confirmation"]["id"]
    value = _button(_posted(stand_in, confirmation_id), "arvis_approve")

    outside = await _click(api, "U0APPROVER", "arvis_approve", value)
    first = await _click(api, "U0LEAD1", "arvis_approve", value)
    twice = await _click(api, "U0LEAD1", "arvis_approve", value)
    second = await _click(api, "U0LEAD2", "arvis_approve", value)

    assert (outside[0], outside[1]["code"]) == (403, "approver_not_in_group")
    assert (first[0], first[1]["state"]) == (200, "PENDING")
    assert (twice[0], twice[1]["code"]) == (409, "already_approved")
    assert (second[0], second[1]["state"]) == (200, "APPROVED")
    approvals = (await _confirmation(api, confirmation_id))["approvals"]
    assert sorted(a["principal_id"] for a in approvals) == ["lead1", "lead2"]


async def test_a_click_on_another_tenants_confirmation_finds_nothing(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    asked = await _ask(api, "slack-tenant", "files.write", {"path": "slack/t.txt", "content": "t"})
    confirmation_id = asked["confirmation"]["id"]
    value = _button(_posted(stand_in, confirmation_id), "arvis_approve")

    status, problem = await _click(api, "U0GLOBEX", "arvis_approve", value)

    assert (status, problem["code"]) == (404, "not_found")
    assert (await _confirmation(api, confirmation_id))["state"] == "PENDING"


BAD_REQUESTS = {
    "wrong-secret": {"secret": "not-the-signing-secret-of-this-app"},
    "ten-minutes-old": {"timestamp": int(time.time()) - 600},
    "from-the-future": {"timestamp": int(time.time()) + 600},
}


@pytest.mark.parametrize("signing", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
async def test_an_incorrectly_signed_or_stale_click_decides_nothing(
    api: Api, stand_in: slack.SlackStandIn, signing: dict[str, Any]
) -> None:
    run_id = f"slack-bad-{len(stand_in.calls)}"
    asked = await _ask(api, run_id, "files.write", {"path": "slack/e.txt", "content": "e"})
    confirmation_id = asked["confirmation"]["id"]
    value = _button(_posted(stand_in, confirmation_id), "arvis_approve")
    updates = len(stand_in.of("chat.update"))

    status, problem = await _click(api, "U0APPROVER", "arvis_approve", value, **signing)

    assert (status, problem["code"]) == (401, "signature_invalid")
    assert problem["type"] == "urn:arvis:problem:signature_invalid"
    assert (await _confirmation(api, confirmation_id))["state"] == "PENDING"
    assert len(stand_in.of("chat.update")) == updates


async def test_a_tampered_unsigned_or_replayed_click_decides_nothing(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    asked = await _ask(api, "slack-tamper", "files.write", {"path": "slack/f.txt", "content": "f"})
    confirmation_id = asked["confirmation"]["id"]
    value = _button(_posted(stand_in, confirmation_id), "arvis_deny")
    body = slack.click_body("U0APPROVER", "arvis_deny", value)
    headers = slack.signed(body)
    tampered = body.replace(b"arvis_deny", b"arvis_approve")

    forged = await api.client.post("/slack/interactions", content=tampered, headers=headers)
    bare = await api.client.post(
        "/slack/interactions",
        content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert (forged.status_code, forged.json()["code"]) == (401, "signature_invalid")
    assert (bare.status_code, bare.json()["code"]) == (401, "signature_invalid")
    assert (await _confirmation(api, confirmation_id))["state"] == "PENDING"

    first = await api.client.post("/slack/interactions", content=body, headers=headers)
    replayed = await api.client.post("/slack/interactions", content=body, headers=headers)
    assert first.json()["state"] == "DENIED"
    assert (replayed.status_code, replayed.json()["code"]) == (409, "request_replayed")


async def test_a_slack_user_not_in_the_map_decides_nothing_whatever_its_name(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    asked = await _ask(
        api, "slack-stranger", "files.write", {"path": "slack/g.txt", "content": "g"}
    )
    confirmation_id = asked["confirmation"]["id"]
    value = _button(_posted(stand_in, confirmation_id), "arvis_approve")

    # click_body names every user "approver-of-acme"-like display names: never trusted.
    status, problem = await _click(api, "U0STRANGER", "arvis_approve", value)

    assert (status, problem["code"]) == (403, "unknown_slack_user")
    assert (await _confirmation(api, confirmation_id))["state"] == "PENDING"


async def test_the_interaction_endpoint_bounds_what_it_reads(api: Api) -> None:
    big = b"payload=" + b"x" * (64 * 1024)
    too_large = await api.client.post("/slack/interactions", content=big, headers=slack.signed(big))
    as_json = await api.client.post("/slack/interactions", json={"payload": "{}"})
    long_header = await api.client.post(
        "/slack/interactions",
        content=b"payload=%7B%7D",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Signature": "v0=" + "0" * 1000,
        },
    )
    signed_junk = b"payload=not-json"
    junk = await api.client.post(
        "/slack/interactions", content=signed_junk, headers=slack.signed(signed_junk)
    )

    assert (too_large.status_code, too_large.json()["code"]) == (413, "body_too_large")
    assert (as_json.status_code, as_json.json()["code"]) == (415, "unsupported_media_type")
    assert (long_header.status_code, long_header.json()["code"]) == (431, "header_too_large")
    assert (junk.status_code, junk.json()["code"]) == (400, "malformed_body")
    for response in (too_large, as_json, long_header, junk):
        assert response.headers["content-type"] == "application/problem+json"


async def test_a_failed_post_stays_in_the_outbox_for_the_next_pass(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    stand_in.fail["chat.postMessage"] = "channel_not_found"
    response = await api.syscall(
        "files.write", {"path": "s/h", "content": "h"}, run_id="slack-down", causal_id="c1"
    )
    confirmation_id = response.json()["confirmation"]["id"]

    await _kernel(api).deliverer.deliver_once()

    rows = api.sql(
        "SELECT state, last_error FROM notify_outbox"
        " WHERE event_type = 'confirmation.requested' AND subject ->> 'confirmation_id' = %s",
        confirmation_id,
    )
    assert rows == [("PENDING", "@slack: slack: channel_not_found")]


async def test_no_secret_reaches_the_logs(
    api: Api, stand_in: slack.SlackStandIn, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)
    asked = await _ask(api, "slack-logs", "files.write", {"path": "slack/l.txt", "content": "l"})
    value = _button(_posted(stand_in, asked["confirmation"]["id"]), "arvis_approve")
    await _click(api, "U0APPROVER", "arvis_approve", value)
    await _click(api, "U0APPROVER", "arvis_approve", value, secret="wrong-secret-wrong-secret")

    logged = "\n".join(
        record.getMessage() + str(record.args) + str(record.__dict__) for record in caplog.records
    )
    assert logged  # something was logged, and none of it is a secret
    assert slack.SIGNING_SECRET not in logged
    assert slack.BOT_TOKEN not in logged
