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
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import slack
from tests.support.evidence import wait_for
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


async def _asked(
    stand_in: slack.SlackStandIn, api: Api, run_id: str, tool: str, payload: dict[str, Any]
) -> tuple[str, str]:
    """The confirmation id and what its posted buttons carry back."""
    confirmation_id = await slack.ask(api, run_id, tool, payload)
    return confirmation_id, slack.button(slack.posted(stand_in, confirmation_id), "arvis_approve")


_click = slack.click
_confirmation = slack.confirmation


async def test_a_consent_request_is_posted_with_its_arguments_asker_terms_ids_and_buttons(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    payload = {"path": "slack/a.txt", "content": "pay 100 EUR to ACME-7 <!channel>"}
    confirmation_id = await slack.ask(api, "slack-post", "files.write", payload)

    message = slack.posted(stand_in, confirmation_id)
    text = slack.text_of(message)
    assert message["channel"] == slack.CHANNEL
    assert "pay 100 EUR to ACME-7" in text  # the frozen arguments
    assert "&lt;!channel&gt;" in text  # shown as text, never a mention
    assert "<!channel>" not in text
    assert "`agent-of-acme`" in text  # who asks
    assert "ARVIS's policy asks consent for `files.write`" in text
    # Which rule demanded the consent, and why: not only the policy's digest.
    assert "Policy `default.consent_tools` (rules `" in text
    assert "tool 'files.write' is on the list of tools that need consent" in text
    for value in ("slack-post", "c1", confirmation_id):
        assert value in text
    assert json.loads(slack.button(message, "arvis_approve")) == {
        "t": "acme",
        "c": confirmation_id,
    }
    assert slack.button(message, "arvis_deny") == slack.button(message, "arvis_approve")
    assert message["metadata"]["event_payload"] == {
        "tenant_id": "acme",
        "confirmation_id": confirmation_id,
        "round": 1,
    }

    await slack.kernel_of(api).deliverer.deliver_once()  # delivered once: not posted again
    assert len([m for m in stand_in.of("chat.postMessage") if confirmation_id in str(m)]) == 1


DECISIONS = {
    "approve": ("arvis_approve", "APPROVED", "executed"),
    "deny": ("arvis_deny", "DENIED", "refused"),
}


@pytest.mark.parametrize(("button", "state", "then"), DECISIONS.values(), ids=DECISIONS.keys())
async def test_a_click_is_decided_as_the_slack_users_principal_and_updates_the_message(
    api: Api, stand_in: slack.SlackStandIn, button: str, state: str, then: str
) -> None:
    payload = {"path": f"slack/{button}.txt", "content": "ok"}
    confirmation_id, value = await _asked(stand_in, api, f"slack-{button}", "files.write", payload)

    ts = slack.shown(stand_in, confirmation_id)["ts"]

    status, answer = await _click(api, "U0APPROVER", button, value, message_ts=ts)

    assert (status, answer["state"]) == (200, state)
    decided = await _confirmation(api, confirmation_id)
    assert decided["decided_by"] == "approver-of-acme (slack:U0APPROVER)"
    [update] = [u for u in stand_in.of("chat.update") if confirmation_id in json.dumps(u)]
    assert update["ts"] == ts
    shown = slack.shown(stand_in, confirmation_id)
    verb = state.lower()
    assert f"*{state}* — {verb} by approver-of-acme (slack:U0APPROVER)" in slack.text_of(shown)
    assert slack.buttons(shown) == []
    again = await api.syscall("files.write", payload, run_id=f"slack-{button}", causal_id="c1")
    assert again.json()["outcome"] == then


async def test_an_approval_in_slack_is_on_record_with_how_the_approver_authenticated(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    confirmation_id, value = await _asked(
        stand_in, api, "slack-record", "files.write", {"path": "s/rec.txt", "content": "r"}
    )

    await _click(api, "U0APPROVER", "arvis_approve", value)

    [approval] = (await _confirmation(api, confirmation_id))["approvals"]
    assert (approval["principal_id"], approval["auth_method"], approval["key_id"]) == (
        "approver-of-acme",
        "slack",
        "U0APPROVER",
    )


REFUSED_CLICKS = {
    # The requester's own Slack user: four eyes, as on every approval path.
    "requester": ("U0REQUESTER", 403, "self_approval", "may not approve"),
    # Another tenant's approver: that confirmation does not exist for them.
    "other-tenant": ("U0GLOBEX", 404, "not_found", "no confirmation"),
    # Not in [slack.users]: whatever name the payload carries, never trusted.
    "stranger": ("U0STRANGER", 403, "unknown_slack_user", "not an ARVIS approver"),
}


@pytest.mark.parametrize(
    ("user", "status", "code", "told"), REFUSED_CLICKS.values(), ids=REFUSED_CLICKS.keys()
)
async def test_a_refused_click_decides_nothing_and_tells_the_clicker_why(
    api: Api, stand_in: slack.SlackStandIn, user: str, status: int, code: str, told: str
) -> None:
    confirmation_id, value = await _asked(
        stand_in, api, f"slack-refused-{code}", "files.write", {"path": "s/r.txt", "content": "r"}
    )

    answer = await _click(api, user, "arvis_approve", value)

    assert (answer[0], answer[1]["code"]) == (status, code)
    assert (await _confirmation(api, confirmation_id))["state"] == "PENDING"
    said = [t["text"] for t in stand_in.of("chat.postEphemeral") if t["user"] == user]
    assert any(told in text for text in said), said


async def test_groups_and_quorum_hold_in_slack_as_everywhere(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    confirmation_id, value = await _asked(
        stand_in, api, "slack-quorum", "files.append", {"path": "slack/q.log", "line": "q"}
    )

    ts = slack.shown(stand_in, confirmation_id)["ts"]

    outside = await _click(api, "U0APPROVER", "arvis_approve", value, message_ts=ts)
    first = await _click(api, "U0LEAD1", "arvis_approve", value, message_ts=ts)
    after_first = slack.shown(stand_in, confirmation_id)
    twice = await _click(api, "U0LEAD1", "arvis_approve", value, message_ts=ts)
    second = await _click(api, "U0LEAD2", "arvis_approve", value, message_ts=ts)

    assert (outside[0], outside[1]["code"]) == (403, "approver_not_in_group")
    assert (first[0], first[1]["state"]) == (200, "PENDING")
    assert (twice[0], twice[1]["code"]) == (409, "already_approved")
    assert (second[0], second[1]["state"]) == (200, "APPROVED")
    approvals = (await _confirmation(api, confirmation_id))["approvals"]
    assert sorted(a["principal_id"] for a in approvals) == ["lead1", "lead2"]
    # The buttons stay while the quorum still needs an approval, and go once it is met.
    assert "1 of 2 approvals: lead1 (slack:U0LEAD1)" in slack.text_of(after_first)
    assert len(slack.buttons(after_first)) == 2
    decided = slack.shown(stand_in, confirmation_id)
    assert slack.buttons(decided) == []
    assert "approved by lead1 (slack:U0LEAD1), lead2 (slack:U0LEAD2)" in slack.text_of(decided)


BAD_REQUESTS = {
    "wrong-secret": {"secret": "not-the-signing-secret-of-this-app"},
    # Ages, not instants: the parameters are made when the suite is collected, maybe
    # minutes before this test runs.
    "ten-minutes-old": {"age_s": 600},
    "from-the-future": {"age_s": -600},
}


@pytest.mark.parametrize("signing", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
async def test_an_incorrectly_signed_or_stale_click_decides_nothing(
    api: Api, stand_in: slack.SlackStandIn, signing: dict[str, Any]
) -> None:
    run_id = f"slack-bad-{len(stand_in.calls)}"
    confirmation_id, value = await _asked(
        stand_in, api, run_id, "files.write", {"path": "slack/e.txt", "content": "e"}
    )
    updates = len(stand_in.of("chat.update"))

    status, problem = await _click(api, "U0APPROVER", "arvis_approve", value, **signing)

    assert (status, problem["code"]) == (401, "signature_invalid")
    assert problem["type"] == "urn:arvis:problem:signature_invalid"
    assert (await _confirmation(api, confirmation_id))["state"] == "PENDING"
    assert len(stand_in.of("chat.update")) == updates


async def test_a_tampered_unsigned_or_replayed_click_decides_nothing(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    confirmation_id, value = await _asked(
        stand_in, api, "slack-tamper", "files.write", {"path": "slack/f.txt", "content": "f"}
    )
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
    deep = b"payload=" + b"%5B" * 20000  # signed, but nested past any parser's depth
    too_deep = await api.client.post(
        "/slack/interactions", content=deep, headers=slack.signed(deep)
    )
    junk = await api.client.post(
        "/slack/interactions", content=signed_junk, headers=slack.signed(signed_junk)
    )

    assert (too_large.status_code, too_large.json()["code"]) == (413, "body_too_large")
    assert (as_json.status_code, as_json.json()["code"]) == (415, "unsupported_media_type")
    assert (long_header.status_code, long_header.json()["code"]) == (431, "header_too_large")
    assert (junk.status_code, junk.json()["code"]) == (400, "malformed_body")
    assert (too_deep.status_code, too_deep.json()["code"]) == (400, "malformed_body")
    for response in (too_large, as_json, long_header, junk, too_deep):
        assert response.headers["content-type"] == "application/problem+json"


async def test_a_failed_post_stays_in_the_outbox_for_the_next_pass(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    stand_in.fail["chat.postMessage"] = "channel_not_found"
    response = await api.syscall(
        "files.write", {"path": "s/h", "content": "h"}, run_id="slack-down", causal_id="c1"
    )
    confirmation_id = response.json()["confirmation"]["id"]

    await slack.kernel_of(api).deliverer.deliver_once()

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
    _, value = await _asked(
        stand_in, api, "slack-logs", "files.write", {"path": "slack/l.txt", "content": "l"}
    )
    await _click(api, "U0APPROVER", "arvis_approve", value)
    await _click(api, "U0APPROVER", "arvis_approve", value, secret="wrong-secret-wrong-secret")

    logged = "\n".join(
        record.getMessage() + str(record.args) + str(record.__dict__) for record in caplog.records
    )
    assert logged  # something was logged, and none of it is a secret
    assert slack.SIGNING_SECRET not in logged
    assert slack.BOT_TOKEN not in logged


async def test_with_slack_and_no_webhook_the_background_pass_posts_the_request(
    database_url: str, tmp_path: Path, stand_in: slack.SlackStandIn
) -> None:
    # No [[notify.webhooks]]: Slack alone is a destination, so the outbox is polled.
    config = slack.config(stand_in.url, USERS) + POLICY.replace(
        "interval_s = 600", "interval_s = 0.1"
    )
    with pytest.MonkeyPatch.context() as patch:
        for name, value in slack.ENVIRONMENT.items():
            patch.setenv(name, value)
        async with serve_api(database_url, tmp_path, config=config) as served:
            response = await served.syscall(
                "files.write",
                {"path": "slack/bg.txt", "content": "x"},
                run_id="slack-bg",
                causal_id="c1",
            )
            confirmation_id = response.json()["confirmation"]["id"]
            await wait_for(
                lambda: any(
                    confirmation_id in json.dumps(m) for m in stand_in.of("chat.postMessage")
                )
            )
