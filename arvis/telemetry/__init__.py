"""Optional tracing of syscalls with OpenTelemetry (docs/telemetry.md).

Off by default. Importing this package imports no OpenTelemetry: the SDK is loaded
only by :func:`load_tracing` when ``[telemetry]`` or the ``OTEL_*`` environment turn
tracing on, so a deployment without it pays nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from arvis.domain.errors import ConfigurationError
from arvis.telemetry.config import TelemetrySettings, parse_telemetry_config, resolve_telemetry

if TYPE_CHECKING:
    from arvis.telemetry.tracing import Tracing

INSTALL_HINT = "pip install 'arvis[telemetry]'"
# The OTLP/HTTP exporter's own default, when neither the file nor OTEL_* name one.
DEFAULT_OTLP_ENDPOINT = "http://localhost:4318/v1/traces"

log = logging.getLogger(__name__)


def telemetry_settings(raw: Mapping[str, Any], environ: Mapping[str, str]) -> TelemetrySettings:
    """``[telemetry]`` and the environment, resolved; tracing on needs the SDK installed."""
    settings = resolve_telemetry(parse_telemetry_config(raw), environ)
    if settings.enabled:
        _require_sdk(exporter=settings.exporter == "otlp")
    return settings


def load_tracing(raw: Mapping[str, Any], environ: Mapping[str, str]) -> Tracing | None:
    """The tracer the deployment asks for, or None when tracing is off.

    Tracing asked for without the OpenTelemetry SDK installed stops start-up with a
    :class:`ConfigurationError` saying what to install.
    """
    settings = telemetry_settings(raw, environ)
    if not settings.enabled:
        return None
    from arvis.telemetry.tracing import Tracing

    tracing = Tracing.from_settings(settings)
    # Spans leave the process: the operator is told where to, once per process.
    log.info(
        "tracing on: spans of service %r go to %s%s",
        settings.service_name,
        _where(settings, environ),
        "; tool arguments are recorded" if settings.record_payloads else "",
    )
    return tracing


def _where(settings: TelemetrySettings, environ: Mapping[str, str]) -> str:
    if settings.exporter != "otlp":
        return "no exporter (they stay in this process)"
    endpoint = (
        settings.endpoint
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or DEFAULT_OTLP_ENDPOINT
    )
    # Scheme, host and path only: a URL's user info or query may hold a credential.
    parts = urlsplit(endpoint)
    port = f":{parts.port}" if parts.port else ""
    return f"OTLP/HTTP at {parts.scheme}://{parts.hostname}{port}{parts.path}"


def _require_sdk(*, exporter: bool) -> None:
    try:
        import opentelemetry.sdk.trace  # noqa: F401

        if exporter:
            from opentelemetry.exporter.otlp.proto.http import trace_exporter  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            f"[telemetry] tracing is on but the OpenTelemetry SDK cannot be imported "
            f"({exc.name or exc}): {INSTALL_HINT}, or turn tracing off"
        ) from None
