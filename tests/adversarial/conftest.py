"""The adversarial suite's shared fixtures: for the whole package, the hostile stubs and
one deployment over them (tests.support.adversarial.deployment.shared_configs), on a
database of its own, so every module's cells share one start-up. A module that needs
another ``arvis.toml`` (another policy engine, a restart) deploys its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from arvis.store.migrate import upgrade
from tests.support.adversarial.deployment import Deployment, deploy, shared_configs
from tests.support.adversarial.stubs import HostileStubs, hostile_stubs
from tests.support.evidence import signing_key
from tests.support.postgres import create_database, drop_database
from tests.support.slack import SlackStandIn, slack_stand_in


@pytest.fixture(scope="package")
def adversarial_database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url, prefix="arvis_adv")
    try:
        upgrade(url)
        yield url
    finally:
        drop_database(pg_server_url, url)


@pytest.fixture(scope="package")
def stubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileStubs]:
    with hostile_stubs(tmp_path_factory.mktemp("stubs")) as running:
        yield running


@pytest.fixture(scope="package")
def signing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The deployment's checkpoint signing key file and its public key file."""
    return signing_key(tmp_path_factory.mktemp("signing"))


@pytest.fixture(scope="package")
def slack_api() -> Iterator[SlackStandIn]:
    """Slack's Web API, a local stand-in: the deployment posts its consent requests here."""
    with slack_stand_in() as running:
        yield running


@pytest.fixture(scope="package")
def deployment(
    adversarial_database: str,
    stubs: HostileStubs,
    signing: tuple[Path, Path],
    slack_api: SlackStandIn,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployment]:
    config, lite = shared_configs(stubs, slack_api.url)
    settings = {"signing_key_file": signing[0]}
    data_dir = tmp_path_factory.mktemp("arvis")
    with deploy(
        adversarial_database, data_dir, stubs, config, lite_config=lite, settings=settings
    ) as deployed:
        yield deployed
