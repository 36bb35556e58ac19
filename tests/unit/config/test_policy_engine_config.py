"""``[policy] engine`` and ``mode``: a combination that would not do what it reads as
stops start-up with one line naming it."""

from __future__ import annotations

from typing import Any

import pytest

from arvis.domain.errors import ConfigurationError
from arvis.lifecycle.policy.policy import RulePolicy, parse_policy_config


@pytest.mark.parametrize(
    ("section", "complaint"),
    [
        ({"mode": "shadow"}, 'set engine = "cedar"'),
        ({"policies": "p/*.cedar"}, 'set engine = "cedar"'),
        ({"engine": "cedar"}, "needs policies"),
        ({"engine": "opa", "policies": "x"}, "engine"),
        ({"engine": "cedar", "policies": "x", "mode": "audit"}, "mode"),
        (
            {"engine": "cedar", "policies": "x", "tenants": {"acme": {"consent_tools": ["a"]}}},
            "[policy.tenants.acme] consent_tools",
        ),
    ],
)
def test_an_engine_setting_that_cannot_apply_stops_start_up(
    section: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(ConfigurationError, match=r"^\[policy\]") as raised:
        parse_policy_config(section)
    assert complaint in raised.value.message


def test_shadow_mode_keeps_the_rule_lists_they_are_what_is_enforced() -> None:
    config = parse_policy_config(
        {"engine": "cedar", "mode": "shadow", "policies": "x", "default": {"deny_tools": ["a"]}}
    )
    assert config.default.deny_tools == ["a"]


# RulePolicy().digest before [policy] had an engine (revision 0005's code).
DEFAULT_RULES_DIGEST = "cb8a4232a7255199dabbf578b6aae6646e388795f6e1fccd153e4f7bf7831a9e"


def test_naming_no_engine_keeps_the_rules_digest_a_deployment_always_had() -> None:
    assert RulePolicy(parse_policy_config({})).digest == DEFAULT_RULES_DIGEST
    named = parse_policy_config({"engine": "rules", "mode": "enforce"})
    assert RulePolicy(named).digest == DEFAULT_RULES_DIGEST
