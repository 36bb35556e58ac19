"""``arvis`` in remote mode: the run commands over HTTP to a served ARVIS (uvicorn on a
thread, the real app and store), answering what the local mode answers from the
database."""

from __future__ import annotations

import asyncio
import functools
import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from typer.testing import CliRunner, Result

from arvis.bootstrap import build_kernel
from arvis.cli import app
from arvis.client import ArvisClient, Executed
from arvis.evidence.keys import SigningKey
from arvis.serving.app import create_app
from tests.support.http import app_settings, mint_keys
from tests.support.reliability import free_port
from tests.support.server import running

pytestmark = pytest.mark.db

# probe.unsure: its first call ends uncertain, for ``arvis resolve``.
CONFIG = (
    '[tools]\nfactories = ["tests.support.unsuretools:make_tools"]\n'
    '[policy.default]\nno_consent_tools = ["probe.unsure"]\n'
)


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("arvis-remote-cli")
    config = data_dir / "arvis.toml"
    config.write_text(CONFIG)
    settings = app_settings(database_url, data_dir, config=config)
    with running(create_app(functools.partial(build_kernel, settings))) as url:
        yield url


@pytest.fixture(scope="module")
def tokens(database_url: str) -> dict[str, str]:
    return asyncio.run(mint_keys(database_url, tenants=("acme", "globex")))


@pytest.fixture
def local(database_url: str, served: str, tmp_path: Path) -> dict[str, str]:
    """The environment of the local mode, on the database the server serves."""
    (tmp_path / "arvis.toml").write_text(CONFIG)
    return {
        "ARVIS_DATABASE_URL": database_url,
        "ARVIS_DATA_DIR": str(tmp_path),
        "ARVIS_CONFIG": str(tmp_path / "arvis.toml"),
        "ARVIS_URL": "",
        "ARVIS_API_KEY": "",
        "ARVIS_TENANT": "",
    }


def _remote(served: str, token: str) -> dict[str, str]:
    # No database in sight: remote mode must not need one.
    return {
        "ARVIS_URL": served,
        "ARVIS_API_KEY": token,
        "ARVIS_DATABASE_URL": "postgresql://nowhere.invalid/x",
    }


def _invoke(env: dict[str, str], *args: str) -> Result:
    return CliRunner(env=env).invoke(app, list(args))


def _ok(env: dict[str, str], *args: str) -> str:
    result = _invoke(env, *args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


@pytest.fixture(scope="module")
def run_id(served: str, tokens: dict[str, str]) -> str:
    """A run with a completed call, and an uncertain one (probe.unsure's first)."""
    with ArvisClient(served, tokens["acme:agent"]) as agent:
        assert isinstance(agent.execute("run-remote", "c-1", "echo", {"n": 1}), Executed)
        unsure = agent.execute("run-remote", "c-2", "probe.unsure", {"target": "remote"})
        assert unsure.boundary is not None
        assert unsure.boundary.uncertain
    return "run-remote"


def test_journal_verify_and_replay_answer_remotely_what_they_answer_locally(
    served: str, tokens: dict[str, str], local: dict[str, str], run_id: str
) -> None:
    auditor = _remote(served, tokens["acme:auditor"])
    for command in (["journal", run_id], ["verify", run_id], ["replay", run_id]):
        here = json.loads(_ok({**local, "ARVIS_TENANT": "acme"}, *command, "--json"))
        there = json.loads(_ok(auditor, *command, "--json"))
        assert there == here, command
    assert len(json.loads(_ok(auditor, "journal", run_id, "--json"))) == 2
    assert f"run {run_id}: chain intact, 2 entries" in _ok(auditor, "verify", run_id)
    table = _ok(auditor, "replay", run_id)
    assert "EFFECT_COMPLETED" in table
    assert "EFFECT_STATE_UNKNOWN" in table


def test_url_and_key_options_stand_in_for_the_environment(
    served: str, tokens: dict[str, str], local: dict[str, str], run_id: str
) -> None:
    out = _ok(local, "journal", run_id, "--url", served, "--key", tokens["acme:auditor"])
    assert "probe.unsure" in out


def test_the_key_decides_the_tenant_and_its_role_is_checked(
    served: str, tokens: dict[str, str], run_id: str
) -> None:
    foreign = _invoke(_remote(served, tokens["globex:auditor"]), "journal", run_id)
    assert foreign.exit_code == 1
    assert "404 not_found" in foreign.output
    agent = _invoke(_remote(served, tokens["acme:agent"]), "verify", run_id)
    assert agent.exit_code == 1
    assert "403 forbidden_role" in agent.output
    assert len(agent.output.strip().splitlines()) == 1


def test_export_serves_the_bundle_the_local_export_writes_and_it_verifies_offline(
    served: str, tokens: dict[str, str], local: dict[str, str], run_id: str, tmp_path: Path
) -> None:
    there, here = tmp_path / "remote.bundle", tmp_path / "local.bundle"
    _ok(_remote(served, tokens["acme:auditor"]), "export", run_id, "-o", str(there))
    _ok({**local, "ARVIS_TENANT": "acme"}, "export", run_id, "-o", str(here))
    assert there.read_bytes() == here.read_bytes()
    checked = _ok(local, "verify", "--bundle", str(there))
    assert f"bundle of run {run_id} (tenant acme): intact, 2 entries" in checked


def test_resolve_remotely_journals_the_resolution_as_the_keys_principal(
    served: str, tokens: dict[str, str], local: dict[str, str], run_id: str
) -> None:
    journal = json.loads(_ok({**local, "ARVIS_TENANT": "acme"}, "journal", run_id, "--json"))
    key = next(e["idempotency_key"] for e in journal if e["tool"] == "probe.unsure")
    args = ("resolve", run_id, key, "1", "--as", "completed", "--evidence", "seen remotely")

    answer = json.loads(_ok(_remote(served, tokens["acme:approver"]), *args, "--json"))

    assert (answer["boundary"], answer["resolved_by"]) == ("EFFECT_COMPLETED", "approver-of-acme")
    assert answer["evidence"] == "seen remotely"
    again = _invoke(_remote(served, tokens["acme:approver"]), *args)
    assert again.exit_code == 1
    assert "409" in again.output
    after = json.loads(_ok({**local, "ARVIS_TENANT": "acme"}, "journal", run_id, "--json"))
    assert [e["kind"] for e in after][-1] == "resolution"


def test_a_server_that_is_not_there_fails_at_once_with_one_line(
    tokens: dict[str, str],
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    result = _invoke(_remote(nowhere, tokens["acme:auditor"]), "journal", "run-x")
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"arvis: error: cannot reach ARVIS at {nowhere}: ")


def test_a_url_without_a_key_and_a_local_command_without_a_tenant_exit_2(
    served: str, local: dict[str, str]
) -> None:
    keyless = _invoke({**local, "ARVIS_URL": served}, "journal", "run-x")
    assert keyless.exit_code == 2
    assert "--key or ARVIS_API_KEY" in keyless.output
    tenantless = _invoke(local, "replay", "run-x")
    assert tenantless.exit_code == 2
    assert "--tenant or ARVIS_TENANT" in tenantless.output


KEY = {"key_id": "k0123456789abcdef", "principal": "bot", "roles": ["agent"]}


def _keys_stand_in(seen: list[tuple[str, str, object]]) -> FastAPI:
    """``GET/POST /v1/keys`` and ``POST /v1/keys/{id}/revoke`` (the console's routes) as
    the client expects them, recording what they were sent."""
    stand_in = FastAPI()

    @stand_in.get("/v1/keys")
    async def listed(request: Request) -> dict[str, object]:
        seen.append(("GET", request.url.path, request.headers["authorization"]))
        return {"keys": [{**KEY, "tenant_id": "acme", "created_at": "2026-01-01T00:00:00Z"}]}

    @stand_in.post("/v1/keys", status_code=201)
    async def created(request: Request) -> dict[str, object]:
        seen.append(("POST", request.url.path, await request.json()))
        return {**KEY, "tenant_id": "acme", "token": "arvis_k0123456789abcdef_secret"}

    @stand_in.post("/v1/keys/{key_id}/revoke")
    async def revoked(key_id: str) -> dict[str, object]:
        seen.append(("POST", f"/v1/keys/{key_id}/revoke", None))
        return {**KEY, "revoked_at": "2026-01-02T00:00:00Z"}

    return stand_in


def test_keys_remotely_speak_the_key_routes() -> None:
    seen: list[tuple[str, str, object]] = []
    with running(_keys_stand_in(seen)) as url:
        env = _remote(url, "arvis_kadmin_secret")
        rows = json.loads(_ok(env, "keys", "list", "--json"))
        out = _ok(env, "keys", "create", "--principal", "bot", "--role", "agent")
        _ok(env, "keys", "revoke", "k0123456789abcdef")

    assert [(r["tenant"], r["key_id"], r["roles"]) for r in rows] == [
        ("acme", "k0123456789abcdef", ["agent"])
    ]
    assert out.strip().splitlines()[-1] == "arvis_k0123456789abcdef_secret"
    assert seen == [
        ("GET", "/v1/keys", "Bearer arvis_kadmin_secret"),
        ("POST", "/v1/keys", {"principal": "bot", "roles": ["agent"], "groups": []}),
        ("POST", "/v1/keys/k0123456789abcdef/revoke", None),
    ]


README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_commands() -> list[list[str]]:
    """The README walk-through's remote-CLI step, one argv per ``arvis`` line (an
    ``ARVIS_API_KEY=$AGENT`` prefix kept as the first word)."""
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- walkthrough: remote-cli -->", 1)[1].split("```sh", 1)[1]
    block = block.split("```", 1)[0]
    commands = []
    for line in block.splitlines():
        words = shlex.split(line.split("#", 1)[0])
        if "export" in words[:1] or not words:
            continue
        commands.append(words)
    return commands


def test_the_readmes_remote_cli_step_runs_as_written(
    served: str,
    tokens: dict[str, str],
    run_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    commands = _readme_commands()
    assert [c[1] if c[0].startswith("ARVIS_") else c[0] for c in commands] == [
        ".venv/bin/arvis"
    ] * len(commands)
    monkeypatch.chdir(tmp_path)
    keys = {"$AUDITOR": tokens["acme:auditor"], "$AGENT": tokens["acme:agent"]}
    outputs = []
    for words in commands:
        env = _remote(served, keys["$AUDITOR"])
        if words[0].startswith("ARVIS_API_KEY="):
            env["ARVIS_API_KEY"] = keys[words.pop(0).split("=", 1)[1]]
        args = [run_id if w == "demo-run" else w for w in words[1:]]
        outputs.append(_ok(env, *args))
    assert run_id in outputs[0]
    assert "probe.unsure" in outputs[1]
    assert f"run {run_id}: chain intact" in outputs[2]
    assert "intact" in outputs[4]
    assert "EFFECT_COMPLETED" in outputs[5]


def test_verify_with_the_auditors_own_key_checks_the_served_bundle_here(
    database_url: str, tokens: dict[str, str], tmp_path: Path
) -> None:
    key = SigningKey.create(tmp_path / "signing.pem")
    public = tmp_path / "signing.pub.pem"
    public.write_text(key.public.pem)
    settings = app_settings(database_url, tmp_path, signing_key_file=tmp_path / "signing.pem")
    with running(create_app(functools.partial(build_kernel, settings))) as url:
        with ArvisClient(url, tokens["acme:agent"]) as agent:
            agent.execute("run-signed", "c-1", "echo", {"signed": True})
        auditor = _remote(url, tokens["acme:auditor"])
        trusted = _ok(auditor, "verify", "run-signed", "--public-key", str(public))
        other = SigningKey.create(tmp_path / "other.pem")
        (tmp_path / "other.pub.pem").write_text(other.public.pem)
        wrong = _invoke(
            auditor, "verify", "run-signed", "--public-key", str(tmp_path / "other.pub.pem")
        )

    assert "bundle of run run-signed (tenant acme): intact, 1 entries, 1 checkpoints" in trusted
    assert "trusted key given: every entry covered" in trusted
    assert wrong.exit_code == 1
    assert f"not the trusted {other.public.key_id[:16]}" in wrong.output
