"""Suite-wide reporting: how many tests read a recording, and how many were skipped
for lack of one (``.ci/run`` fails the second case when the recordings exist), summed
over pytest-xdist's workers when the suite runs on several."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import captures


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, a worker hands its tallies to the controller that reports."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["captures_used"] = sorted(captures.USED)
        workeroutput["captures_missing"] = sorted(captures.MISSING)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    output = getattr(node, "workeroutput", {})
    captures.USED.update(output.get("captures_used", ()))
    captures.MISSING.update(output.get("captures_missing", ()))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.write_line(
        f"recorded traffic: {len(captures.USED)} tests read recordings from "
        f"{captures.captures_dir()}, {len(captures.MISSING)} skipped without them"
    )
