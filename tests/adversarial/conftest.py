"""The adversarial suite's shared fixtures: for the whole package, the hostile stubs and
one deployment over them (tests.support.adversarial.deployment.shared_configs), on a
database of its own, so every module's cells share one start-up. A module that needs
another ``arvis.toml`` (another policy engine, a restart) deploys its own.

The whole package runs once per row of ``IDENTITIES`` (an API key, a JWT of the package's
OpenID provider): stubs, database and deployment are the row's own, so effect counts and
run ids of one kind of credential never meet another's, and every rule is checked with
a principal of each kind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from arvis.store.migrate import upgrade
from tests.support.adversarial.deployment import Deployment, deploy, shared_configs
from tests.support.adversarial.identities import IDENTITIES, Credentials, IdentityKind
from tests.support.adversarial.stubs import HostileStubs, hostile_stubs
from tests.support.evidence import signing_key
from tests.support.identity import CONSOLE_SECRET_ENV
from tests.support.oidc import OidcProvider, running_provider
from tests.support.postgres import create_database, drop_database
from tests.support.slack import SlackStandIn, slack_stand_in


@pytest.fixture(scope="package")
def identity_provider() -> Iterator[OidcProvider]:
    """The package's OpenID provider, whose tokens the ``jwt`` identity kind presents."""
    with running_provider() as idp:
        yield idp


@pytest.fixture(scope="package", params=IDENTITIES, ids=lambda kind: kind.name)
def credentials(
    request: pytest.FixtureRequest, identity_provider: OidcProvider
) -> Iterator[Credentials]:
    """How this run of the package's principals authenticate (a row of IDENTITIES). The
    deployments trust the provider for the console's sign-in too, whose client secret the
    in-process app reads from the environment."""
    kind: IdentityKind = request.param
    credentials = Credentials(kind, identity_provider)
    os.environ[CONSOLE_SECRET_ENV] = credentials.console_secret
    try:
        yield credentials
    finally:
        os.environ.pop(CONSOLE_SECRET_ENV, None)


@pytest.fixture(scope="package")
def adversarial_database(pg_server_url: str, credentials: Credentials) -> Iterator[str]:
    url = create_database(pg_server_url, prefix=f"arvis_adv_{credentials.kind.name}")
    try:
        upgrade(url)
        yield url
    finally:
        drop_database(pg_server_url, url)


@pytest.fixture(scope="package")
def stubs(
    tmp_path_factory: pytest.TempPathFactory, credentials: Credentials
) -> Iterator[HostileStubs]:
    with hostile_stubs(tmp_path_factory.mktemp(f"stubs-{credentials.kind.name}")) as running:
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
    credentials: Credentials,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployment]:
    config, lite = shared_configs(stubs, slack_api.url)
    settings = {"signing_key_file": signing[0]}
    data_dir = tmp_path_factory.mktemp("arvis")
    with deploy(
        adversarial_database,
        data_dir,
        stubs,
        credentials.trusted(config),
        lite_config=credentials.trusted(lite),
        settings=settings,
    ) as deployed:
        yield credentials.held_by(deployed)
