"""Webhook signatures and the [notify] section (issue 16): what a receiver verifies, and
what start-up refuses."""

from __future__ import annotations

import pytest

from arvis.domain.errors import ConfigurationError
from arvis.lifecycle.consent.notify import (
    SignatureInvalid,
    load_notifications,
    sign,
    verify_signature,
)

SECRET = b"a-secret-of-some-length"
BODY = b'{"id":"ev_1","type":"confirmation.requested"}'
NOW = 1_800_000_000


def test_a_signed_body_verifies_within_the_window() -> None:
    verify_signature(SECRET, sign(SECRET, BODY, NOW), BODY, now=NOW + 10)


@pytest.mark.parametrize(
    ("header", "body", "now"),
    [
        (sign(b"another-secret-entirely", BODY, NOW), BODY, NOW),
        (sign(SECRET, BODY, NOW), BODY.replace(b"ev_1", b"ev_2"), NOW),
        (sign(SECRET, BODY, NOW), BODY, NOW + 301),  # a replayed old delivery
        (sign(SECRET, BODY, NOW + 600), BODY, NOW),  # from the future
        ("t=1800000000", BODY, NOW),
        ("v1=" + "0" * 64, BODY, NOW),
        (sign(SECRET, BODY, NOW).replace("t=1800000000", "t=1800000001"), BODY, NOW),
    ],
    ids=["wrong_secret", "altered_body", "replayed", "future", "no_mac", "no_time", "moved_time"],
)
def test_a_forged_altered_or_replayed_delivery_is_refused(
    header: str, body: bytes, now: int
) -> None:
    with pytest.raises(SignatureInvalid):
        verify_signature(SECRET, header, body, now=now)


def _webhook(**overrides: object) -> dict[str, object]:
    return {
        "egress_hosts": ["hooks.example.com"],
        "webhooks": [
            {"name": "chat", "url": "https://hooks.example.com/a", "secret_env": "HOOK_SECRET"}
            | overrides
        ],
    }


def test_a_webhook_reads_its_secret_from_the_environment() -> None:
    loaded = load_notifications(_webhook(), {"HOOK_SECRET": "x" * 20})
    [hook] = loaded.webhooks
    assert hook.secret == b"x" * 20
    assert "x" * 20 not in repr(hook)


def test_a_missing_secret_stops_start_up_naming_the_variable_not_a_value() -> None:
    with pytest.raises(ConfigurationError, match="HOOK_SECRET") as caught:
        load_notifications(_webhook(), {"HOOK_SECRET": "short"})
    assert "short" not in caught.value.message


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example.net/a",
        "https://hooks.example.com@evil.example.net/a",
        "https://hooks.example.com/a#frag",
    ],
)
def test_a_webhook_outside_the_egress_list_or_ambiguous_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"\[notify\]"):
        load_notifications(_webhook(url=url), {"HOOK_SECRET": "x" * 20})


def test_an_unknown_event_type_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not an event type"):
        load_notifications(_webhook(events=["everything"]), {"HOOK_SECRET": "x" * 20})
