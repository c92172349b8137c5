"""The Responses code interpreter, both ways: a ``code_interpreter_call`` item (its
``code`` and ``logs`` outputs: ``include: ["code_interpreter_call.outputs"]``) is one
canonical run (``hosted_code``); a run from another provider goes to a Responses
client as that item, streamed with its progress and code events. The logs are stdout
and stderr together, as the interpreter prints them; the item has no return code, so
a failed run is its ``status: "failed"``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ... import canonical as c
from ... import ids
from .._kit import hosted_code
from .._kit.hosted_code import CODE
from . import wire as w


class CallItem(msgspec.Struct, tag_field="type", tag="code_interpreter_call", gc=False):
    """A ``code_interpreter_call`` (an upstream's output item, a replayed input item)."""

    id: str = ""
    code: str | None = None
    outputs: list[dict[str, Any]] | None = None
    status: str | None = None
    container_id: str | None = None


def use_in(item: CallItem | w.UpCodeInterpreterCall) -> c.ServerToolUse:
    logs = [
        o["logs"]
        for o in item.outputs or ()
        if isinstance(o, dict) and o.get("type") == "logs" and isinstance(o.get("logs"), str)
    ]
    failed = item.status == "failed"
    result = None
    if item.outputs is not None or item.status in ("completed", "failed"):
        out = "".join(logs)
        result = c.CodeResult(
            stdout="" if failed else out,
            stderr=out if failed else "",
            error="unavailable" if failed and not out else None,
            return_code=1 if failed else None,
        )
    return c.ServerToolUse(
        id=item.id,
        name=CODE,
        input={"code": item.code or "", "language": "python"},
        result={"container_id": item.container_id} if item.container_id else None,
        code=result,
    )


def item_id(use: c.ServerToolUse) -> str:
    return use.id if use.id.startswith("ci_") else ids.derive("ci_", use.id)


def _container(use: c.ServerToolUse) -> str:
    raw = use.result.get("container_id") if isinstance(use.result, dict) else None
    return raw if isinstance(raw, str) else ids.derive("cntr_", use.id)


def _failed(out: c.CodeResult | None) -> bool:
    return out is not None and (out.error is not None or (out.return_code or 0) != 0)


def item_out(use: c.ServerToolUse, done: bool = True) -> w.OutputCodeInterpreterCall:
    """The run as a ``code_interpreter_call`` item: as announced (in progress, no code
    or outputs yet) or done (stdout then stderr as one log, as the interpreter shows
    them)."""
    item = w.OutputCodeInterpreterCall(
        id=item_id(use), status="in_progress", container_id=_container(use), code=None, outputs=None
    )
    if not done:
        return item
    out = use.code
    item.code = hosted_code.code_of(use)
    item.status = "failed" if _failed(out) else "completed"
    logs = "".join(s for s in (out.stdout, out.stderr) if s) if out is not None else ""
    if out is not None and out.error and not logs:
        logs = f"error: {out.error}"
    item.outputs = [{"type": "logs", "logs": logs}] if logs else []
    return item


def events_out(use: c.ServerToolUse, n: int, seq: Callable[[], int]) -> list[Any]:
    """The events between the item's added and done events: in progress, its code
    (one delta), interpreting, completed."""
    iid, code = item_id(use), hosted_code.code_of(use)
    return [
        w.CodeInProgress(item_id=iid, output_index=n, sequence_number=seq()),
        w.CodeDelta(item_id=iid, output_index=n, delta=code, sequence_number=seq()),
        w.CodeDone(item_id=iid, output_index=n, code=code, sequence_number=seq()),
        w.CodeInterpreting(item_id=iid, output_index=n, sequence_number=seq()),
        w.CodeCompleted(item_id=iid, output_index=n, sequence_number=seq()),
    ]


def own_call(use: c.ServerToolUse) -> bool:
    """The run was a Responses ``code_interpreter_call`` (an id of OpenAI's form): it goes
    back as the item; another provider's run goes as text."""
    return use.id.startswith("ci_")


def call_out(use: c.ServerToolUse) -> dict[str, Any]:
    """A replayed run of OpenAI's own as its input item (its outputs as they came)."""
    out: dict[str, Any] = msgspec.to_builtins(item_out(use))
    return out
