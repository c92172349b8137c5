"""Upstreams, routes, and choosing one by the request's model."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from fnmatch import fnmatchcase
from urllib.parse import SplitResult, urlsplit

from ..client_values import is_path_segment
from ..codec import PROTOCOLS, PathCall, ProtocolName
from ..settings import UpstreamOptions

# ``urlsplit`` keeps its last 128 results (an ``lru_cache`` keyed by the URL, of any
# size); these URLs name the client's model, so they are split without it (the lean
# pool keeps its own, bounded by bytes: ``bounded_cache``).
split_url: Callable[[str], SplitResult] = getattr(urlsplit, "__wrapped__", urlsplit)


@dataclass(frozen=True)
class Upstream(UpstreamOptions):
    """Where translated requests go, and its options (``settings.UpstreamOptions``).

    ``base_url`` is taken as that protocol's official SDK takes it: OpenAI protocols
    include the version (``https://api.openai.com/v1``), Anthropic does not
    (``https://api.anthropic.com``). ``api_key=None`` forwards the client's own
    credential (in the upstream's scheme); a sequence of keys is a pool: each request
    uses one of them (``members``), and a key that fails is cooled down.
    """

    protocol: ProtocolName
    base_url: str | None = None
    api_key: str | Sequence[str] | None = field(default=None, repr=False)
    _: KW_ONLY
    inner: bool = False  # the wrapped ASGI app is the upstream
    inner_path: str | None = None
    # Set on the members of a pool (``members``): which key of the pool this is.
    key_index: int = field(default=0, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; expected one of {PROTOCOLS}")
        if self.base_url:
            object.__setattr__(self, "base_url", self.base_url.rstrip("/"))
        elif not self.inner:
            raise ValueError("an HTTP upstream needs a base_url")
        keys = self.api_key
        if keys is not None and not isinstance(keys, str):
            keys = tuple(keys)
            if not keys or not all(isinstance(k, str) and k for k in keys):
                raise ValueError("api_key: a pool is a non-empty sequence of non-empty keys")
            if len(set(keys)) != len(keys):
                raise ValueError("api_key: the pool names one key twice")
            object.__setattr__(self, "api_key", keys[0] if len(keys) == 1 else keys)
        for key in self.keys:
            _check_sendable(key, self.headers)
        object.__setattr__(self, "_members", self._make_members())

    @property
    def keys(self) -> tuple[str | None, ...]:
        """The keys requests may use: one, a pool, or (None) the client's own."""
        k = self.api_key
        return (None,) if k is None else (k,) if isinstance(k, str) else tuple(k)

    @property
    def key(self) -> str | None:
        """The one key a request to this upstream sends (a pool's member has one)."""
        k = self.api_key
        return k if k is None or isinstance(k, str) else k[0]

    @property
    def members(self) -> tuple[Upstream, ...]:
        """One upstream per key of the pool (just this one without a pool), made once:
        an attempt sends to a member, whose ``api_key`` is a single key."""
        members: tuple[Upstream, ...] = self.__dict__["_members"]
        return members

    def _make_members(self) -> tuple[Upstream, ...]:
        if isinstance(self.api_key, str) or self.api_key is None:
            return (self,)
        return tuple(replace(self, api_key=k, key_index=i) for i, k in enumerate(self.api_key))

    @property
    def key_id(self) -> str:
        """A key's name for logs, ledgers and shared state: a short hash, never the key
        ("client" when the client's own credential is forwarded)."""
        known: str | None = self.__dict__.get("_key_id")
        if known is not None:
            return known
        import hashlib  # here: importing it costs every process ~6 ms of OpenSSL

        key = self.key
        name = "client" if key is None else "k-" + hashlib.sha256(key.encode()).hexdigest()[:12]
        self.__dict__["_key_id"] = name
        return name

    @property
    def model_in_path(self) -> bool:
        """The model goes into this upstream's URL (Gemini): it must be one segment."""
        from ..protocols import get_codec

        return get_codec(self.protocol).model_in_path

    @classmethod
    def inner_app(
        cls, protocol: ProtocolName, *, path: str | None = None, **options: object
    ) -> Upstream:
        """The wrapped ASGI app itself, reached at ``path`` (default: the protocol's
        standard path) with no network hop."""
        key = options.pop("api_key", None)  # the app may check keys like any upstream
        return cls(protocol, None, key, inner=True, inner_path=path, **options)  # type: ignore[arg-type]

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
        from ..protocols import get_codec

        return get_codec(self.protocol).upstream_url(self.base_url or "", call)

    def path_for(self, call: PathCall | None) -> tuple[str, bytes]:
        """Path and query string an inner-app upstream is called on."""
        from ..protocols import get_codec

        if self.inner_path:
            return self.inner_path, b""
        parts = split_url(get_codec(self.protocol).inner_path(call))
        return parts.path, parts.query.encode()


def _check_sendable(api_key: str | None, headers: Mapping[str, str]) -> None:
    """A key or header value with a control character cannot be sent (HTTP libraries
    refuse it, quoting it in their error): refused here, without printing the key."""
    if api_key is not None and (_KEY_CONTROL.search(api_key) or api_key != api_key.strip()):
        raise ValueError(
            "api_key holds a control character or surrounding whitespace (a trailing "
            "newline from a secret file?): remove it; the key is not shown"
        )
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name) or _CONTROL.search(value) or value != value.strip(" \t"):
            raise ValueError(
                f"headers[{name!r}]: a header name must be a token, and its value hold no "
                "control characters and no surrounding whitespace"
            )


# RFC 9110 field names; in values, C0 controls other than tab, and DEL.
_TOKEN = re.compile(r"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_KEY_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Fallback:
    """An upstream tried, in order, once the route's own upstream (every key of it)
    has failed before the answer's first content; ``model=None`` keeps the routed
    model. It may speak another protocol than the route's upstream: the request is
    translated for it."""

    upstream: Upstream
    model: str | None = None

    def __post_init__(self) -> None:
        _check_model_for(self.upstream, self.model, "Fallback.model")


@dataclass(frozen=True)
class Route:
    """Send requests whose model matches ``model`` (a glob) to ``upstream``,
    optionally asking the upstream for ``model_rewrite`` instead; ``fallbacks`` are
    tried in order when it fails."""

    model: str
    upstream: Upstream
    model_rewrite: str | None = None
    fallbacks: Sequence[Fallback] = ()

    def __post_init__(self) -> None:
        _check_model_for(self.upstream, self.model_rewrite, "model_rewrite")
        fallbacks = tuple(self.fallbacks)
        for f in fallbacks:
            if not isinstance(f, Fallback):
                raise TypeError(f"fallbacks: expected Fallback entries, got {type(f).__name__}")
        object.__setattr__(self, "fallbacks", fallbacks)

    def matches(self, model: str) -> bool:
        return fnmatchcase(model, self.model)


def _check_model_for(up: Upstream, model: str | None, what: str) -> None:
    if model is not None and up.model_in_path and not is_path_segment(model):
        raise ValueError(
            f"{what} {model!r}: the upstream puts the model into its URL, so it "
            "must be letters, digits, '.', '_', '-', ':' and '@' only"
        )


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
