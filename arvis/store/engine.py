"""Connection URLs and engines.

The lifecycle runs on SQLAlchemy's asyncio extension over psycopg 3; alembic
and the CLI use a sync engine over the same driver.
"""

from __future__ import annotations

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def driver_url(url: str) -> str:
    """Normalise ``postgres://`` and ``postgresql://`` URLs to the psycopg 3 driver."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(f"not a PostgreSQL URL: {parsed.get_backend_name()}")
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def libpq_url(url: str) -> str:
    """The same URL in the plain ``postgresql://`` form that libpq and psycopg accept."""
    parsed = make_url(driver_url(url))
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def redacted(url: str) -> str:
    """The URL with its password hidden, for logs and messages."""
    return make_url(driver_url(url)).render_as_string(hide_password=True)


def create_sync_engine(url: str) -> Engine:
    return create_engine(driver_url(url), pool_pre_ping=False, future=True)


def create_async_store_engine(url: str, *, pool_size: int = 5) -> AsyncEngine:
    # No pre-ping: a dead connection surfaces as a connection-class error that
    # the store operation retries, which costs nothing on the happy path.
    return create_async_engine(
        driver_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        pool_timeout=10,
        connect_args={"connect_timeout": 5},
    )
