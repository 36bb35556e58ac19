from __future__ import annotations

import pytest

from tests.support.reliability import SCALE, SUMMARY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if SUMMARY:
        terminalreporter.section(f"reliability ({SCALE} size)")
        for line in SUMMARY:
            terminalreporter.write_line(line)
