"""Upstreams, routes, and choosing one by the request's model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .codec import PROTOCOLS, PathCall, ProtocolName, UpstreamOptions

if TYPE_CHECKING:
    from .tls import Verify

# The path each protocol is served on; also where an inner-app upstream is called.
DEFAULT_PATHS: dict[ProtocolName, str] = {
    "openai_chat_completions": "/v1/chat/completions",
    "openai_responses": "/v1/responses",
    "anthropic_messages": "/v1/messages",
}


@dataclass(frozen=True)
class Upstream:
    """Where translated requests go.

    ``base_url`` is taken as that protocol's official SDK takes it: OpenAI protocols
    include the version (``https://api.openai.com/v1``), Anthropic does not
    (``https://api.anthropic.com``). ``api_key=None`` forwards the client's own
    credential (in the upstream's scheme). ``verify`` decides which certificates an
    ``https://`` upstream may present (see ``proxai_asgi.tls``): by default those httpx
    trusts (certifi, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``); a CA file or directory
    path, an ``ssl.SSLContext``, or ``False`` for none.
    """

    protocol: ProtocolName
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    _: KW_ONLY
    name: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = 10.0
    verify: Verify = True
    read_timeout: float = 600.0  # waiting for headers, and between body chunks
    stream_idle_timeout: float = 300.0  # no upstream bytes for this long mid-stream
    tool_stall_timeout: float = 120.0  # ...or this long while tool arguments are half sent
    default_max_tokens: int = 4096  # Anthropic requires max_tokens; used when absent
    lossy: bool = False  # drop-and-report instead of rejecting unrepresentable fields
    native_custom_tools: bool = False
    chat_max_tokens_field: str = "max_completion_tokens"
    echo_reasoning_content: bool = False
    cache_breakpoints: bool = True  # Anthropic: cache_control for OpenAI-protocol clients
    inner: bool = False  # the wrapped ASGI app is the upstream
    inner_path: str | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; expected one of {PROTOCOLS}")
        if self.base_url:
            object.__setattr__(self, "base_url", self.base_url.rstrip("/"))
        elif not self.inner:
            raise ValueError("an HTTP upstream needs a base_url")

    @classmethod
    def inner_app(
        cls, protocol: ProtocolName, *, path: str | None = None, **options: object
    ) -> Upstream:
        """The wrapped ASGI app itself, reached at ``path`` (default: the protocol's
        standard path) with no network hop."""
        return cls(protocol, None, None, inner=True, inner_path=path, **options)  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        return self.name or ("inner-app" if self.inner else (self.base_url or "?"))

    @property
    def url(self) -> str:
        """The full upstream URL of a body-addressed protocol. Only configuration
        builds it, never the request."""
        return self.url_for(None)

    def url_for(self, call: PathCall | None) -> str:
        """The upstream URL for a call; a path-addressed protocol (Gemini) puts the
        (routed, rewritten) model and the stream flag in it."""
        from .protocols import get_codec

        return get_codec(self.protocol).upstream_url(self.base_url or "", call)

    @property
    def path(self) -> str:
        return self.path_for(None)[0]

    def path_for(self, call: PathCall | None) -> tuple[str, bytes]:
        """Path and query string an inner-app upstream is called on."""
        if self.inner_path or self.protocol in DEFAULT_PATHS:
            return self.inner_path or DEFAULT_PATHS[self.protocol], b""
        parts = urlsplit(self.url_for(call))
        return parts.path, parts.query.encode()

    def options(self) -> UpstreamOptions:
        return UpstreamOptions(
            default_max_tokens=self.default_max_tokens,
            lossy=self.lossy,
            native_custom_tools=self.native_custom_tools,
            chat_max_tokens_field=self.chat_max_tokens_field,
            echo_reasoning_content=self.echo_reasoning_content,
            cache_breakpoints=self.cache_breakpoints,
        )


@dataclass(frozen=True)
class Route:
    """Send requests whose model matches ``model`` (a glob) to ``upstream``,
    optionally asking the upstream for ``model_rewrite`` instead."""

    model: str
    upstream: Upstream
    model_rewrite: str | None = None

    def matches(self, model: str) -> bool:
        return fnmatchcase(model, self.model)


class Router:
    __slots__ = ("_exact", "_routes")

    def __init__(self, routes: list[Route]) -> None:
        self._routes = routes
        # Exact patterns (no glob characters) resolve with one dict look-up, but only
        # when no earlier glob could have matched first.
        self._exact: dict[str, Route] = {}
        for r in routes:
            if any(ch in r.model for ch in "*?["):
                break
            self._exact.setdefault(r.model, r)

    def select(self, model: str) -> Route | None:
        hit = self._exact.get(model)
        if hit is not None:
            return hit
        for r in self._routes:
            if r.matches(model):
                return r
        return None

    @property
    def routes(self) -> list[Route]:
        return self._routes
