"""Settings: the ``ARVIS_`` environment and the optional ``arvis.toml``.

The environment says where things are (database, data directory, config file);
``arvis.toml`` says what the deployment governs (tools, policy, provider). Each
subsystem validates its own section of the file with its own model, so this
module stays ignorant of tools, policies and providers.
"""

from __future__ import annotations

import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from arvis.domain.errors import ConfigurationError
from arvis.domain.loading import is_attribute_spec, load_attribute
from arvis.domain.sections import first_error


class Environment(StrEnum):
    DEVELOPMENT = "development"
    PRODUCTION = "production"


class Settings(BaseSettings):
    """Process settings, read from ``ARVIS_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix="ARVIS_", extra="ignore", frozen=True)

    database_url: str | None = None
    """PostgreSQL URL. Unset: start the embedded PostgreSQL in ``data_dir/pgdata``."""
    data_dir: Path = Path("./.arvis")
    """Where the embedded database, the tool sandbox and local state live."""
    config: Path | None = None
    """Path of ``arvis.toml``. Unset: ``./arvis.toml`` when it exists."""
    env: Environment = Environment.DEVELOPMENT
    """``production`` refuses anonymous and development identities."""
    instance_id: str | None = None
    """Name of this instance's heartbeat lease; generated when unset."""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """Largest request body the HTTP API accepts."""
    request_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """Deadline for one HTTP request, tool dispatch included."""
    max_header_bytes: int = Field(default=64 * 1024, ge=1024, le=1024 * 1024)
    """Largest request line plus headers the HTTP server reads; past it, 431."""
    header_timeout_s: float = Field(default=10.0, gt=0, le=300)
    """Time a request line and headers may take to arrive, from their first byte (from
    the connection's opening, for its first request); past it, 408 and close."""
    keep_alive_timeout_s: int = Field(default=5, ge=1, le=300)
    """An idle keep-alive connection closes after this many seconds."""
    max_connections: int = Field(default=512, ge=1, le=100_000)
    """Open connections one worker accepts; past it, a new connection gets 503 and closes."""
    tool_timeout_s: float = Field(default=20.0, gt=0, le=600)
    """Default deadline for one tool dispatch."""
    lease_ttl_s: float = Field(default=15.0, ge=1, le=3600)
    """An instance whose heartbeat is older than this is presumed dead; recovery
    settles what it left."""
    sweep_interval_s: float = Field(default=10.0, ge=0.1, le=3600)
    """How often each instance looks for intents of dead instances."""
    shutdown_grace_s: float = Field(default=10.0, ge=0, le=600)
    """How long a stopping instance lets in-flight syscalls finish and journal."""
    console_session_ttl_s: float = Field(default=8 * 3600, ge=60, le=30 * 86400)
    """How long an operator console session (``/console``) lasts after signing in."""
    log_level: str = "INFO"
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    """Serve ``/metrics`` with no key on ``127.0.0.1:<port>`` as well, for a scraper on the
    same host (or pod); nothing else answers there. Unset: ``/metrics`` needs an admin key."""
    signing_key_file: Path | None = None
    """The Ed25519 key that signs run checkpoints (``arvis keys signing create``); unset:
    no checkpoints. Never in the database; must be readable by its owner only."""
    turn_run_id: str | None = None
    """The one run whose syscalls this instance admits (``arvis serve-turn RUN`` sets it);
    a syscall of another run is refused ``run_not_served``. Unset: any run."""

    @field_validator("database_url")
    @classmethod
    def _database_url_is_postgres(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
            raise ValueError("must be a postgresql:// URL")
        return value

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
        return level

    @property
    def sandbox_dir(self) -> Path:
        return self.data_dir / "sandbox"

    @property
    def config_dir(self) -> Path:
        """Where files ``arvis.toml`` names (Cedar policies) are found: its directory."""
        path = self.config_path
        return Path(".") if path is None else path.parent

    @property
    def config_path(self) -> Path | None:
        if self.config is not None:
            return self.config
        default = Path("arvis.toml")
        return default if default.is_file() else None


class FileConfig(BaseModel):
    """The sections of ``arvis.toml``, each left raw for its owner to validate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tools: dict[str, Any] = Field(default_factory=dict)
    policy: dict[str, Any] = Field(default_factory=dict)
    provider: dict[str, Any] = Field(default_factory=dict)
    confirmations: dict[str, Any] = Field(default_factory=dict)
    audit: dict[str, Any] = Field(default_factory=dict)
    notify: dict[str, Any] = Field(default_factory=dict)
    reconcile: dict[str, Any] = Field(default_factory=dict)
    slack: dict[str, Any] = Field(default_factory=dict)
    """``[slack]``: approvals in Slack (arvis.slack.config validates it)."""
    telemetry: dict[str, Any] = Field(default_factory=dict)
    journal: dict[str, Any] = Field(default_factory=dict)
    """``[journal]``: arvis.domain.redaction validates it (``redact``)."""
    auth: dict[str, Any] = Field(default_factory=dict)
    """``[[auth.oidc]]``: arvis.identity.config validates it."""
    budgets: list[dict[str, Any]] = Field(default_factory=list)
    """``[[budgets]]``: arvis.lifecycle.policy.budgets validates each entry."""


def load_settings() -> Settings:
    """Read the environment; a bad value stops start-up with one line naming it."""
    try:
        return Settings()
    except ValidationError as exc:
        where, message = first_error(exc)
        name = "ARVIS_" + where.split(".")[0].upper() if where else "ARVIS_*"
        raise ConfigurationError(f"{name}: {message}") from None


def load_file_config(settings: Settings) -> FileConfig:
    """Read ``arvis.toml`` when there is one; a broken file stops start-up."""
    path = settings.config_path
    if path is None:
        return FileConfig()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"ARVIS_CONFIG: {path} does not exist") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"{path}: {exc}") from None
    try:
        return FileConfig.model_validate(raw)
    except ValidationError as exc:
        where, message = first_error(exc)
        raise ConfigurationError(f"{path}: [{where}] {message}") from None


def load_object(spec: str, section: str) -> Any:
    """Import ``package.module:attr`` named in ``arvis.toml`` — exactly that, nothing
    scanned. A bad spec, a failed import or a missing attribute stops start-up with
    one line naming the section."""
    if not is_attribute_spec(spec):
        raise ConfigurationError(f"[{section}] {spec!r} must be 'package.module:attribute'")
    return load_attribute(spec, f"[{section}] {spec!r}")
