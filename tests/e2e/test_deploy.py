"""deploy/: the image, compose, systemd and per-turn files, checked without a container engine.

The files are parsed and checked for what an operator relies on (healthchecks, start
order, no secrets, the settings and the port the README documents); the image's
commands (migrate, the keys one-shot, serve, the healthcheck) and the per-turn shell
example run against the built wheel installed outside the checkout, as in the image.
"""

from __future__ import annotations

import configparser
import json
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.deploy import (
    ARVIS_VARIABLE,
    DEPLOY,
    Stage,
    dockerfile_stages,
    documented_settings,
    load_yaml,
    with_port,
)
from tests.support.postgres import create_database, drop_database
from tests.support.reliability import auth, free_port, syscall_body
from tests.support.wheel import CHECKOUT, InstalledWheel, Serving

PORT = 8000
"""The port the README documents (``arvis serve``'s default) and the image exposes."""
IMAGE_UID = 10001


def _final_stage() -> Stage:
    return dockerfile_stages(DEPLOY / "Dockerfile")[-1]


def _compose() -> dict[str, Any]:
    compose: dict[str, Any] = load_yaml(DEPLOY / "compose.yaml")
    return compose


def _startup_probe() -> list[str]:
    """The job's sidecar startup probe: the command it runs inside the container."""
    command: list[str] = _job_containers()["arvis"]["startupProbe"]["exec"]["command"]
    return command


def _job_containers() -> dict[str, dict[str, Any]]:
    spec = load_yaml(DEPLOY / "per-turn" / "job.yaml")["spec"]["template"]["spec"]
    return {c["name"]: c for c in spec.get("initContainers", []) + spec["containers"]}


# -- the image ---------------------------------------------------------------------


def test_the_image_builds_the_wheel_in_a_stage_of_its_own_and_runs_it_unprivileged() -> None:
    build, *_, final = dockerfile_stages(DEPLOY / "Dockerfile")
    assert build.name == "build"
    assert any("pip wheel" in run.arguments for run in build.all("RUN"))
    assert any(c.arguments.startswith("--from=build ") for c in final.all("COPY"))
    assert any(
        re.search(r"ls /tmp/dist/\*\.whl.*pip install \"\$\{wheel\}\[telemetry\]\"", run.arguments)
        for run in final.all("RUN")
    )
    # Nothing of the checkout but the wheel reaches the final image.
    assert not any(c.arguments.split()[0] in ("arvis", ".") for c in final.all("COPY"))
    assert final.last("USER").arguments.split(":")[0] == "arvis"
    assert f"--uid {IMAGE_UID}" in " ".join(run.arguments for run in final.all("RUN"))
    assert final.env()["ARVIS_ENV"] == "production"

    assert final.last("ENTRYPOINT").exec_form() == ["arvis"]
    command = final.last("CMD").exec_form()
    assert command[0] == "serve"
    assert command[command.index("--port") + 1] == str(PORT)
    assert command[command.index("--host") + 1] == "0.0.0.0"
    assert final.last("EXPOSE").arguments == str(PORT)
    health = final.last("HEALTHCHECK").arguments
    assert health.startswith("--interval=")
    assert f"http://127.0.0.1:{PORT}/healthz" in health


def test_the_build_context_lets_in_exactly_what_the_image_copies() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    let_in = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore
    copied = set()
    for stage in dockerfile_stages(DEPLOY / "Dockerfile"):
        for copy in stage.all("COPY"):
            parts = [p for p in copy.arguments.split() if not p.startswith("--")]
            if not copy.arguments.startswith("--from="):
                copied.update(parts[:-1])
    assert copied == {
        *{"pyproject.toml", "setup.py", "README.md", "arvis", "migrations"},
        "deploy/create-keys.sh",
    }
    assert copied <= let_in
    for path in copied:
        assert (CHECKOUT / path).exists(), path


# -- compose -----------------------------------------------------------------------


def test_compose_serves_arvis_after_a_healthy_database_a_migration_and_the_keys() -> None:
    services = _compose()["services"]
    assert set(services) == {"db", "migrate", "keys", "arvis"}

    db = services["db"]
    assert db["image"].startswith("postgres:")
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    volume = next(v for v in db["volumes"] if v.endswith(":/var/lib/postgresql/data"))
    assert volume.split(":")[0] in _compose()["volumes"]

    migrate = services["migrate"]
    assert migrate["command"] == ["migrate"]
    assert migrate["build"]["dockerfile"] == "deploy/Dockerfile"
    assert migrate["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert migrate["restart"] == "no"

    keys = services["keys"]
    assert keys["entrypoint"] == ["arvis-create-keys"]
    assert keys["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    assert any(v.startswith("keys:") for v in keys["volumes"])

    arvis = services["arvis"]
    assert arvis["depends_on"] == {
        "db": {"condition": "service_healthy"},
        "migrate": {"condition": "service_completed_successfully"},
    }
    assert f"http://127.0.0.1:{PORT}/healthz" in " ".join(arvis["healthcheck"]["test"])
    assert arvis["command"][: arvis["command"].index("--port") + 2][-1] == str(PORT)
    # Plain HTTP stays on the loopback; TLS is terminated in front (docs/deploy.md).
    assert arvis["ports"] == [f"127.0.0.1:{PORT}:{PORT}"]
    for name in ("migrate", "keys", "arvis"):
        assert services[name]["image"] == "arvis:local"
        assert services[name]["read_only"] is True
        assert services[name]["cap_drop"] == ["ALL"]
        assert services[name]["environment"]["ARVIS_ENV"] == "production"
    grace = float(arvis["environment"]["ARVIS_SHUTDOWN_GRACE_S"])
    assert float(arvis["stop_grace_period"].rstrip("s")) > grace


# -- secrets and settings ------------------------------------------------------------

_SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|_KEY$", re.IGNORECASE)
_REQUIRED = re.compile(r"^\$\{[A-Z_]+:\?[^}]*\}$")
_USERINFO_PASSWORD = re.compile(r"://[^/:@\s]+:([^@\s]+)@")
_API_TOKEN = re.compile(r"arvis_k[0-9a-f]{8,}")


def _environments() -> dict[str, dict[str, str]]:
    """Every environment the deploy files set, by where it is set."""
    found: dict[str, dict[str, str]] = {"Dockerfile": _final_stage().env()}
    for name, service in _compose()["services"].items():
        found[f"compose {name}"] = {k: str(v) for k, v in service["environment"].items()}
    for name, container in _job_containers().items():
        found[f"job {name}"] = {
            e["name"]: "<secretKeyRef>" if "secretKeyRef" in e.get("valueFrom", {}) else e["value"]
            for e in container["env"]
        }
    env_file = (DEPLOY / "systemd" / "arvis.env").read_text().splitlines()
    found["arvis.env"] = dict(
        line.split("=", 1) for line in env_file if line.strip() and not line.startswith("#")
    )
    return found


def test_no_deploy_file_holds_a_secret() -> None:
    for where, environment in _environments().items():
        for key, value in environment.items():
            if _SECRET_NAME.search(key):
                assert _REQUIRED.match(value) or value == "<secretKeyRef>", (where, key, value)
            password = _USERINFO_PASSWORD.search(value)
            if password is not None:
                assert _REQUIRED.match(password.group(1)), (where, key, value)
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            assert not _API_TOKEN.search(path.read_text(encoding="utf-8")), path
    # The job's database URL and agent key come from secrets, never a literal.
    arvis, agent = _job_containers()["arvis"], _job_containers()["agent"]
    url = next(e for e in arvis["env"] if e["name"] == "ARVIS_DATABASE_URL")
    assert set(url) == {"name", "valueFrom"}
    key = next(e for e in agent["env"] if e["name"] == "ARVIS_API_KEY")
    assert set(key) == {"name", "valueFrom"}


def test_the_deploy_files_name_only_settings_the_readme_documents() -> None:
    documented = documented_settings()
    assert {"ARVIS_DATABASE_URL", "ARVIS_ENV", "ARVIS_INSTANCE_ID"} <= documented
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            used = set(ARVIS_VARIABLE.findall(path.read_text(encoding="utf-8")))
            assert used <= documented, (path.relative_to(CHECKOUT), used - documented)
    readme = (CHECKOUT / "README.md").read_text()
    assert f"http://127.0.0.1:{PORT}" in readme


# -- systemd -------------------------------------------------------------------------


def _unit() -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(DEPLOY / "systemd" / "arvis.service")
    return unit


def test_the_systemd_unit_restarts_on_failure_and_is_hardened() -> None:
    service = _unit()["Service"]
    assert service["Type"] in ("simple", "notify")
    assert service["Restart"] == "on-failure"
    assert service["User"] == service["Group"] == "arvis"
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert service["PrivateTmp"] == "yes"
    assert service["ReadWritePaths"] == "/var/lib/arvis"
    assert service["EnvironmentFile"] == "/etc/arvis/arvis.env"
    assert service["ExecStartPre"].endswith("arvis migrate")
    assert " serve " in service["ExecStart"]
    env = _environments()["arvis.env"]
    assert env["ARVIS_DATA_DIR"] == service["ReadWritePaths"]
    assert float(service["TimeoutStopSec"]) > float(env["ARVIS_SHUTDOWN_GRACE_S"])


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    # verify checks that the programs exist: point the unit at this checkout's arvis.
    arvis = Path(sys.executable).with_name("arvis")
    text = (DEPLOY / "systemd" / "arvis.service").read_text()
    unit = tmp_path / "arvis.service"
    unit.write_text(
        text.replace("/opt/arvis/bin/arvis", str(arvis)).replace(
            "/etc/arvis/arvis.env", str(DEPLOY / "systemd" / "arvis.env")
        )
    )
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    # verify exits 0 on an unknown key or a bad value, and says so: nothing may be said.
    assert done.stderr.strip() == "", done.stderr


# -- per turn ------------------------------------------------------------------------


def test_the_job_runs_arvis_as_a_sidecar_that_drains_before_it_is_killed() -> None:
    job = load_yaml(DEPLOY / "per-turn" / "job.yaml")
    assert job["kind"] == "Job"
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == IMAGE_UID
    arvis = _job_containers()["arvis"]
    assert arvis in pod["initContainers"]
    assert arvis["restartPolicy"] == "Always"
    assert arvis["args"][:2] == ["serve-turn", "$(TURN_RUN_ID)"]
    # ARVIS listens on the loopback: the probe runs inside the container (an httpGet
    # probe would go to the pod IP, where nothing listens).
    assert arvis["args"][arvis["args"].index("--host") + 1] == "127.0.0.1"
    assert "httpGet" not in arvis["startupProbe"]
    assert f"http://127.0.0.1:{PORT}/readyz" in " ".join(_startup_probe())
    env = {e["name"]: e.get("value") for e in arvis["env"]}
    assert env["ARVIS_ENV"] == "production"
    assert float(pod["terminationGracePeriodSeconds"]) > float(env["ARVIS_SHUTDOWN_GRACE_S"])
    agent = {e["name"]: e.get("value") for e in _job_containers()["agent"]["env"]}
    assert agent["TURN_RUN_ID"] == env["TURN_RUN_ID"]
    assert agent["ARVIS_URL"] == f"http://127.0.0.1:{PORT}"
    assert "ARVIS_API_KEY" in agent
    assert arvis["securityContext"]["readOnlyRootFilesystem"] is True


# -- the image's commands, run from the installed wheel --------------------------------


def _image_env(wheel: InstalledWheel, url: str, data_dir: Path) -> dict[str, str]:
    """The image's environment, with the data directory moved to ``data_dir``."""
    env = _final_stage().env()
    assert env["ARVIS_DATA_DIR"] == "/var/lib/arvis"
    env["ARVIS_DATA_DIR"] = str(data_dir)
    return wheel.env(**env, ARVIS_DATABASE_URL=url, ARVIS_LOG_LEVEL="WARNING")


def _image_program(wheel: InstalledWheel, argv: list[str]) -> list[str]:
    """``argv`` as the image runs it, with the venv's programs for the image's."""
    programs = {"arvis": wheel.arvis, "python": wheel.python}
    return [str(programs.get(argv[0], argv[0])), *argv[1:]]


@pytest.mark.db
def test_the_images_commands_migrate_mint_keys_once_serve_and_report_healthy(
    installed_wheel: InstalledWheel, pg_server_url: str, tmp_path: Path
) -> None:
    assert not tmp_path.resolve().is_relative_to(CHECKOUT)
    wheel, final, services = installed_wheel, _final_stage(), _compose()["services"]
    url = create_database(pg_server_url)
    env = _image_env(wheel, url, tmp_path / "data")
    entrypoint = final.last("ENTRYPOINT").exec_form()
    try:
        migrate = _image_program(wheel, entrypoint + services["migrate"]["command"])
        done = subprocess.run(migrate, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

        keys_dir = tmp_path / "keys"
        keys_env = {**env, **services["keys"]["environment"], "KEYS_DIR": str(keys_dir)}
        keys_env.update(ARVIS_DATABASE_URL=url, KEYS_TENANT="acme")
        keys = ["sh", str(DEPLOY / "create-keys.sh")]  # the image's arvis-create-keys
        first = subprocess.run(keys, env=keys_env, cwd=tmp_path, capture_output=True, text=True)
        assert first.returncode == 0, first.stderr
        tokens = {p.stem: p.read_text().strip() for p in keys_dir.glob("*.token")}
        assert set(tokens) == {"agent", "approver", "auditor", "admin"}
        assert all(t.startswith("arvis_") for t in tokens.values())
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in keys_dir.glob("*.token"))
        again = subprocess.run(keys, env=keys_env, cwd=tmp_path, capture_output=True, text=True)
        assert again.returncode == 0, again.stderr
        assert again.stdout.count("kept ") == 4
        listed = wheel.run(wheel.arvis, "keys", "list", "--json", cwd=tmp_path, env=env)
        assert len(json.loads(listed.stdout)) == 4, listed.stdout

        port = free_port()
        serve = with_port(_image_program(wheel, entrypoint + final.last("CMD").exec_form()), port)
        health = final.last("HEALTHCHECK").arguments.split(" CMD ", 1)[1]
        check = with_port(_image_program(wheel, json.loads(health)), port)
        log = tmp_path / "serve.log"
        with log.open("wb") as out:
            process = subprocess.Popen(serve, env=env, cwd=tmp_path, stdout=out, stderr=out)
        server = Serving(process, f"http://127.0.0.1:{port}", log)
        try:
            server.wait_healthy()
            assert subprocess.run(check, env=env, timeout=30).returncode == 0
            answer = httpx.post(
                f"{server.base_url}/v1/syscalls",
                json=syscall_body("run-image", "step-1", "echo", {"from": "the image"}),
                headers=auth(tokens["agent"]),
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["boundary"] == "EFFECT_COMPLETED"
            assert server.stop() == 0, server.log()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        dead = subprocess.run(check, env=env, capture_output=True, timeout=30)
        assert dead.returncode != 0
    finally:
        drop_database(pg_server_url, url)


@pytest.mark.db
def test_run_turn_sh_runs_an_agent_turn_on_an_instance_of_its_own(
    installed_wheel: InstalledWheel, pg_server_url: str, tmp_path: Path
) -> None:
    wheel = installed_wheel
    url = create_database(pg_server_url)
    env = wheel.env(
        ARVIS_DATABASE_URL=url, ARVIS_DATA_DIR=str(tmp_path / "data"), ARVIS_LOG_LEVEL="WARNING"
    )
    agent = (
        "import json, os, urllib.request\n"
        "body = json.dumps({'name': 'tool.execute', 'run_id': os.environ['TURN_RUN_ID'],"
        " 'causal_id': 'c1', 'decision': {'tool': 'echo', 'payload': {}}}).encode()\n"
        "request = urllib.request.Request(os.environ['ARVIS_URL'] + '/v1/syscalls', body,"
        " {'Authorization': 'Bearer ' + os.environ['ARVIS_API_KEY'],"
        " 'Content-Type': 'application/json'})\n"
        "print(json.load(urllib.request.urlopen(request, timeout=30))['boundary'])\n"
    )
    script = str(DEPLOY / "per-turn" / "run-turn.sh")
    try:
        assert wheel.run(wheel.arvis, "migrate", cwd=tmp_path, env=env).returncode == 0
        created = wheel.run(
            wheel.arvis,
            *("keys", "create", "--tenant", "acme", "--principal", "bot", "--role", "agent"),
            cwd=tmp_path,
            env=env,
        )
        keyless = wheel.run(Path("/bin/sh"), script, "run-sh-0", "true", cwd=tmp_path, env=env)
        assert keyless.returncode == 2
        assert "ARVIS_API_KEY" in keyless.stderr
        env["ARVIS_API_KEY"] = created.stdout.strip().splitlines()[-1]

        turn = wheel.run(
            Path("/bin/sh"), script, "run-sh", "python", "-c", agent, cwd=tmp_path, env=env
        )
        assert turn.returncode == 0, turn.stderr
        assert turn.stdout.strip() == "EFFECT_COMPLETED"
        stopped = json.loads(turn.stderr.strip().splitlines()[-1])
        assert stopped["event"] == "stopped"
        assert stopped["exit_code"] == 0

        failed = wheel.run(
            Path("/bin/sh"), script, "run-sh-2", "sh", "-c", "exit 3", cwd=tmp_path, env=env
        )
        assert failed.returncode == 3, failed.stderr
        assert json.loads(failed.stderr.strip().splitlines()[-1])["exit_code"] == 0

        # The job's startup probe, run as the agent on a loopback-bound instance on a port
        # of the orchestrator's choosing: it passes.
        port = free_port()
        probe = with_port(_image_program(wheel, _startup_probe()), port)
        probed = wheel.run(
            Path("/bin/sh"),
            script,
            "run-sh-3",
            *probe,
            cwd=tmp_path,
            env={**env, "TURN_PORT": str(port)},
        )
        assert probed.returncode == 0, probed.stderr
    finally:
        drop_database(pg_server_url, url)
