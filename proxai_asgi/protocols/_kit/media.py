"""Data URLs (RFC 2397), read and written one way by every codec.

OpenAI's protocols carry inline media as ``data:<media type>;base64,<data>``;
Anthropic's and Gemini's as a media type beside base64 data. A data URL is read as:

- the scheme ``data:`` in any case (a URI scheme is case-insensitive, RFC 3986 §3.1;
  ``checks`` and the Chat validator read it so too), the ``;base64`` marker as written
  (what ``checks`` accepts);
- the media type ``type/subtype`` lowercased (media types are case-insensitive and the
  providers' fields take the lowercase name), its parameters (``;charset=``,
  ``;name=``) dropped: no provider field carries them; an empty one is None (unknown:
  the codec writing it decides);
- no whitespace anywhere before the comma, a media type of tokens, parameters of
  ``name=value``: anything else is not a base64 data URL;
- the data after the comma kept as it is (the upstream judges the base64).

A data URL that is not base64 (``data:image/png,%89PNG``) is not read: its callers
refuse it or pass it on as a URL, as their protocol does.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_TOKEN = r"[A-Za-z0-9!#$&^_.+-]+"
_MEDIA_TYPE = re.compile(rf"(?:{_TOKEN}/{_TOKEN})?")
_PARAMETER = re.compile(rf"{_TOKEN}=[^\s;,]*")


class DataURL(NamedTuple):
    media_type: str | None  # ``type/subtype``, lowercase; None when the URL names none
    data: str  # the base64 text, as sent


def is_data_url(url: str) -> bool:
    """Whether ``url`` has the ``data:`` scheme (base64 or not)."""
    return url[:5].lower() == "data:"


def parse_data_url(url: str) -> DataURL | None:
    """A base64 data URL's media type and data; None for any other URL."""
    if not is_data_url(url):
        return None
    head, sep, data = url[5:].partition(",")
    if not sep:
        return None
    media_type, *parameters, marker = head.split(";") if ";" in head else ("", "")
    if marker != "base64" or not _MEDIA_TYPE.fullmatch(media_type):
        return None
    if not all(_PARAMETER.fullmatch(p) for p in parameters):
        return None
    return DataURL(media_type.lower() or None, data)


def data_url(media_type: str, data: str) -> str:
    """``data`` (base64) as a data URL of ``media_type``."""
    return f"data:{media_type};base64,{data}"
