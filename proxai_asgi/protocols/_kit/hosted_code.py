"""What every codec shares about hosted code execution (Anthropic ``code_execution_*``
↔ Responses ``code_interpreter`` ↔ Gemini ``codeExecution``): which hosted tool is it,
the canonical ``CodeExecution`` read from the client's (its provider-only options
reported), the tool each upstream protocol is written, and a replayed run as text a
model of another provider can read.

Canonical contract: a run is ``ServerToolUse(name="code_execution", input={"code": ...,
"language": ...}, code=CodeResult(...))``; in a stream one ``ServerTool`` event, whole.
"""

from __future__ import annotations

from typing import Any

from ... import canonical as c
from ...errors import TranslationReport

CODE = "code_execution"

# Anthropic's current version (bash + file editing in a container); its older
# ``code_execution_20250522`` (Python only) is read the same. Anthropic needs the beta
# header of the version (``anthropic-beta: code-execution-2025-08-25``): an operator
# routing another client's code execution to Anthropic sets it on the ``Upstream``.
ANTHROPIC_TOOL = {"type": "code_execution_20250825", "name": CODE}
RESPONSES_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}
GEMINI_TOOL: dict[str, Any] = {"codeExecution": {}}
# Without it a Responses upstream's ``code_interpreter_call`` carries no output.
RESPONSES_INCLUDE = "code_interpreter_call.outputs"

_TYPES: dict[str, tuple[str, ...]] = {
    "anthropic_messages": ("code_execution_",),
    "openai_responses": ("code_interpreter",),
    "gemini_generate_content": ("codeExecution", "code_execution"),
}


def is_code_tool(h: c.HostedTool) -> bool:
    """``h`` is its protocol's hosted code execution (mapped through ``code_execution``)."""
    prefixes = _TYPES.get(h.protocol)
    return prefixes is not None and h.type.startswith(prefixes)


def code_in(hosted: list[c.HostedTool], report: TranslationReport) -> c.CodeExecution | None:
    """The client's code execution among its hosted tools (None without one); what only
    its provider has (a container id, files, a memory limit, ``cache_control``...) is
    reported: no other provider's sandbox can take it."""
    for h in hosted:
        if not is_code_tool(h):
            continue
        raw = h.raw
        if h.protocol == "openai_responses":
            container = raw.get("container")
            if not (isinstance(container, dict) and set(container) <= {"type"}):
                report.drop("tools.code_interpreter.container")  # an id, files, a limit
            extra = set(raw) - {"type", "container"}
        elif h.protocol == "anthropic_messages":
            extra = set(raw) - {"type", "name"}
        else:
            value = next(iter(raw.values()), None)
            extra = set(value) if isinstance(value, dict) else set()
        for key in sorted(extra):
            report.drop(f"tools.code_execution.{key}")
        return c.CodeExecution()
    return None


def is_code(part: object) -> bool:
    return type(part) is c.ServerToolUse and part.name == CODE


def code_of(use: c.ServerToolUse) -> str:
    code = use.input.get("code")
    if isinstance(code, str):
        return code
    command = use.input.get("command")  # Anthropic's bash_code_execution
    return command if isinstance(command, str) else ""


def language_of(use: c.ServerToolUse) -> str:
    lang = use.input.get("language")
    return lang if isinstance(lang, str) and lang else "python"


def as_text(use: c.ServerToolUse) -> str:
    """A replayed run (its code and what it printed) as assistant text, for an upstream
    that cannot take the run itself in history (ids and containers are the provider's)."""
    lines = [f"[{CODE} ({language_of(use)})]", "```", code_of(use), "```"]
    out = use.code
    if out is not None:
        if out.error:
            lines.append(f"(the run failed: {out.error})")
        if out.stdout:
            lines += ["stdout:", out.stdout]
        if out.stderr:
            lines += ["stderr:", out.stderr]
        if out.return_code is not None:
            lines.append(f"return code: {out.return_code}")
    return "\n".join(lines)
