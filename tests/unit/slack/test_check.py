"""``arvis serve`` checks ``[slack]`` with the rest of ``arvis.toml`` before it starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from arvis.config import Settings
from arvis.deployment import check_deployment
from arvis.domain.errors import ConfigurationError


async def test_a_slack_section_without_its_bot_token_stops_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARVIS_SLACK_BOT_TOKEN", raising=False)
    path = tmp_path / "arvis.toml"
    path.write_text('[slack]\nchannel = "C0APPROVALS"\n')

    with pytest.raises(ConfigurationError, match="ARVIS_SLACK_BOT_TOKEN"):
        await check_deployment(Settings(data_dir=tmp_path, config=path))
