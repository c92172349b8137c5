"""Anthropic's hosted code execution, both ways: a ``server_tool_use`` named
``code_execution`` (the older, Python tool: input ``{code}``) or ``bash_code_execution``
(the current one: input ``{command}``) with its ``code_execution_tool_result`` /
``bash_code_execution_tool_result`` is one canonical run
(``hosted_code``); a run from another provider goes to an Anthropic client as those
blocks (Python as the Python tool's, a shell command as bash's). The current tool's
file edits (``text_editor_code_execution``) have no counterpart: they stay Anthropic's.
"""

from __future__ import annotations

from typing import Any

from ... import canonical as c
from ... import ids
from .._kit import hosted_code
from .._kit.hosted_code import CODE
from . import wire

# Anthropic's call names -> the language they run, and back.
_LANGUAGES = {"code_execution": "python", "bash_code_execution": "bash"}
_RESULTS: dict[str, type[wire.CodeExecutionToolResultBlock | wire.BashCodeExecutionToolResultBlock]]
_RESULTS = {
    "code_execution": wire.CodeExecutionToolResultBlock,
    "bash_code_execution": wire.BashCodeExecutionToolResultBlock,
}
RESULT_BLOCKS = (wire.CodeExecutionToolResultBlock, wire.BashCodeExecutionToolResultBlock)


def is_result(block: object) -> bool:
    return type(block) in RESULT_BLOCKS


def result_in(use: c.ServerToolUse, content: Any) -> None:
    """A result block's content onto its call, which becomes the canonical run (a call
    of a name that is no run, text editing, keeps its own name and input)."""
    language = _LANGUAGES.get(use.name)
    if language is None:
        return
    code = use.input.get("code" if language == "python" else "command")
    use.name = CODE
    use.input = {"code": code if isinstance(code, str) else "", "language": language}
    use.result = content
    if not isinstance(content, dict):
        return
    if str(content.get("type", "")).endswith("_error"):
        err = content.get("error_code")
        use.code = c.CodeResult(error=err if isinstance(err, str) else "unavailable")
        return
    rc = content.get("return_code")
    use.code = c.CodeResult(
        stdout=_text(content.get("stdout")),
        stderr=_text(content.get("stderr")),
        return_code=rc if type(rc) is int else None,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def blocks_out(
    use: c.ServerToolUse,
) -> tuple[
    wire.ServerToolUseBlock,
    wire.CodeExecutionToolResultBlock | wire.BashCodeExecutionToolResultBlock,
]:
    """A run as Anthropic's call and result blocks (a shell command as bash's, any
    other language as the Python tool's)."""
    sid = use.id if use.id.startswith("srvtoolu_") else ids.derive("srvtoolu_", use.id)
    bash = hosted_code.language_of(use) == "bash"
    name = "bash_code_execution" if bash else "code_execution"
    call = wire.ServerToolUseBlock(
        id=sid, name=name, input={"command" if bash else "code": hosted_code.code_of(use)}
    )
    prefix = "bash_code_execution" if bash else "code_execution"
    out = use.code or c.CodeResult()
    content: dict[str, Any]
    if out.error is not None:
        content = {"type": f"{prefix}_tool_result_error", "error_code": out.error}
    else:
        content = {
            "type": f"{prefix}_result",
            "stdout": out.stdout,
            "stderr": out.stderr,
            "return_code": out.return_code if out.return_code is not None else 0,
            "content": [],
        }
    return call, _RESULTS[name](tool_use_id=sid, content=content)


def replay_out(use: c.ServerToolUse) -> list[wire.InputBlock]:
    """A replayed run for an Anthropic upstream: its blocks when it was Anthropic's own
    (an id of Anthropic's form, its raw result), else its code and output as text (a
    sandbox's ids are its provider's)."""
    if not use.id.startswith("srvtoolu_") or use.result is None:
        return [wire.TextBlock(text=hosted_code.as_text(use))]
    call, result = blocks_out(use)
    result.content = use.result
    return [wire.ServerToolUseBlock(id=use.id, name=call.name, input=call.input), result]
