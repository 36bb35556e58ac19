"""Which of ``[telemetry]`` and ``OTEL_*`` decides what (arvis.telemetry.config)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from arvis.config import FileConfig
from arvis.domain.errors import ConfigurationError
from arvis.telemetry.config import (
    TelemetrySettings,
    parse_telemetry_config,
    resolve_telemetry,
)

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def resolved(section: dict[str, Any], **environ: str) -> TelemetrySettings:
    return resolve_telemetry(parse_telemetry_config(section), environ)


def test_tracing_is_off_when_nothing_asks_for_it() -> None:
    assert resolved({}).enabled is False
    assert resolved({}, OTEL_SERVICE_NAME="svc").enabled is False
    assert resolved({}, OTEL_TRACES_EXPORTER="none").enabled is False


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_TRACES_EXPORTER": "otlp"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"},
    ],
)
def test_the_otel_environment_turns_tracing_on_when_the_file_is_silent(
    environ: dict[str, str],
) -> None:
    settings = resolved({}, **environ)
    assert settings.enabled is True
    assert settings.exporter == "otlp"
    assert settings.service_name == "arvis"


def test_otel_sdk_disabled_wins_over_the_file() -> None:
    assert resolved({"enabled": True}, OTEL_SDK_DISABLED="true").enabled is False
    assert resolved({"enabled": True}, OTEL_SDK_DISABLED="false").enabled is True


def test_the_file_decides_over_the_rest_of_the_environment() -> None:
    assert resolved({"enabled": False}, OTEL_TRACES_EXPORTER="otlp").enabled is False
    settings = resolved(
        {"enabled": True, "exporter": "none", "service_name": "governor"},
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_SERVICE_NAME="from-env",
    )
    assert (settings.exporter, settings.service_name) == ("none", "governor")


def test_the_environment_fills_what_the_file_leaves_unset() -> None:
    settings = resolved({"enabled": True}, OTEL_TRACES_EXPORTER="none", OTEL_SERVICE_NAME="svc")
    assert (settings.exporter, settings.service_name) == ("none", "svc")


def test_an_exporter_arvis_does_not_ship_stops_start_up_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="OTEL_TRACES_EXPORTER"):
        resolved({}, OTEL_TRACES_EXPORTER="zipkin")
    # The file can override what a platform sets for every service.
    assert resolved({"exporter": "otlp"}, OTEL_TRACES_EXPORTER="zipkin").exporter == "otlp"


def test_an_otlp_protocol_other_than_http_protobuf_stops_start_up() -> None:
    with pytest.raises(ConfigurationError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        resolved({"enabled": True}, OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    assert resolved({"enabled": True}, OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf").enabled


@pytest.mark.parametrize(
    ("section", "where"),
    [
        ({"enabled": "maybe"}, "enabled"),
        ({"exporter": "jaeger"}, "exporter"),
        ({"endpoint": "collector:4318"}, "endpoint"),
        ({"record_results": True}, "record_results"),
    ],
)
def test_a_bad_key_stops_start_up_naming_it(section: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"\[telemetry\] {where}"):
        parse_telemetry_config(section)


def test_the_documented_telemetry_section_validates() -> None:
    block = re.search(r"```toml\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    config = FileConfig.model_validate(tomllib.loads(block.group(1)))
    telemetry = parse_telemetry_config(config.telemetry)
    assert telemetry.enabled is False
    assert telemetry.record_payloads is False
    assert resolve_telemetry(telemetry, {"OTEL_TRACES_EXPORTER": "otlp"}).enabled is False
