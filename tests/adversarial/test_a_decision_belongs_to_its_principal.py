"""DESIGN §10 "A decision belongs to its principal", at every entry point.

A run is bound to the principal that opened it (and its tenant): another agent principal
of the same tenant posting on it is refused ``identity_mismatch`` and never receives its
results — not a deduplicated answer of a decision the opener made, not a replay. Auditors
read every run of their tenant.
"""

from __future__ import annotations

import pytest

from tests.support.adversarial.deployment import Deployment
from tests.support.adversarial.entrypoints import EntryPoint, HttpDriver, offering

pytestmark = pytest.mark.db

OPENER, OTHER, AUDITOR = "acme:agent", "acme:agent2", "acme:auditor"
SECRET = "only-the-opener-may-see-this"


@pytest.mark.parametrize("entry", offering("post"))
async def test_another_principal_of_the_tenant_is_refused_on_a_run_it_did_not_open(
    deployment: Deployment, entry: EntryPoint
) -> None:
    driver = entry.driver(deployment)
    run, sandbox = driver.run("bound"), deployment.data_dir / "sandbox"
    decided = {"path": f"bound-{entry.slug}.txt", "content": SECRET}
    opened = await driver.post(OPENER, run, f"open.{entry.slug}", "files.write", decided)
    assert (opened.outcome, opened.boundary) == ("executed", "EFFECT_COMPLETED"), opened.raw

    path = f"bound-{entry.slug}-other.txt"
    new = await driver.post(
        OTHER, run, f"other.{entry.slug}", "files.append", {"path": path, "line": "x"}
    )
    assert new.code == "identity_mismatch", new.raw
    assert not (sandbox / path).exists()

    same = await driver.post(OTHER, run, f"open.{entry.slug}", "files.write", decided)
    assert same.outcome != "deduplicated", same.raw
    assert same.code == "identity_mismatch", same.raw
    assert SECRET not in same.raw


@pytest.mark.parametrize("entry", offering("replay", principal_reads=True))
async def test_another_principal_never_replays_the_run_and_an_auditor_does(
    deployment: Deployment, entry: EntryPoint
) -> None:
    run = f"replayed-{entry.slug}"
    decided = {"path": f"replayed-{entry.slug}.txt", "content": SECRET}
    opened = await HttpDriver(deployment).post(OPENER, run, "c1", "files.write", decided)
    assert opened.outcome == "executed", opened.raw
    driver = entry.driver(deployment)

    # The recorded result names the file it wrote: what another principal must not learn.
    written = decided["path"]
    other = await driver.replay(OTHER, run)
    assert not other.ok, other.raw
    assert written not in other.raw
    assert other.results == []
    opener = await driver.replay(OPENER, run)
    auditor = await driver.replay(AUDITOR, run)
    assert opener.ok, opener.raw
    assert auditor.ok, auditor.raw
    assert written in auditor.raw


@pytest.mark.parametrize("entry", offering("runs"))
async def test_the_list_of_runs_shows_a_tenants_runs_to_its_auditors_only(
    deployment: Deployment, entry: EntryPoint
) -> None:
    run = f"listed-{entry.slug}"
    opened = await HttpDriver(deployment).post(OPENER, run, "c1", "echo", {"n": 1})
    assert opened.outcome == "executed", opened.raw
    driver = entry.driver(deployment)

    auditor = await driver.runs(AUDITOR, run)
    assert auditor.ok, auditor.raw
    assert [r["run_id"] for r in auditor.results] == [run]
    other_tenant = await driver.runs("globex:auditor", run)
    assert run not in [r["run_id"] for r in other_tenant.results], other_tenant.raw
    if not entry.operator_reads:
        # The opener's approver colleague holds no auditor role: nothing is listed.
        approver = await driver.runs("acme:approver", run)
        assert not approver.ok, approver.raw
        assert run not in approver.raw
