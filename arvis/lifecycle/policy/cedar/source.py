"""Cedar policy files: found, split, parsed and validated once per process, with their lines.

Cedar's own diagnostics name a policy (``policy3``) but not where it is written.
Each file is therefore split into its statements here (a statement ends at a
``;`` outside a string or a ``//`` comment), each statement is parsed on its
own, and every diagnostic is reported as ``file:line: Cedar's message``. The
policy set is the statements of every file in order, so Cedar's positional id
``policyN`` is the N-th statement.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cedarpy

from arvis.domain.canonical import canonical_bytes, sha256_hex
from arvis.domain.errors import ConfigurationError
from arvis.lifecycle.policy.cedar.schema import Record

CONSENT_REQUIRED = "required"
MAX_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Statement:
    file: str
    line: int
    """Where the statement's first character is (1-based)."""
    text: str


@dataclass(frozen=True)
class Policy:
    """One policy of the set, as the journal and a diagnostic name it."""

    cedar_id: str
    label: str
    """Its ``@id`` annotation, else Cedar's id."""
    effect: str
    consent: bool
    """``@consent("required")``: a permit that allows only with an approver's consent."""
    where: str
    """``file:line``."""


@dataclass(frozen=True)
class CompiledPolicies:
    policy_set: cedarpy.PolicySet
    policies: Mapping[str, Policy]
    """By Cedar id."""
    files: tuple[tuple[str, str], ...]
    """(name relative to the configuration's directory, text), in load order."""
    schema_text: str

    @property
    def fingerprint(self) -> str:
        """SHA-256 over the files (names and texts) and the schema they were validated
        against: what an auditor recomputes to know which policy set decided."""
        return sha256_hex(
            canonical_bytes(
                {"files": [list(item) for item in self.files], "schema": self.schema_text}
            )
        )


def find_files(pattern: str, base_dir: Path) -> list[tuple[str, str]]:
    """The files ``pattern`` names (relative to ``base_dir``), sorted, with their text."""
    found = sorted(glob.glob(pattern, root_dir=base_dir, recursive=True))
    files = []
    for name in found:
        path = base_dir / name
        if not path.is_file():
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigurationError(f"[policy] {name}: {exc.strerror or exc}") from None
        if len(data) > MAX_FILE_BYTES:
            raise ConfigurationError(f"[policy] {name}: larger than {MAX_FILE_BYTES} bytes")
        try:
            files.append((Path(name).as_posix(), data.decode("utf-8-sig")))
        except UnicodeDecodeError:
            raise ConfigurationError(f"[policy] {name}: not UTF-8 text") from None
    if not files:
        raise ConfigurationError(f"[policy] policies = {pattern!r} matches no file in {base_dir}")
    return files


def split_statements(file: str, text: str) -> list[Statement]:
    """The statements of one file, each with the line it starts on; text after the last
    ``;`` that is not blank or a comment is a statement too (Cedar will refuse it)."""
    statements: list[Statement] = []
    start: int | None = None
    line = start_line = 1
    i = 0
    in_string = False
    while i < len(text):
        char = text[i]
        if in_string:
            if char == "\\":
                i += 1
            elif char == '"':
                in_string = False
            elif char == "\n":
                line += 1
        elif char == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif char == "\n":
            line += 1
        elif not char.isspace():
            if start is None:
                start, start_line = i, line
            if char == '"':
                in_string = True
            elif char == ";":
                statements.append(Statement(file, start_line, text[start : i + 1]))
                start = None
        i += 1
    if start is not None:
        statements.append(Statement(file, start_line, text[start:]))
    return statements


def _error_line(statement: Statement, message: str) -> int:
    """The line of ``statement`` Cedar's parse error is on: the first line whose prefix
    of the statement already fails with that message (else the statement's first)."""
    lines = statement.text.split("\n")
    for count in range(1, len(lines)):
        try:
            cedarpy.policies_to_json_str("\n".join(lines[:count]))
        except ValueError as exc:
            if str(exc) == message:
                return statement.line + count - 1
    return statement.line + (len(lines) - 1 if len(lines) > 1 else 0)


def _parse(statement: Statement) -> dict[str, Any]:
    try:
        est = json.loads(cedarpy.policies_to_json_str(statement.text))
    except ValueError as exc:
        message = str(exc)
        line = _error_line(statement, message)
        raise ConfigurationError(f"{statement.file}:{line}: {message}") from None
    policies = est.get("staticPolicies") or {}
    if est.get("templates") or len(policies) != 1:
        raise ConfigurationError(
            f"{statement.file}:{statement.line}: one static policy per statement "
            "(templates are not supported)"
        )
    body: dict[str, Any] = next(iter(policies.values()))
    return body


def _policy(cedar_id: str, statement: Statement, body: Mapping[str, Any]) -> Policy:
    where = f"{statement.file}:{statement.line}"
    annotations = body.get("annotations") or {}
    label = annotations.get("id", cedar_id)
    if not isinstance(label, str) or not label.strip():
        raise ConfigurationError(f"{where}: @id must name the policy")
    consent = annotations.get("consent")
    effect = str(body.get("effect"))
    if consent is not None and consent != CONSENT_REQUIRED:
        raise ConfigurationError(f'{where}: @consent must be "required", not {consent!r}')
    if consent is not None and effect != "permit":
        raise ConfigurationError(f'{where}: @consent("required") belongs on a permit')
    return Policy(cedar_id, label, effect, consent is not None, where)


def _context_path(expr: Any) -> list[str] | None:
    """``context.a.b`` (or ``context["a"]``) as ["a", "b"]; None for anything else."""
    if expr == {"Var": "context"}:
        return []
    if isinstance(expr, dict) and isinstance(expr.get("."), dict):
        inner = _context_path(expr["."].get("left"))
        attr = expr["."].get("attr")
        return None if inner is None or not isinstance(attr, str) else [*inner, attr]
    return None


def _undeclared_tests(node: Any, context: Record) -> Iterator[str]:
    """Each ``context… has name`` whose name the context does not declare.

    Cedar types such a test as always false and accepts the policy, so a ``forbid``
    guarded by it would never fire: a field no tool declares, or one the plan's
    tools type differently, must be an error the operator sees, not a silent hole.
    """
    if isinstance(node, list):
        for item in node:
            yield from _undeclared_tests(item, context)
        return
    if not isinstance(node, dict):
        return
    test = node.get("has")
    if isinstance(test, dict) and isinstance(test.get("attr"), str):
        path = _context_path(test.get("left"))
        if path is not None:
            kind: Any = context
            for name in [*path, test["attr"]]:
                kind = kind.get(name) if isinstance(kind, Record) else None
            if kind is None:
                yield ".".join(["context", *path, test["attr"]])
    for value in node.values():
        yield from _undeclared_tests(value, context)


def compile_policies(
    files: Sequence[tuple[str, str]], schema_text: str, context: Record | None = None
) -> CompiledPolicies:
    """Parse and validate ``files`` against the schema (whose action context is
    ``context``); the first diagnostic stops with :class:`ConfigurationError` naming
    its file and line."""
    statements = [s for name, text in files for s in split_statements(name, text)]
    if not statements:
        raise ConfigurationError(f"[policy] {', '.join(n for n, _ in files)}: no policy")
    policies: dict[str, Policy] = {}
    labels: dict[str, str] = {}
    for index, statement in enumerate(statements):
        body = _parse(statement)
        policy = _policy(f"policy{index}", statement, body)
        if context is not None:
            for path in _undeclared_tests(body.get("conditions"), context):
                raise ConfigurationError(
                    f"{policy.where}: tests {path}, which the schema does not declare, so "
                    "the test is always false (no tool declares it, or the plan's tools "
                    "type it differently: see `arvis policy schema`)"
                )
        if policy.label in labels:
            raise ConfigurationError(
                f"{policy.where}: @id({policy.label!r}) is also the id of the policy at "
                f"{labels[policy.label]}; an auditor could not tell them apart"
            )
        labels[policy.label] = policy.where
        policies[policy.cedar_id] = policy
    combined = "\n".join(statement.text for statement in statements)
    try:
        schema = cedarpy.Schema.from_str(schema_text)
    except ValueError as exc:  # the shipped schema with a derived payload: a bug if so
        raise ConfigurationError(f"the Cedar schema does not parse: {exc}") from None
    result = cedarpy.validate_policies(combined, schema)
    if not result.validation_passed:
        error = result.errors[0]
        failing = policies.get(error.policy_id)
        where = failing.where if failing is not None else files[0][0]
        named = f" (@id {failing.label!r})" if failing and failing.label != failing.cedar_id else ""
        more = len(result.errors) - 1
        tail = f" (and {more} more)" if more else ""
        raise ConfigurationError(f"{where}{named}: {error.error}{tail}")
    policy_set = cedarpy.PolicySet.from_str(combined)
    if len(policy_set) != len(statements):  # the positional ids above would be wrong
        raise ConfigurationError("[policy] the Cedar files do not parse one policy per statement")
    return CompiledPolicies(policy_set, policies, tuple(files), schema_text)
