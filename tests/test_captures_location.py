"""The recordings are read from outside the repository, and their absence skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import captures


def test_the_repository_holds_no_recorded_traffic() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=captures.ROOT, capture_output=True, check=False
    )
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    names = {Path(p).stem for p in tracked.stdout.decode().split("\0") if p.endswith(".json")}
    assert not names & set(captures.MANIFEST)
    assert not (captures.ROOT / "tests" / "fixtures" / "captures").exists()


def test_the_recordings_the_suite_names_are_there() -> None:
    if not captures.captures_dir().is_dir():
        pytest.skip(f"no recordings directory at {captures.captures_dir()}")
    missing = [n for n in captures.MANIFEST if not captures.present(n)]
    assert missing == []


def test_without_the_recordings_capture_tests_skip_saying_where(tmp_path: Path) -> None:
    env = {**os.environ, captures.ENV_DIR: str(tmp_path / "nowhere")}
    env.pop(captures.ENV_REQUIRE, None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", "-rs", "-p", "no:cacheprovider",
         "tests/test_sse.py"],
        cwd=captures.ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:]
    assert "skipped" in run.stdout and "failed" not in run.stdout
    assert f"expected in {tmp_path / 'nowhere'}" in run.stdout
    assert "0 tests read recordings" in run.stdout


def test_required_recordings_fail_instead_of_skipping(tmp_path: Path) -> None:
    env = {**os.environ, captures.ENV_DIR: str(tmp_path), captures.ENV_REQUIRE: "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", "-rf", "-p", "no:cacheprovider",
         "tests/test_sse.py"],
        cwd=captures.ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 1
    assert "failed" in run.stdout and "not found" in run.stdout
