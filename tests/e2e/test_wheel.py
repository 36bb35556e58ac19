"""The built wheel, installed outside the checkout, migrates, serves a syscall and verifies."""

from __future__ import annotations

import zipfile
from pathlib import Path

import httpx

from arvis.store.migrate import head_revision
from tests.support.postgres import create_database, drop_database
from tests.support.reliability import auth, syscall_body
from tests.support.wheel import CHECKOUT, InstalledWheel

WHERE_MIGRATIONS_ARE = """
import arvis, arvis.store.migrate as m
from alembic.script import ScriptDirectory
print(arvis.__file__)
print(m.MIGRATIONS_DIR)
print(ScriptDirectory.from_config(m.alembic_config("postgresql://localhost/x")).dir)
print(m.head_revision())
"""


def test_the_wheel_ships_the_migrations_and_nothing_of_tests_or_bench(
    installed_wheel: InstalledWheel,
) -> None:
    names = set(zipfile.ZipFile(installed_wheel.wheel).namelist())
    # The top-level migrations/ folder (DESIGN §9) ships as the package arvis.migrations.
    shipped = {
        "arvis/" + path.relative_to(CHECKOUT).as_posix()
        for path in (CHECKOUT / "migrations").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert {
        "arvis/migrations/env.py",
        "arvis/migrations/script.py.mako",
        "arvis/migrations/sql/0001_functions.sql",
        "arvis/migrations/versions/0001_lifecycle_schema.py",
    } <= shipped
    assert shipped <= names
    assert "arvis/py.typed" in names
    # The package and its dist-info, nothing else: no tests/, bench/ or root migrations/.
    assert {name for name in names if not name.startswith(("arvis/", "arvis-"))} == set()


def test_the_installed_wheel_migrates_serves_a_syscall_and_verifies_the_run(
    installed_wheel: InstalledWheel, pg_server_url: str, tmp_path: Path
) -> None:
    assert not tmp_path.resolve().is_relative_to(CHECKOUT)
    url = create_database(pg_server_url)
    env = installed_wheel.env(
        ARVIS_DATABASE_URL=url, ARVIS_DATA_DIR=str(tmp_path / "data"), ARVIS_LOG_LEVEL="WARNING"
    )
    wheel = installed_wheel
    try:
        where = wheel.run(wheel.python, "-c", WHERE_MIGRATIONS_ARE, cwd=tmp_path, env=env)
        assert where.returncode == 0, where.stderr
        package, migrations, alembic_dir, head = where.stdout.split()
        installed = wheel.site_packages / "arvis"
        assert Path(package) == installed / "__init__.py"
        assert Path(migrations) == Path(alembic_dir) == installed / "migrations"
        assert head == head_revision()

        migrated = wheel.run(wheel.arvis, "migrate", cwd=tmp_path, env=env)
        assert migrated.returncode == 0, migrated.stderr
        assert f"from empty to revision {head}" in migrated.stdout

        created = wheel.run(
            wheel.arvis,
            *("keys", "create", "--tenant", "acme", "--principal", "bot", "--role", "agent"),
            cwd=tmp_path,
            env=env,
        )
        assert created.returncode == 0, created.stderr
        token = created.stdout.strip().splitlines()[-1]

        with wheel.serving(cwd=tmp_path, env=env) as server:
            body = syscall_body("run-wheel", "step-1", "echo", {"hello": "wheel"})
            answer = httpx.post(
                f"{server.base_url}/v1/syscalls", json=body, headers=auth(token), timeout=30
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["outcome"] == "executed"
            assert answer.json()["boundary"] == "EFFECT_COMPLETED"
            assert answer.json()["result"] == {"hello": "wheel"}

            verified = wheel.run(
                wheel.arvis, "verify", "run-wheel", "--tenant", "acme", cwd=tmp_path, env=env
            )
            assert verified.returncode == 0, verified.stdout + verified.stderr
            assert "chain intact, 1 entries" in verified.stdout

            assert server.stop() == 0, server.log()
    finally:
        drop_database(pg_server_url, url)
