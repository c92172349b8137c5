"""Gemini's code execution, both ways: an ``executableCode`` part ``{language, code}``
and the ``codeExecutionResult`` part ``{outcome, output}`` after it are one canonical
run (``hosted_code``); a run from another provider goes to a Gemini client as those two
parts. Gemini's ``output`` is stdout when the run succeeded, else stderr or a
description: the outcome decides which; its runs have no return code, so an OK outcome
reads as 0 and a failed one as 1 (and a non-zero return code is a failed outcome)."""

from __future__ import annotations

from typing import Any

from ... import canonical as c
from .._kit import hosted_code
from .._kit.hosted_code import CODE
from . import wire

ID_PREFIX = "gcode_"  # the ids minted for Gemini's runs (it gives none)
_TIMEOUT = "execution_time_exceeded"  # Anthropic's error code for it


def use_in(executable: dict[str, Any]) -> c.ServerToolUse:
    code = executable.get("code")
    code = code if isinstance(code, str) else ""
    language = executable.get("language")
    lang = (
        language.lower()
        if isinstance(language, str) and language != "LANGUAGE_UNSPECIFIED"
        else "python"
    )
    import hashlib  # here: importing it costs every process ~6 ms of OpenSSL

    digest = hashlib.sha256(code.encode()).hexdigest()[:24]
    return c.ServerToolUse(id=ID_PREFIX + digest, name=CODE, input={"code": code, "language": lang})


def result_in(use: c.ServerToolUse, result: dict[str, Any]) -> None:
    output = result.get("output")
    text = output if isinstance(output, str) else ""
    outcome = result.get("outcome")
    use.result = result
    if outcome == "OUTCOME_OK":
        use.code = c.CodeResult(stdout=text, return_code=0)
    elif outcome == "OUTCOME_DEADLINE_EXCEEDED":
        use.code = c.CodeResult(stderr=text, error=_TIMEOUT)
    else:
        use.code = c.CodeResult(stderr=text, return_code=1)


def attach(out: list[Any], result: dict[str, Any]) -> c.ServerToolUse | None:
    """A ``codeExecutionResult`` onto the last run in ``out`` still without one (None:
    there is none, the result stands alone and is skipped)."""
    for p in reversed(out):
        if type(p) is c.ServerToolUse and p.name == CODE:
            if p.code is not None:
                return None
            result_in(p, result)
            return p
    return None


def parts_out(use: c.ServerToolUse) -> list[wire.Part]:
    """A run as Gemini's two parts (only a run with a result gets the second)."""
    # Gemini runs Python only: another language (Anthropic's bash) is told unspecified.
    python = hosted_code.language_of(use) == "python"
    language = "PYTHON" if python else "LANGUAGE_UNSPECIFIED"
    parts = [wire.Part(executable_code={"language": language, "code": hosted_code.code_of(use)})]
    out = use.code
    if out is not None:
        if out.error == _TIMEOUT:
            outcome = "OUTCOME_DEADLINE_EXCEEDED"
        elif out.error is not None or (out.return_code or 0) != 0:
            outcome = "OUTCOME_FAILED"
        else:
            outcome = "OUTCOME_OK"
        output = (
            out.stdout if outcome == "OUTCOME_OK" else (out.stderr or out.stdout or out.error or "")
        )
        parts.append(wire.Part(code_execution_result={"outcome": outcome, "output": output}))
    return parts


def replay_out(use: c.ServerToolUse) -> list[wire.Part]:
    """A replayed run for a Gemini upstream: its own parts when it was Gemini's (a
    Python run, which is all Gemini runs), else its code and output as model text."""
    if use.id.startswith(ID_PREFIX) and hosted_code.language_of(use) == "python":
        return parts_out(use)
    return [wire.Part(text=hosted_code.as_text(use))]
