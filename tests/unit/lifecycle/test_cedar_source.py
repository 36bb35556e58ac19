"""Cedar files as start-up reads them: every diagnostic names its file and line; the schema's
payload record follows the plan; the fingerprint follows every byte that decides."""

from __future__ import annotations

from pathlib import Path

import pytest

from arvis.domain.definitions import Effect, ReplaySafety, ToolDefinition
from arvis.domain.errors import ConfigurationError
from arvis.lifecycle.policy.cedar.schema import Record, SetOf, payload_type, render_schema
from arvis.lifecycle.policy.cedar.source import split_statements
from arvis.lifecycle.policy.policy import TenantRules
from tests.support.cedar import PERMIT_ALL, cedar_policy


def fails(tmp_path: Path, files: dict[str, str] | str) -> str:
    with pytest.raises(ConfigurationError) as raised:
        cedar_policy(tmp_path, files)
    return raised.value.message


def test_a_syntax_error_names_the_file_and_the_line_it_is_on(tmp_path: Path) -> None:
    message = fails(
        tmp_path,
        {
            "a.cedar": PERMIT_ALL,
            "b.cedar": '// a comment; with "quotes"\n\n@id("x")\nforbid (principal,\n'
            "  action\n  resource);\n",
        },
    )
    assert message == "policies/b.cedar:6: unexpected token `resource`"


def test_a_policy_the_schema_refuses_names_its_file_line_and_id(tmp_path: Path) -> None:
    message = fails(
        tmp_path,
        PERMIT_ALL + '\n@id("typo")\nforbid (principal, action, resource)\n'
        "  when { resource.efect == 1 };\n",
    )
    assert message.startswith("policies/main.cedar:4 (@id 'typo'): ")
    assert "efect" in message


def test_an_optional_payload_field_read_without_has_is_refused(tmp_path: Path) -> None:
    message = fails(
        tmp_path, "forbid (principal, action, resource) when { context.payload.amount > 1 };"
    )
    assert message.startswith("policies/main.cedar:1: ")
    assert "payload.amount" in message


def test_a_field_no_tool_declares_is_refused(tmp_path: Path) -> None:
    message = fails(
        tmp_path,
        "forbid (principal, action, resource) when "
        "{ context.payload has secret && context.payload.secret == 1 };",
    )
    assert "secret" in message


TWICE = (
    '@id("x") permit (principal, action, resource);\n@id("x") forbid (principal, action, resource);'
)
FORBID = "forbid (principal, action, resource);"
UNUSABLE = {
    "duplicate-id": (TWICE, "main.cedar:2: @id('x') is also the id of the policy at policies/main"),
    "consent-value": ('@consent("yes") ' + PERMIT_ALL, 'must be "required"'),
    "consent-forbid": ('@consent("required") ' + FORBID, "on a permit"),
    "empty-id": ('@id("") permit (principal, action, resource);', "@id must name the policy"),
    "template": ("permit (?principal, action, resource);", "policies/main.cedar:1: "),
    "no-semicolon": ("permit (principal, action, resource)", "unexpected end of input"),
    "empty": ("// only a comment\n", "no policy"),
}


@pytest.mark.parametrize(("text", "complaint"), UNUSABLE.values(), ids=UNUSABLE.keys())
def test_an_unusable_policy_stops_start_up_saying_why(
    tmp_path: Path, text: str, complaint: str
) -> None:
    assert complaint in fails(tmp_path, text)


def test_a_glob_that_matches_nothing_stops_start_up(tmp_path: Path) -> None:
    assert "matches no file" in fails(tmp_path, {})


def test_statements_split_at_semicolons_outside_strings_and_comments() -> None:
    text = (
        "// permit; not this\n"
        'permit (principal, action, resource) when { principal.tenant == "a;b\\";c" };\n'
        "\n"
        "  forbid (principal, action, resource); // trailing; comment\n"
    )
    statements = split_statements("f.cedar", text)
    assert [(s.line, s.text[:6]) for s in statements] == [(2, "permit"), (4, "forbid")]


def test_the_fingerprint_changes_with_a_policy_and_with_the_gates(tmp_path: Path) -> None:
    first = cedar_policy(tmp_path / "a", PERMIT_ALL).fingerprint
    assert cedar_policy(tmp_path / "b", PERMIT_ALL).fingerprint == first
    assert cedar_policy(tmp_path / "c", PERMIT_ALL + "// edited\n").fingerprint != first
    gates = TenantRules(egress_hosts=["other.example.com"])
    assert cedar_policy(tmp_path / "d", PERMIT_ALL, rules=gates).fingerprint != first


def test_under_cedar_the_rule_lists_that_cedar_decides_cannot_be_set(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="deny_tools"):
        cedar_policy(tmp_path, PERMIT_ALL, rules=TenantRules(deny_tools=["x"]))


def _tool(name: str, properties: dict[str, object]) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=name,
        input_schema={"type": "object", "properties": properties},
        effect=Effect.MUTATING,
        replay_safety=ReplaySafety.IDEMPOTENT,
    )


def test_the_payload_record_keeps_what_every_tool_types_alike() -> None:
    record = payload_type(
        [
            _tool(
                "a",
                {
                    "amount": {"type": "number"},
                    "count": {"type": "integer"},
                    "to": {"type": "object", "properties": {"bank": {"type": "string"}}},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "free": {},
                    "either": {"type": ["string", "null"]},
                    "__extn": {"type": "object", "properties": {"fn": {"type": "string"}}},
                },
            ),
            _tool(
                "b",
                {
                    "count": {"type": "string"},
                    "to": {"type": "object", "properties": {"iban": {"type": "string"}}},
                    "rows": {"type": "array", "items": {"type": "object"}},
                },
            ),
        ]
    )
    assert record == Record(
        (
            ("amount", "decimal"),
            ("tags", SetOf("String")),
            ("to", Record((("bank", "String"), ("iban", "String")))),
        )
    )
    schema = render_schema(record)
    assert '"amount"?: decimal,' in schema
    assert '"tags"?: Set<String>,' in schema


def test_a_nested_object_is_declared_three_levels_deep_and_no_deeper() -> None:
    def nest(depth: int) -> dict[str, object]:
        if depth == 0:
            return {"type": "string"}
        return {"type": "object", "properties": {"n": nest(depth - 1)}}

    record = payload_type([_tool("a", {"n": nest(5)})])
    depth, kind = 0, record.get("n")
    while isinstance(kind, Record):
        depth, kind = depth + 1, kind.get("n")
    assert depth == 2  # payload.n.n is a record; deeper levels are not given to Cedar


def test_a_file_saved_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    policy = cedar_policy(tmp_path, "\ufeff" + PERMIT_ALL)
    assert [p.label for p in policy.compiled.policies.values()] == ["everyone"]
