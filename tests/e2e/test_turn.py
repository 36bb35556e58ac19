"""``arvis turn``: a recorded model response, governed call by call through the lifecycle."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arvis.cli import app
from arvis.cli.turn import governed_turn, operator_identity
from arvis.domain.boundary import EffectBoundary
from arvis.providers.base import ModelRequest
from arvis.providers.errors import ProviderUnknownTool
from arvis.providers.testing import FakeCall, FakeProvider, FakeResponse
from tests.support.lifecycle import Harness, ScriptedTool, make_harness
from tests.unit.providers.sse import Server, email_tool, fixture, lookup_tool, provider_for


@pytest.fixture
async def harness(database_url: str) -> AsyncIterator[Harness]:
    tools = {
        "weather.lookup": ScriptedTool(lookup_tool()),
        "email.send": ScriptedTool(email_tool()),
    }
    built = await make_harness(database_url, tools=tools)
    try:
        yield built
    finally:
        await built.close()


def _request(prompt: str, definitions: object) -> ModelRequest:
    return ModelRequest(model="gpt-test", input=prompt, tools=tuple(definitions))  # type: ignore[arg-type]


async def test_the_recorded_turn_journals_each_finalized_call_through_governance(
    harness: Harness,
) -> None:
    server = Server(fixture("text_and_two_calls.sse"))
    text: list[str] = []
    results = await governed_turn(
        harness.lifecycle,
        provider_for(server),
        _request,
        prompt="Weather in Oslo, then mail it",
        run_id="run-turn",
        identity=operator_identity("acme"),
        on_text=text.append,
    )

    assert [r.causal_id for r in results] == ["call_a", "call_b"]
    lookup, email = results
    assert lookup.outcome == "executed"
    assert lookup.boundary is EffectBoundary.EFFECT_COMPLETED
    assert harness.tools["weather.lookup"].seen == [{"city": "Oslo"}]
    # email.send needs network.access and names no allowed host: refused, never run.
    assert email.outcome == "refused"
    assert email.reason == "egress_denied"
    assert harness.tools["email.send"].calls == 0
    assert "".join(text)
    rows = harness.sql(
        "SELECT position, causal_id, kind FROM journal_entries WHERE run_id = 'run-turn'"
        " ORDER BY position"
    )
    assert rows == [(1, "call_a", "execution"), (2, "call_b", "refusal")]
    principal = harness.sql(
        "SELECT coalesce(body::jsonb -> 'context' ->> 'principal_id', body::jsonb->>'principal_id')"
        " FROM journal_entries WHERE run_id = 'run-turn'"
    )
    assert {p[0] for p in principal} == {"cli"}


async def test_a_malformed_response_submits_no_decision(harness: Harness) -> None:
    provider = FakeProvider(
        FakeResponse(calls=(FakeCall("weather.lookup", {"city": "Oslo"}), FakeCall("rm.rf", {})))
    )
    with pytest.raises(ProviderUnknownTool):
        await governed_turn(
            harness.lifecycle,
            provider,
            _request,
            prompt="x",
            run_id="run-turn-bad",
            identity=operator_identity("acme"),
        )
    assert harness.sql("SELECT count(*) FROM journal_entries WHERE run_id = 'run-turn-bad'") == [
        (0,)
    ]
    assert harness.tools["weather.lookup"].calls == 0


def _runner(database_url: str, tmp_path: Path, **env: str) -> CliRunner:
    (tmp_path / "arvis.toml").write_text("")
    return CliRunner(
        env={
            "ARVIS_DATABASE_URL": database_url,
            "ARVIS_DATA_DIR": str(tmp_path),
            "ARVIS_CONFIG": str(tmp_path / "arvis.toml"),
            **env,
        }
    )


def test_turn_is_refused_under_production(database_url: str, tmp_path: Path) -> None:
    runner = _runner(database_url, tmp_path, ARVIS_ENV="production")
    result = runner.invoke(app, ["turn", "--run", "r", "--prompt", "hi"])
    assert result.exit_code == 1
    assert "production" in result.output


def test_turn_without_a_provider_says_how_to_configure_one(
    database_url: str, tmp_path: Path
) -> None:
    runner = _runner(database_url, tmp_path, ARVIS_ENV="development")
    result = runner.invoke(app, ["turn", "--run", "r", "--prompt", "hi"])
    assert result.exit_code == 1
    assert "[provider]" in result.output
