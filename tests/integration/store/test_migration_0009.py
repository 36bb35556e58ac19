"""Revision 0009 (console sessions) from a database with keys, and back."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import psycopg
import pytest

from arvis.store.migrate import downgrade, upgrade
from tests.support.postgres import create_database, drop_database
from tests.support.postgres import sql as _sql


@pytest.fixture
def database(pg_server_url: str) -> Iterator[str]:
    url = create_database(pg_server_url)
    try:
        upgrade(url, "0008")
        yield url
    finally:
        drop_database(pg_server_url, url)


def _key(url: str, key_id: str) -> None:
    _sql(
        url,
        "INSERT INTO api_keys (tenant_id, key_id, principal, roles, secret_hash)"
        " VALUES ('acme', %s, 'ops', ARRAY['approver'], %s)",
        key_id,
        "0" * 64,
    )


def test_a_session_is_stored_by_the_digest_of_its_token(database: str) -> None:
    _key(database, "k0000000000000001")
    upgrade(database)
    digest = hashlib.sha256(b"token").hexdigest()
    _sql(
        database,
        "INSERT INTO console_sessions (tenant_id, token_hash, key_id, expires_at)"
        " VALUES ('acme', %s, 'k0000000000000001', now() + interval '1 hour')",
        digest,
    )
    with pytest.raises(psycopg.errors.CheckViolation):
        _sql(
            database,
            "INSERT INTO console_sessions (tenant_id, token_hash, key_id, expires_at)"
            " VALUES ('acme', 'not-a-digest', 'k0000000000000001', now())",
        )
    with pytest.raises(psycopg.errors.UniqueViolation):
        _sql(
            database,
            "INSERT INTO console_sessions (tenant_id, token_hash, key_id, expires_at)"
            " VALUES ('acme', %s, 'k0000000000000001', now())",
            digest,
        )


def test_downgrade_drops_the_sessions_and_keeps_the_keys(database: str) -> None:
    _key(database, "k0000000000000002")
    upgrade(database)
    _sql(
        database,
        "INSERT INTO console_sessions (tenant_id, token_hash, key_id, expires_at)"
        " VALUES ('acme', %s, 'k0000000000000002', now() + interval '1 hour')",
        "2" * 64,
    )
    downgrade(database, "0008")
    assert _sql(database, "SELECT to_regclass('console_sessions')") == [(None,)]
    assert _sql(database, "SELECT key_id FROM api_keys") == [("k0000000000000002",)]
    upgrade(database)
    assert _sql(database, "SELECT count(*) FROM console_sessions") == [(0,)]
