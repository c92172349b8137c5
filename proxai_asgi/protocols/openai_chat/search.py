"""Chat Completions' ``web_search_options`` (the search of OpenAI's search models) as
the canonical ``WebSearch``, checked as OpenAI checks it. The other way, a Chat
upstream is not assumed to search (``Codec.hosts_web_search``): another client's search
is run by the proxy, or reported."""

from __future__ import annotations

from typing import Any

from ... import canonical as c
from ...errors import ProxyError
from .._kit import hosted_search

_SIZES = ("low", "medium", "high")


def _invalid(message: str, param: str) -> ProxyError:
    return ProxyError.invalid(message, param=param)


def options_in(raw: Any) -> c.WebSearch:
    path = "web_search_options"
    if not isinstance(raw, dict):
        raise _invalid(f"Invalid type for '{path}': expected an object.", path)
    out = c.WebSearch()
    for key, value in raw.items():
        if key == "search_context_size":
            if value is not None and value not in _SIZES:
                raise _invalid(
                    f"Invalid value: '{value}'. Supported values are: 'low', 'medium', and 'high'.",
                    f"{path}.search_context_size",
                )
            out.context_size = value
        elif key == "user_location":
            out.user_location = _location_in(value, f"{path}.user_location")
        else:
            raise _invalid(f"Unrecognized request argument supplied: {path}.{key}", f"{path}.{key}")
    return out


def _location_in(raw: Any, path: str) -> dict[str, Any] | None:
    """Chat's location nests the approximate one: ``{type, approximate: {...}}``."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.get("type") != "approximate":
        raise _invalid(f"Invalid value for '{path}.type': expected 'approximate'.", f"{path}.type")
    for key in raw:
        if key not in ("type", "approximate"):
            raise _invalid(f"Unrecognized request argument supplied: {path}.{key}", f"{path}.{key}")
    return hosted_search.location_in(raw.get("approximate"), f"{path}.approximate")
