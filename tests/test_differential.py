"""``scripts/differential.py``, the byte-for-byte check of refactors, on a few
recordings over its three transports: a run compared with itself shows no difference
(nothing in it is random), and one changed byte of a recording shows on each."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from .helpers.captures import path_of

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "differential.py"
# Answers to every client, and requests toward every upstream (answered by the basic
# text recordings, which the harness reads from the same directory).
RECORDINGS = (
    "chat_json_text_basic",
    "responses_json_text_basic",
    "anthropic_json_text_basic",
    "gemini_json_text_basic",
    "anthropic_sse_text_basic",
)


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("differential", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def captures(tmp_path: Path) -> Path:
    """The few recordings, copied where one of them can be changed."""
    for name in RECORDINGS:
        shutil.copy(path_of(name), tmp_path / f"{name}.json")
    return tmp_path


def test_differential_run_is_deterministic_and_sees_one_changed_byte(
    captures: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # main() puts the checkout first
    differential = _script()
    first, second, third = (str(tmp_path / f"run{i}.json") for i in range(3))
    few = ["--captures", str(captures), "--only", "chat_json_text_basic"]
    few += ["--only", "anthropic_sse_*"]

    assert differential.main([first, *few]) == 0
    result = json.loads(Path(first).read_text())
    assert sorted(result) == ["httpx", "inner", "lean"]
    assert all(len(cases) == 2 * 26 for cases in result.values())  # 8 answers, 18 requests
    capsys.readouterr()

    assert differential.main([second, *few, "--compare", first]) == 0
    out = capsys.readouterr().out
    for transport in ("lean", "httpx", "inner"):
        assert f"{transport}: 0 of {len(result[transport])} differ" in out
    assert "DIFFERS" not in out

    # One byte of one upstream answer: " 4242" becomes " 4243" in Anthropic's stream.
    changed = captures / "anthropic_sse_text_basic.json"
    record = json.loads(changed.read_text())
    assert record["response"]["body"].count(" 4242") == 1
    record["response"]["body"] = record["response"]["body"].replace(" 4242", " 4243")
    changed.write_text(json.dumps(record))
    assert differential.main([third, *few, "--compare", first]) == 1
    out = capsys.readouterr().out
    for transport in ("lean", "httpx", "inner"):
        # That answer, to each of the four clients, streamed and not.
        assert f"{transport}: 8 of {len(result[transport])} differ" in out
        assert f"DIFFERS {transport}: anthropic_sse_text_basic|" in out
    assert "4243" in out


def test_differential_transports_flag_runs_only_those(
    captures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    differential = _script()
    out = tmp_path / "inner.json"
    argv = [str(out), "--captures", str(captures), "--only", "gemini_*", "--transports", "inner"]
    assert differential.main(argv) == 0
    result = json.loads(out.read_text())
    assert list(result) == ["inner"]
    assert {case.split("|")[0] for case in result["inner"]} == {"gemini_json_text_basic"}
