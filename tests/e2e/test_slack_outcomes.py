"""A consent decided anywhere updates its Slack message (issue 27), against a local
stand-in of Slack (no network).

Decided in the console or through the API, or expired: the notification outbox's
``confirmation.approved`` / ``.denied`` / ``.expired`` reaches the Slack destination,
which updates the message it posted (``chat.update`` of the ``ts`` it recorded) with the
outcome and who decided, the buttons gone; while a quorum still needs approvals the
buttons stay. A redelivered request is not posted twice: a message with a known ``ts``
is kept, and one whose answer was lost is found in the channel's history.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from arvis.bootstrap import administration
from tests.support import slack
from tests.support.console import browser_on, sign_in
from tests.support.http import Api, serve_api
from tests.support.identity import trust
from tests.support.oidc import OidcProvider

pytestmark = pytest.mark.db

USERS = {
    "U0APPROVER": ("acme", "approver-of-acme", ()),
    "U0REQUESTER": ("acme", "agent-of-acme", ()),
    "U0ALICE": ("acme", "alice", ()),
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
        data_dir = tmp_path_factory.mktemp("arvis-slack-outcomes")
        async with serve_api(database_url, data_dir, config=config) as served:
            async with administration(database_url) as admin:
                for lead in ("lead1", "lead2"):
                    _, issued = await admin.keys.create("acme", lead, ["approver"], ["leads"])
                    served.tokens[f"acme:{lead}"] = issued.token
            yield served


async def _deliver(api: Api) -> None:
    await slack.kernel_of(api).deliverer.deliver_once()


async def _approve(api: Api, confirmation_id: str, who: str = "acme:approver") -> None:
    response = await api.client.post(
        f"/v1/confirmations/{confirmation_id}/approve", headers=api.auth(who)
    )
    assert response.status_code == 200, response.text


async def _deny(api: Api, confirmation_id: str) -> None:
    response = await api.client.post(
        f"/v1/confirmations/{confirmation_id}/deny",
        headers=api.auth("acme:approver"),
        json={"reason": "not this month"},
    )
    assert response.status_code == 200, response.text


async def _approve_in_the_console(api: Api, confirmation_id: str) -> None:
    async with browser_on(api.app) as browser:
        csrf = await sign_in(browser, api.tokens["acme:approver"])
        done = await browser.post(
            f"/console/confirmations/{confirmation_id}/approve", data={"csrf_token": csrf}
        )
        assert done.status_code == 303, done.text


def _updates(stand_in: slack.SlackStandIn, ts: str) -> list[dict[str, object]]:
    return [u for u in stand_in.of("chat.update") if u["ts"] == ts]


def _outbox(api: Api, confirmation_id: str, event_type: str) -> list[tuple[object, ...]]:
    return api.sql(
        "SELECT state, last_error FROM notify_outbox"
        " WHERE event_type = %s AND subject ->> 'confirmation_id' = %s",
        event_type,
        confirmation_id,
    )


ELSEWHERE: dict[str, tuple[Callable[[Api, str], Awaitable[None]], str]] = {
    "api-approve": (_approve, "*APPROVED* — approved by approver-of-acme (api_key:"),
    "api-deny": (_deny, "*DENIED* — denied by approver-of-acme (api_key:"),
    "console-approve": (_approve_in_the_console, "*APPROVED* — approved by approver-of-acme ("),
}


@pytest.mark.parametrize(("decide", "outcome"), ELSEWHERE.values(), ids=ELSEWHERE.keys())
async def test_a_consent_decided_elsewhere_updates_its_message_and_takes_the_buttons_away(
    api: Api,
    stand_in: slack.SlackStandIn,
    decide: Callable[[Api, str], Awaitable[None]],
    outcome: str,
    request: pytest.FixtureRequest,
) -> None:
    run_id = f"out-{request.node.callspec.id}"
    confirmation_id = await slack.ask(api, run_id, "files.write", {"path": "o.txt", "content": "o"})
    ts = slack.shown(stand_in, confirmation_id)["ts"]
    assert len(slack.buttons(slack.shown(stand_in, confirmation_id))) == 2

    await decide(api, confirmation_id)
    await _deliver(api)

    [update] = _updates(stand_in, ts)
    assert update["channel"] == slack.CHANNEL
    shown = slack.shown(stand_in, confirmation_id)
    assert outcome in slack.text_of(shown)
    assert slack.buttons(shown) == []
    assert "Policy `default.consent_tools`" in slack.text_of(shown)  # the facts stay


async def test_one_approval_elsewhere_of_a_quorum_of_two_keeps_the_buttons(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    confirmation_id = await slack.ask(
        api, "out-quorum", "files.append", {"path": "q.log", "line": "q"}
    )
    ts = slack.shown(stand_in, confirmation_id)["ts"]
    assert "`default.approvals`" in slack.text_of(slack.shown(stand_in, confirmation_id))

    await _approve(api, confirmation_id, "acme:lead1")
    await _deliver(api)

    assert len(slack.buttons(slack.shown(stand_in, confirmation_id))) == 2
    assert _updates(stand_in, ts) == []  # nothing was decided: nothing to change

    await _approve(api, confirmation_id, "acme:lead2")
    await _deliver(api)

    [_] = _updates(stand_in, ts)
    shown = slack.shown(stand_in, confirmation_id)
    assert slack.buttons(shown) == []
    text = slack.text_of(shown)
    assert "*APPROVED* — approved by lead1 (api_key:" in text
    assert "lead2 (api_key:" in text


async def test_an_expired_consent_updates_its_message(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    confirmation_id = await slack.ask(
        api, "out-expiry", "files.write", {"path": "e.txt", "content": "e"}
    )
    ts = slack.shown(stand_in, confirmation_id)["ts"]
    api.sql(
        "UPDATE confirmations SET expires_at = now() - interval '1 second'"
        " WHERE confirmation_id = %s",
        confirmation_id,
    )

    assert await slack.kernel_of(api).lifecycle.consent.expire_due() >= 1
    await _deliver(api)

    [_] = _updates(stand_in, ts)
    shown = slack.shown(stand_in, confirmation_id)
    assert "*EXPIRED* — nobody decided before it expired at " in slack.text_of(shown)
    assert slack.buttons(shown) == []


async def test_a_redelivered_request_whose_message_is_known_is_not_posted_again(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    confirmation_id = await slack.ask(
        api, "out-again", "files.write", {"path": "a.txt", "content": "a"}
    )
    # As if the outbox had lost its record of the delivery (a crash before it settled).
    api.sql(
        "UPDATE notify_outbox SET state = 'PENDING', delivered_to = '{}',"
        " next_attempt_at = now() WHERE subject ->> 'confirmation_id' = %s",
        confirmation_id,
    )

    await _deliver(api)

    assert len(stand_in.message_of(confirmation_id)) == 1
    assert _outbox(api, confirmation_id, "confirmation.requested") == [("DELIVERED", None)]


async def test_a_post_whose_answer_was_lost_is_found_in_the_channel_not_posted_twice(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    stand_in.lose.add("chat.postMessage")
    confirmation_id = await slack.ask(
        api, "out-lost", "files.write", {"path": "l.txt", "content": "l"}
    )
    [(state, error)] = _outbox(api, confirmation_id, "confirmation.requested")
    assert state == "PENDING"
    assert "@slack" in str(error)
    [landed] = stand_in.message_of(confirmation_id)  # it did land; ARVIS did not hear so

    slack.due_again(api)
    await _deliver(api)

    assert stand_in.message_of(confirmation_id) == [landed]
    assert _outbox(api, confirmation_id, "confirmation.requested") == [("DELIVERED", None)]
    await _deny(api, confirmation_id)
    await _deliver(api)
    assert _updates(stand_in, landed["ts"])
    assert slack.buttons(slack.shown(stand_in, confirmation_id)) == []


async def test_a_decision_while_a_post_is_unanswered_updates_the_message_once_it_is_found(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    stand_in.lose.add("chat.postMessage")
    confirmation_id = await slack.ask(
        api, "out-racing", "files.write", {"path": "r.txt", "content": "r"}
    )
    await _approve(api, confirmation_id)

    await _deliver(api)  # the request is not due yet; its post may still be under way
    [(state, error)] = _outbox(api, confirmation_id, "confirmation.approved")
    assert (state, error) == ("PENDING", "@slack: the consent request is still being posted")

    api.sql(
        "UPDATE slack_messages SET posting_at = now() - interval '1 hour'"
        " WHERE confirmation_id = %s",
        confirmation_id,
    )
    slack.due_again(api)
    await _deliver(api)

    [shown] = stand_in.message_of(confirmation_id)
    assert slack.buttons(shown) == []
    assert "*APPROVED* — approved by approver-of-acme" in slack.text_of(shown)
    assert _outbox(api, confirmation_id, "confirmation.approved") == [("DELIVERED", None)]


async def test_without_the_history_scope_a_lost_answer_is_posted_again_and_still_safe(
    api: Api, stand_in: slack.SlackStandIn
) -> None:
    stand_in.lose.add("chat.postMessage")
    confirmation_id = await slack.ask(
        api, "out-noscope", "files.write", {"path": "n.txt", "content": "n"}
    )
    [stray] = stand_in.message_of(confirmation_id)
    stand_in.fail["conversations.history"] = "missing_scope"

    slack.due_again(api)
    await _deliver(api)

    first, second = stand_in.message_of(confirmation_id)
    assert first["ts"] == stray["ts"]
    await _deny(api, confirmation_id)
    await _deliver(api)
    assert slack.buttons(slack.shown_at(stand_in, second["ts"])) == []
    # The message ARVIS cannot see keeps its buttons; a click on it decides nothing and
    # refreshes it to the consent's state.
    status, problem = await slack.click(
        api,
        "U0APPROVER",
        "arvis_approve",
        slack.button(first, "arvis_approve"),
        message_ts=first["ts"],
    )
    assert (status, problem["code"]) == (409, "conflict")
    refreshed = slack.shown_at(stand_in, first["ts"])
    assert slack.buttons(refreshed) == []
    assert "*DENIED*" in slack.text_of(refreshed)


async def test_a_request_an_agent_made_for_a_person_names_both_and_neither_may_approve(
    database_url: str,
    tmp_path: Path,
    stand_in: slack.SlackStandIn,
    oidc_provider: OidcProvider,
) -> None:
    config = trust(oidc_provider.issuer) + slack.config(stand_in.url, USERS) + POLICY
    with pytest.MonkeyPatch.context() as patch:
        for name, value in slack.ENVIRONMENT.items():
            patch.setenv(name, value)
        async with serve_api(database_url, tmp_path, config=config) as served:
            subject = {"Arvis-Subject-Token": oidc_provider.user_token("alice")}
            body = {
                "name": "tool.execute",
                "run_id": "out-delegated",
                "causal_id": "c1",
                "decision": {"tool": "files.write", "payload": {"path": "d.txt", "content": "d"}},
            }
            response = await served.client.post(
                "/v1/syscalls", json=body, headers={**served.auth("acme:agent"), **subject}
            )
            assert response.json()["outcome"] == "confirmation_required", response.text
            confirmation_id = response.json()["confirmation"]["id"]
            await slack.kernel_of(served).deliverer.deliver_once()

            message = slack.posted(stand_in, confirmation_id)
            assert "agent `agent-of-acme` for `alice`" in slack.text_of(message)
            assert message["text"].startswith("agent agent-of-acme for alice asks consent")
            value = slack.button(message, "arvis_approve")
            ts = slack.shown(stand_in, confirmation_id)["ts"]
            for user in ("U0ALICE", "U0REQUESTER"):  # four eyes counts both halves
                status, problem = await slack.click(
                    served, user, "arvis_approve", value, message_ts=ts
                )
                assert (status, problem["code"]) == (403, "self_approval"), user
            status, answer = await slack.click(
                served, "U0APPROVER", "arvis_approve", value, message_ts=ts
            )
            assert (status, answer["state"]) == (200, "APPROVED")
            assert "agent `agent-of-acme` for `alice`" in json.dumps(
                slack.shown(stand_in, confirmation_id)["blocks"]
            )
