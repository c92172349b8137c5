"""Suite-wide reporting: how many tests read a recording, and how many were skipped
for lack of one (``.ci/run`` fails the second case when the recordings exist)."""

from __future__ import annotations

import pytest

from tests.helpers import captures


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.write_line(
        f"recorded traffic: {len(captures.USED)} tests read recordings from "
        f"{captures.captures_dir()}, {len(captures.MISSING)} skipped without them"
    )
