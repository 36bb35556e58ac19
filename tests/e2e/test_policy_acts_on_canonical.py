"""Policy decides on what the tool acts on (DESIGN §10, issue 23 finding 10), over HTTP.

The worked example of docs/policy.md forbids ``files.write`` under ``secrets/``. The file
tool opens a path in its canonical form (normalised, sandbox-relative, symlinks inside the
sandbox resolved), so that is the form the policy is asked about: ``./secrets/keys`` or
``secrets//./k2`` are ``secrets/…`` to the policy exactly as they are to the tool.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from tests.support.cedar import write_policies
from tests.support.http import Api, serve_api

pytestmark = pytest.mark.db

DOC = Path(__file__).resolve().parents[2] / "docs" / "policy.md"
CEDAR = """
[policy]
engine = "cedar"
policies = "policies/*.cedar"
"""


def doc_policy(policy_id: str) -> str:
    """One statement of docs/policy.md's worked examples, by its ``@id``."""
    section = DOC.read_text().split("## Worked examples", 1)[1]
    found = re.search(rf'@id\("{re.escape(policy_id)}"\)\n.*?;\n', section, re.S)
    assert found is not None, policy_id
    return found.group(0)


POLICIES = {
    "base.cedar": doc_policy("acme-file-writes"),
    "guards.cedar": doc_policy("no-secret-paths"),
}


def written_under(sandbox: Path, folder: str) -> list[str]:
    root = sandbox / folder
    return sorted(str(p.relative_to(sandbox)) for p in root.rglob("*")) if root.exists() else []


def _run(case: str) -> str:
    # One run per case: the module's tests share a database.
    return "run-" + hashlib.sha256(case.encode()).hexdigest()[:16]


async def _write(api: Api, path: str, causal_id: str, *, run: str) -> dict[str, object]:
    answer = await api.syscall(
        "files.write", {"path": path, "content": "stolen"}, run_id=_run(run), causal_id=causal_id
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, object] = answer.json()
    return body


@pytest.mark.parametrize("path", ["secrets/keys", "./secrets/keys", "./secrets//./k2"])
async def test_the_documented_secret_path_guard_holds_for_every_spelling_of_the_path(
    database_url: str, tmp_path: Path, path: str
) -> None:
    write_policies(tmp_path, POLICIES)
    async with serve_api(database_url, tmp_path, config=CEDAR) as api:
        refused = await _write(api, path, "c-1", run=path)
        allowed = await _write(api, "notes/./ok.txt", "c-2", run=path)

    assert (refused["outcome"], refused["reason"]) == ("refused", "policy_denied"), refused
    assert refused["boundary"] == "PRE_EFFECT_REFUSAL"
    assert "no-secret-paths" in str(refused["detail"])
    assert written_under(tmp_path / "sandbox", "secrets") == []
    assert allowed["outcome"] == "executed", allowed
    assert (tmp_path / "sandbox" / "notes" / "ok.txt").read_text() == "stolen"


async def test_a_symlink_inside_the_sandbox_into_secrets_is_decided_as_secrets(
    database_url: str, tmp_path: Path
) -> None:
    write_policies(tmp_path, POLICIES)
    sandbox = tmp_path / "sandbox"
    (sandbox / "secrets").mkdir(parents=True)
    (sandbox / "innocent").symlink_to("secrets")
    async with serve_api(database_url, tmp_path, config=CEDAR) as api:
        refused = await _write(api, "innocent/k3", "c-1", run="symlink")

    assert (refused["outcome"], refused["reason"]) == ("refused", "policy_denied"), refused
    assert written_under(sandbox, "secrets") == []


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("a/../secrets/x", "path_outside_sandbox"),
        ("/etc/secrets/x", "path_outside_sandbox"),
        ("../secrets/x", "path_outside_sandbox"),
        ("escape/x", "path_outside_sandbox"),
    ],
)
async def test_a_path_that_leaves_the_sandbox_is_refused_at_admission_as_payload_invalid(
    database_url: str, tmp_path: Path, path: str, code: str
) -> None:
    write_policies(tmp_path, POLICIES)
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (tmp_path / "outside").mkdir()
    (sandbox / "escape").symlink_to(tmp_path / "outside")
    async with serve_api(database_url, tmp_path, config=CEDAR) as api:
        refused = await _write(api, path, "c-1", run=path)
        kinds = api.sql("SELECT kind FROM journal_entries WHERE run_id = %s", _run(path))

    assert (refused["outcome"], refused["reason"]) == ("refused", "payload_invalid"), refused
    assert refused["boundary"] == "PRE_EFFECT_REFUSAL"
    assert code in str(refused["detail"])
    assert kinds == [("refusal",)]
    assert written_under(sandbox, "secrets") == []
    assert list((tmp_path / "outside").iterdir()) == []
