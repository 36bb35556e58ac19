"""DESIGN §10 "Policy decides on what the tool acts on", at every entry point that posts.

The built-in ``files.*`` tools open a path in its canonical, sandbox-relative form. A Cedar
guard on ``secrets/*`` must therefore catch every spelling the tool would resolve into
``secrets/`` (``./secrets/keys``, ``.//secrets/keys``, ``././secrets/./keys``): the
decision is refused and the file is neither read nor written. The plain spelling is the control that
the guard works; a path outside it, that the policy permits.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.adversarial.deployment import Deployment, config_text, deploy
from tests.support.adversarial.entrypoints import EntryPoint, offering
from tests.support.adversarial.identities import Credentials
from tests.support.adversarial.stubs import HostileStubs
from tests.support.adversarial.toolkinds import BUILTIN

pytestmark = pytest.mark.db

SECRET = "TOP-SECRET-KEY-MATERIAL"
CEDAR = """
[policy]
engine = "cedar"
policies = "policies/*.cedar"

[policy.default]
egress_hosts = []
"""
POLICIES = """\
@id("everyone")
permit (principal, action, resource);

@id("no-secrets")
forbid (principal, action, resource)
when { context.payload has path && context.payload.path like "secrets/*" };
"""
SPELLINGS = ["secrets/keys", "./secrets/keys", ".//secrets/keys", "././secrets/./keys"]


@pytest.fixture(scope="module")
def deployment(
    database_url: str,
    stubs: HostileStubs,
    credentials: Credentials,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployment]:
    data_dir = tmp_path_factory.mktemp("arvis-cedar")
    (data_dir / "policies").mkdir()
    (data_dir / "policies" / "guards.cedar").write_text(POLICIES)
    (data_dir / "sandbox" / "secrets").mkdir(parents=True)
    (data_dir / "sandbox" / "secrets" / "keys").write_text(SECRET)
    (data_dir / "sandbox" / "public.txt").write_text("hello")
    config = config_text(stubs, (BUILTIN,), policy=CEDAR)
    with deploy(database_url, data_dir, stubs, credentials.trusted(config)) as deployed:
        yield credentials.held_by(deployed)


def _cell(entry: EntryPoint, spelling: str) -> str:
    return f"{entry.slug}.{spelling}".replace("/", "_")


@pytest.mark.parametrize("path", SPELLINGS)
@pytest.mark.parametrize("entry", offering("post"))
async def test_a_guarded_path_is_refused_however_it_is_spelled(
    deployment: Deployment, entry: EntryPoint, path: str
) -> None:
    driver = entry.driver(deployment)
    run = driver.run("canonical")
    read = await driver.post(
        "acme:agent", run, f"read.{_cell(entry, path)}", "files.read", {"path": path}
    )
    assert read.outcome == "refused", read.raw
    assert SECRET not in read.raw
    target = path.replace("keys", f"new-{_cell(entry, path)}")
    write = await driver.post(
        "acme:agent",
        run,
        f"write.{_cell(entry, path)}",
        "files.write",
        {"path": target, "content": "x"},
    )
    assert write.outcome == "refused", write.raw
    assert not (deployment.sandbox / "secrets" / f"new-{_cell(entry, path)}").exists()


@pytest.mark.parametrize("entry", offering("post"))
async def test_a_path_outside_the_guard_is_permitted(
    deployment: Deployment, entry: EntryPoint
) -> None:
    driver = entry.driver(deployment)
    read = await driver.post(
        "acme:agent",
        driver.run("canonical"),
        f"public.{_cell(entry, 'p')}",
        "files.read",
        {"path": "public.txt"},
    )
    assert (read.outcome, read.boundary) == ("executed", "EFFECT_COMPLETED"), read.raw
