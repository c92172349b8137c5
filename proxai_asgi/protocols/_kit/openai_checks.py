"""The 400s both OpenAI protocols word alike (Chat Completions and Responses): number
ranges, ``reasoning_effort`` values, the image types a data URL may carry."""

from __future__ import annotations

from ...errors import ProxyError

# The values OpenAI's reference lists for ``reasoning_effort``.
EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})


def invalid(message: str, param: str, code: str | None = None) -> ProxyError:
    err = ProxyError.invalid(message, param=param)
    err.code = code
    return err


def check_range(name: str, value: float | None, low: float, high: float) -> None:
    if value is None:
        return
    if value < low:
        raise invalid(
            f"Invalid '{name}': decimal below minimum value. Expected a value >= {low:g}, "
            f"but got {value:g} instead.",
            name,
            "decimal_below_min_value",
        )
    if value > high:
        raise invalid(
            f"Invalid '{name}': decimal above maximum value. Expected a value <= {high:g}, "
            f"but got {value:g} instead.",
            name,
            "decimal_above_max_value",
        )


def check_at_least(name: str, value: int | None, low: int) -> None:
    """An integer field's minimum, as OpenAI words it (``max_tokens`` -1 is a 400, not
    a limit to clamp)."""
    if value is not None and value < low:
        raise invalid(
            f"Invalid '{name}': integer below minimum value. Expected a value >= {low}, "
            f"but got {value} instead.",
            name,
            "integer_below_min_value",
        )


def check_effort(effort: str | None, param: str) -> None:
    if effort is not None and effort not in EFFORTS:
        raise invalid(
            f"Invalid value: '{effort}'. Supported values are: "
            + ", ".join(f"'{e}'" for e in sorted(EFFORTS)),
            param,
        )


IMAGE_TYPES = ("image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp")


def unsupported_image(url: str | None) -> str | None:
    """The media type of a data URL whose image type OpenAI does not take (png, jpeg,
    gif and webp); None for any other URL (a URL's type is the fetcher's to judge, as
    at OpenAI)."""
    if url is None or url[:5].lower() != "data:":
        return None
    media_type = url[5:].split(";", 1)[0].split(",", 1)[0].strip().lower()
    return None if media_type in IMAGE_TYPES else media_type


def check_image_url(url: str | None, param: str) -> None:
    """A 400 for a data URL of an image type OpenAI does not take."""
    media_type = unsupported_image(url)
    if media_type is not None:
        raise invalid(
            f"Invalid image: the image type {media_type or '(none)'!r} is not supported. "
            "Supported formats are: 'png', 'jpeg', 'gif', 'webp'.",
            param,
            "invalid_image_format",
        )
