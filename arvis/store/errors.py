"""SQLSTATE classes mapped to domain errors. Nothing above ``store/`` sees
``sqlalchemy.exc``."""

from __future__ import annotations

import socket

from sqlalchemy import exc as sa_exc

from arvis.domain.errors import (
    IntegrityConflict,
    SchemaNotReady,
    SerializationConflict,
    StoreError,
    StoreUnavailable,
)

__all__ = [
    "IntegrityConflict",
    "NotDistributable",
    "SchemaNotReady",
    "SerializationConflict",
    "StoreError",
    "StoreUnavailable",
    "translate",
    "translate_driver",
]


class NotDistributable(StoreError, code="not_distributable"):
    """``arvis migrate --distribute`` cannot shard this database on Citus (not a Citus
    coordinator, no workers, a table that fits no placement); the message says why."""


# What the network raises below the driver. Not every OSError: a missing file is
# not an unreachable database, and saying so would send an operator the wrong way.
_NETWORK_ERRORS = (ConnectionError, TimeoutError, socket.gaierror)

# Connection exceptions (08), insufficient resources (53), operator intervention (57).
RETRYABLE_CLASSES = ("08", "53", "57")


# Undefined table, column or function: the database is not the schema this code
# was started against (dropped, or migrated by hand underneath a running service).
SCHEMA_DRIFT = ("42P01", "42703", "42883")


def _schema_drift(state: str) -> SchemaNotReady:
    return SchemaNotReady(
        f"the database schema does not match this code (SQLSTATE {state}); run `arvis migrate`"
    )


def sqlstate_of(error: BaseException) -> str | None:
    orig = getattr(error, "orig", None)
    state = getattr(orig, "sqlstate", None)
    return state if isinstance(state, str) else None


def _by_sqlstate(state: str, constraint: str | None) -> StoreError | None:
    if state[:2] in RETRYABLE_CLASSES:
        return StoreUnavailable(f"the database is unavailable (SQLSTATE {state})")
    if state in ("40001", "40P01"):
        return SerializationConflict(f"transaction conflict (SQLSTATE {state})")
    if state in SCHEMA_DRIFT:
        return _schema_drift(state)
    if state[:2] == "23":
        return IntegrityConflict(f"constraint {constraint} refused the write", constraint)
    if state[:2] == "AR":
        # Raised by ARVIS's own server-side functions (arvis/store/sql/): a write
        # step found the database in a state it can never apply to.
        return IntegrityConflict(f"the store refused the write (SQLSTATE {state})", None)
    return None


def translate_driver(error: BaseException) -> StoreError | None:
    """The domain error for a psycopg exception raised outside SQLAlchemy."""
    import psycopg

    if not isinstance(error, psycopg.Error):
        return None
    state = error.sqlstate
    if state is None:
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            return StoreUnavailable("the database is unreachable")
        return None
    return _by_sqlstate(state, error.diag.constraint_name)


def translate(error: BaseException) -> StoreError | None:
    """The domain error for a database exception, or None when it is not one."""
    if not isinstance(error, (sa_exc.DBAPIError, sa_exc.TimeoutError, *_NETWORK_ERRORS)):
        return None
    if isinstance(error, (sa_exc.TimeoutError, *_NETWORK_ERRORS)) or (
        isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated
    ):
        return StoreUnavailable("the database is unreachable")
    state = sqlstate_of(error)
    if state is None:
        # psycopg raises OperationalError without a SQLSTATE when it cannot connect.
        if isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError):
            return StoreUnavailable("the database is unreachable")
        return None
    diag = getattr(getattr(error, "orig", None), "diag", None)
    return _by_sqlstate(state, getattr(diag, "constraint_name", None))
