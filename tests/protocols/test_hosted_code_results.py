"""A code run's result between the providers' shapes (``_kit/hosted_code.py`` and each
codec's run module): success, failure, timeout and a provider error each keep their
meaning in every shape, and a replayed run reads as text with what it printed."""

from __future__ import annotations

from proxai_asgi import canonical as c
from proxai_asgi.protocols._kit import hosted_code
from proxai_asgi.protocols.anthropic_messages import code_exec
from proxai_asgi.protocols.gemini_generate_content import code_run as gemini
from proxai_asgi.protocols.openai_responses import code_run as responses


def run(out: c.CodeResult | None, language: str = "python") -> c.ServerToolUse:
    return c.ServerToolUse(
        id="x1", name="code_execution", input={"code": "1/0", "language": language}, code=out
    )


def test_gemini_outcomes_read_as_return_codes_and_errors() -> None:
    cases = {
        "OUTCOME_OK": c.CodeResult(stdout="ok", return_code=0),
        "OUTCOME_FAILED": c.CodeResult(stderr="ok", return_code=1),
        "OUTCOME_DEADLINE_EXCEEDED": c.CodeResult(stderr="ok", error="execution_time_exceeded"),
    }
    for outcome, want in cases.items():
        use = gemini.use_in({"language": "PYTHON", "code": "1/0"})
        gemini.result_in(use, {"outcome": outcome, "output": "ok"})
        assert use.code == want, outcome
        # and back: the same outcome
        assert gemini.parts_out(use)[1].code_execution_result == {
            "outcome": outcome,
            "output": "ok",
        }


def test_a_failed_or_errored_run_is_failed_in_gemini_and_responses() -> None:
    for out in (c.CodeResult(stderr="boom", return_code=2), c.CodeResult(error="unavailable")):
        parts = gemini.parts_out(run(out))
        assert parts[1].code_execution_result["outcome"] == "OUTCOME_FAILED"  # type: ignore[index]
        item = responses.item_out(run(out))
        assert item.status == "failed" and item.outputs
    assert gemini.parts_out(run(c.CodeResult(), "bash"))[0].executable_code == {
        "language": "LANGUAGE_UNSPECIFIED",
        "code": "1/0",
    }


def test_anthropic_error_results_and_bash_runs_map_both_ways() -> None:
    use = c.ServerToolUse(id="srvtoolu_1", name="bash_code_execution", input={"command": "ls"})
    code_exec.result_in(
        use, {"type": "bash_code_execution_tool_result_error", "error_code": "unavailable"}
    )
    assert use.name == "code_execution" and use.input == {"code": "ls", "language": "bash"}
    assert use.code == c.CodeResult(error="unavailable")
    call, result = code_exec.blocks_out(use)
    assert call.name == "bash_code_execution" and call.input == {"command": "ls"}
    assert result.content == {
        "type": "bash_code_execution_tool_result_error",
        "error_code": "unavailable",
    }
    # a file edit is no run: it keeps its own name
    edit = c.ServerToolUse(id="srvtoolu_2", name="text_editor_code_execution", input={})
    code_exec.result_in(edit, {"type": "text_editor_code_execution_result"})
    assert edit.name == "text_editor_code_execution" and edit.code is None


def test_a_responses_run_keeps_its_logs_and_a_failed_one_its_status() -> None:
    item = responses.CallItem(
        id="ci_1", code="x", status="failed", outputs=[{"type": "logs", "logs": "Traceback"}]
    )
    use = responses.use_in(item)
    assert use.code == c.CodeResult(stderr="Traceback", return_code=1)
    assert responses.call_out(use)["status"] == "failed"


def test_a_replayed_run_as_text_tells_its_code_and_output() -> None:
    text = hosted_code.as_text(run(c.CodeResult(stdout="out", stderr="err", return_code=1)))
    assert text == (
        "[code_execution (python)]\n```\n1/0\n```\nstdout:\nout\nstderr:\nerr\nreturn code: 1"
    )
