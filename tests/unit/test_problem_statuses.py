"""Every error code an HTTP request can meet has a status and a title, so that a new
error class cannot turn into an anonymous 500."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import arvis
from arvis.client.errors import ArvisClientError
from arvis.domain.errors import ArvisError
from arvis.lifecycle.errors import CapabilityError, JournalConflict
from arvis.providers.errors import ProviderError
from arvis.tools.sandbox import FileRefusal
from arvis.web.problems import STATUS_BY_CODE, TITLES, error_response

# Codes that never reach an HTTP answer, and why. Anything else needs a status.
NEVER_HTTP = {
    # Start-up: `arvis serve` refuses to start; no request is served.
    "configuration_error",
    "decorator_invalid",
    "definition_invalid",
    "embedded_postgres_unavailable",
    # `arvis migrate --distribute` refuses a database it cannot shard on Citus.
    "not_distributable",
    # Raised only by calls no route makes (they exist to fail closed, DESIGN §2).
    "forbidden_route",
    # Raised inside a dispatch: the dispatcher contains them and the lifecycle
    # journals a classified result (DESIGN §3), which the syscall answers with 200.
    "call_id_mismatch",
    "dispatch_failed",
    "tool_execution_failed",
    "tool_not_declared",
    # An MCP upstream that is down or changed: raised at start-up (ARVIS does not
    # start) or inside an upstream tool's call, which answers it as not started.
    "mcp_upstream_changed",
    "mcp_upstream_unavailable",
    # The domain's transition tables refuse an impossible state change; the lifecycle
    # consults them for what it writes, never on a caller's say-so.
    "state_transition_invalid",
    # Evidence (issue 19): a bad signing or public key file stops start-up or the CLI;
    # a bundle is checked offline by `arvis verify --bundle`, never over HTTP.
    "signing_key_invalid",
    "bundle_invalid",
}


def _every_error_class() -> Iterator[type[ArvisError]]:
    for module in pkgutil.walk_packages(arvis.__path__, "arvis."):
        # The migrations run under alembic; __main__ runs the CLI.
        if not module.name.startswith("arvis.migrations") and module.name != "arvis.__main__":
            importlib.import_module(module.name)
    pending = [ArvisError]
    while pending:
        cls = pending.pop()
        yield cls
        pending.extend(cls.__subclasses__())


def _reaches_http(cls: type[ArvisError]) -> bool:
    # Three families never do: the model-provider adapter serves `arvis turn`, not the
    # HTTP API; a file refusal is what a built-in file tool answers as its problem
    # result, inside a dispatch; the client's errors are raised in the agent's process.
    return cls is not ArvisError and not issubclass(
        cls, ProviderError | FileRefusal | ArvisClientError
    )


def test_every_error_code_has_a_status_or_is_known_never_to_reach_http() -> None:
    unmapped = sorted(
        f"{cls.__module__}.{cls.__qualname__}: {cls.code}"
        for cls in _every_error_class()
        if _reaches_http(cls) and cls.code not in STATUS_BY_CODE and cls.code not in NEVER_HTTP
    )
    assert not unmapped, "add these codes to arvis.web.problems.STATUS_BY_CODE: " + str(unmapped)


def test_the_never_http_list_names_only_codes_that_exist() -> None:
    codes = {cls.code for cls in _every_error_class()}
    assert not NEVER_HTTP - codes, NEVER_HTTP - codes
    assert not NEVER_HTTP & set(STATUS_BY_CODE)


def test_every_status_has_a_title() -> None:
    assert set(STATUS_BY_CODE) == set(TITLES)


@pytest.mark.parametrize(
    "error",
    [JournalConflict("another result is journaled"), CapabilityError("was not ACTIVE")],
    ids=lambda error: error.code,
)
def test_lifecycle_conflicts_answer_409_problems(error: ArvisError) -> None:
    response = error_response(error)
    assert response.status_code == 409
    assert response.media_type == "application/problem+json"
    assert f'"code":"{error.code}"'.encode() in response.body
    assert f'"title":"{TITLES[error.code]}"'.encode() in response.body


def test_every_status_code_pair_is_documented_in_http_md() -> None:
    documented = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
    missing = sorted(code for code in STATUS_BY_CODE if f"`{code}`" not in documented)
    assert not missing, "document these codes in docs/http.md: " + ", ".join(missing)
