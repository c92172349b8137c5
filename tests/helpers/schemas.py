"""Canonical tools with their schemas as dicts, for comparing a decoded request (whose
schemas a client decoder may hold encoded: ``proxai_asgi.protocols._kit.tool_schemas``) with one
built by hand."""

from __future__ import annotations

from typing import Any

import msgspec

from proxai_asgi import canonical as c


def _schema_dict(parameters: dict[str, Any] | msgspec.Raw | None) -> dict[str, Any] | None:
    if type(parameters) is msgspec.Raw:
        decoded: dict[str, Any] = msgspec.json.decode(parameters)
        return decoded
    return parameters


def plain_tools(tools: list[c.Tool]) -> list[c.Tool]:
    return [msgspec.structs.replace(t, parameters=_schema_dict(t.parameters)) for t in tools]


def plain_request(request: c.Request) -> c.Request:
    return msgspec.structs.replace(request, tools=plain_tools(request.tools))
