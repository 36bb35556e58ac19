"""The ``[telemetry]`` section of ``arvis.toml`` and the standard ``OTEL_*`` variables.

Tracing is off unless something asks for it. What decides, first match wins:

1. ``OTEL_SDK_DISABLED=true`` turns it off, whatever the file says: the standard
   switch an operator can flip without editing the deployment's file.
2. ``[telemetry] enabled`` when the file sets it.
3. Otherwise it is on when the environment asks for traces: ``OTEL_TRACES_EXPORTER``
   names an exporter other than ``none``, or an OTLP endpoint is set
   (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT``).

For the other settings, what the file states wins and the environment fills what it
leaves unset: the file is this deployment's own, while ``OTEL_*`` are often set for
every service of a platform. Nothing here imports OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arvis.domain.errors import ConfigurationError
from arvis.domain.sections import parse_section

Exporter = Literal["otlp", "none"]

DEFAULT_SERVICE_NAME = "arvis"
_TRUE = frozenset({"true", "1", "yes", "on"})
_HTTP_PROTOBUF = "http/protobuf"


class TelemetryConfig(BaseModel):
    """The ``[telemetry]`` section; every key is optional."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool | None = None
    """Trace syscalls. Unset: on only when the ``OTEL_*`` environment asks for traces."""
    service_name: str | None = Field(default=None, min_length=1, max_length=255)
    """``service.name`` of the spans. Unset: ``OTEL_SERVICE_NAME``, else ``arvis``."""
    exporter: Exporter | None = None
    """``otlp`` (OTLP over HTTP/protobuf) or ``none`` (spans made, nothing sent).
    Unset: ``OTEL_TRACES_EXPORTER``, else ``otlp``."""
    endpoint: str | None = Field(default=None, pattern=r"^https?://")
    """The collector's traces URL (e.g. ``http://collector:4318/v1/traces``). Unset:
    the exporter reads ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` /
    ``OTEL_EXPORTER_OTLP_ENDPOINT``, else ``http://localhost:4318/v1/traces``."""
    record_payloads: bool = False
    """Put each call's payload in ``gen_ai.tool.call.arguments``. Results never."""


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """What tracing will do once the file and the environment have been read."""

    enabled: bool
    service_name: str = DEFAULT_SERVICE_NAME
    exporter: Exporter = "otlp"
    endpoint: str | None = None
    record_payloads: bool = False


OFF = TelemetrySettings(enabled=False)


def parse_telemetry_config(raw: Mapping[str, Any]) -> TelemetryConfig:
    """The ``[telemetry]`` section, validated; a bad key stops start-up naming it."""
    return parse_section(TelemetryConfig, raw, "[telemetry]")


def resolve_telemetry(config: TelemetryConfig, environ: Mapping[str, str]) -> TelemetrySettings:
    """Apply the precedence of this module's docstring."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return OFF
    env_exporters = _env_exporters(environ)
    endpoint_set = bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )
    if config.enabled is not None:
        enabled = config.enabled
    else:
        enabled = bool(env_exporters and env_exporters != ["none"]) or endpoint_set
    if not enabled:
        return OFF
    exporter = config.exporter or _one_exporter(env_exporters)
    if exporter == "otlp":
        _check_protocol(environ)
    service_name = (
        config.service_name or environ.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME
    )
    return TelemetrySettings(
        enabled=True,
        service_name=service_name,
        exporter=exporter,
        endpoint=config.endpoint,
        record_payloads=config.record_payloads,
    )


def _env_exporters(environ: Mapping[str, str]) -> list[str]:
    raw = environ.get("OTEL_TRACES_EXPORTER", "")
    return [part.strip().lower() for part in raw.split(",") if part.strip()]


def _one_exporter(names: list[str]) -> Exporter:
    if not names or names == ["otlp"]:
        return "otlp"
    if names == ["none"]:
        return "none"
    raise ConfigurationError(
        f"OTEL_TRACES_EXPORTER={','.join(names)!r}: ARVIS exports traces with 'otlp' "
        "(or 'none'); set [telemetry] exporter to override it"
    )


def _check_protocol(environ: Mapping[str, str]) -> None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = environ.get(name, "").strip().lower()
        if value:
            if value != _HTTP_PROTOBUF:
                raise ConfigurationError(
                    f"{name}={value!r}: ARVIS sends OTLP over {_HTTP_PROTOBUF} only"
                )
            return
