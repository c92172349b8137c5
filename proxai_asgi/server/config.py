"""Configuration: one schema for the TOML file, the environment and the CLI.

```toml
[server]
host = "127.0.0.1"
port = 8080
prefix = ""                  # serve the LLM paths under a mount point
max_body_size = 33554432
lean_http = true             # upstreams via the lean HTTP/1.1 pool (false: httpx)
responses_websocket = true   # serve Codex's Responses WebSocket (false: 426, clients use HTTP)
workers = 1                  # processes serving the port; each has its own pools and limits
metrics = false              # GET {prefix}/metrics, Prometheus (one scrape sees every worker)
body_timeout = 30            # seconds to receive a request body, else 408 ($PROXAI_BODY_TIMEOUT)
allowed_origins = []         # browser pages of other origins allowed to call ("*": any)
websocket_idle_timeout = 300 # close a Responses WebSocket idle this long (seconds)
websocket_max_connections = 256  # open Responses WebSockets per process; more get a 503
# websocket_max_history = 33554432  # bytes a connection keeps of its last response
# ledger = "sqlite:////var/lib/proxai/usage.db"  # usage ledger ($PROXAI_LEDGER): or postgresql://...
cost_header = false          # x-proxai-cost (USD) on plain successful answers

[store]                      # stored Responses (previous_response_id, retrieve, delete)
url = "memory"               # "off", "sqlite:////var/lib/proxai/responses.db", "redis://host:6379/0"
secret_env = "PROXAI_STORE_SECRET"  # owner-hash key (unset: SQLite/Redis keep their own)
ttl = 2592000                # seconds since last use (30 days)
max_entries = 10000          # memory and SQLite
max_bytes = 268435456        # memory

prices = "prices.toml"        # the price table's overrides (or a [prices] table of the
                             # same shape; see proxai_asgi/usage/prices.py); unset: default

[[upstreams]]
name = "claude"
protocol = "anthropic_messages"
base_url = "https://api.anthropic.com"
api_key_env = "ANTHROPIC_API_KEY"   # keys come from the environment; a list is a key pool:
# api_key_env = ["ANTHROPIC_KEY_1", "ANTHROPIC_KEY_2"]  # one key a request; a failing one rests
default_max_tokens = 4096
lossy = false
headers = { "x-team" = "search" }
verify = true                # or a CA file/directory path; false: no TLS verification
# Failover knobs (each also $PROXAI_<KEY>, which overrides every upstream's):
first_content_timeout = 10   # no first content this long: another key or fallback is started
max_retries = 2              # retries of a failing target (429, 5xx, resets, timeouts) per key
retry_budget = 20            # seconds all retry waits of a request may add up to
max_retry_after = 30         # a longer retry-after moves on at once
key_cooldown = 600           # a revoked or exhausted key is skipped this long
target_cooldown = 15         # a failing target is skipped this long, then probed
continuation = "prefill"     # after a mid-stream cut: prefill, restart or off (unset: by protocol)

[[routes]]
model = "claude-*"           # glob; first match wins
upstream = "claude"
model_rewrite = "claude-sonnet-4-5"
fallbacks = [                # tried in order once "claude" (every key) failed before content
  { upstream = "openrouter", model = "anthropic/claude-sonnet-4.5" },  # model unset: the routed one
]
```

[search]                     # web search the proxy runs for upstreams without one (Chat
                             # Completions, or an upstream with proxy_search = true)
backend = "brave"            # the Brave Search API ($PROXAI_SEARCH, --search); unset: none,
                             # and a client's search is answered as unavailable
api_key_env = "BRAVE_API_KEY"  # the variable holding the backend's key (this by default)
# base_url = "https://api.search.brave.com"
max_results = 5              # results per search
timeout = 15                 # seconds a search may take, else it failed ("unavailable")
max_searches = 8             # searches per answer, whatever the client's max_uses

[[budgets]]                  # limits checked before any upstream is called (a 429 when spent)
tokens = 2000000             # or usd = 25.0 (exactly one)
window = "1d"                # fixed windows aligned to the epoch: "1h", "30d", "90s", or seconds
per = "owner"                # "owner" (each client key), "route" (all clients of a route), "all"
routes = ["claude-*"]        # the routes' model globs it applies to (unset: every route)
# name = "daily-tokens"      # names its counters in Redis (unset: made of the above)
# hold_ttl = 900             # seconds an unsettled reservation counts
```

Budgets count in Redis when the store is Redis (shared by every instance and worker),
else in each worker's memory.

With no upstream at all, the built-in demo upstream answers (offline).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any, get_type_hints

import msgspec

from ..codec import PROTOCOLS, ProtocolName
from ..routing import Fallback, Route, Upstream
from ..search import BraveSearch, Searcher
from ..serving.origins import normalize as normalize_origin
from ..usage.budgets import Budget, check_distinct
from ..usage.prices import load_prices


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


class ServerConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    host: str = "127.0.0.1"
    port: int = 8080
    prefix: str = ""
    max_body_size: int = 32 * 1024 * 1024
    log_level: str = "info"
    demo_protocol: ProtocolName = PROTOCOLS[0]  # the registry's first: Chat Completions
    lean_http: bool = True
    responses_websocket: bool = True
    workers: int = 1  # processes serving the port (each with its own pools and limits)
    metrics: bool = False  # GET {prefix}/metrics (``--metrics``)
    # Admission, browser pages and the Codex WebSocket: ``ProxaiMiddleware``'s options
    # of these names (``admission_options``); each also from $PROXAI_<NAME>.
    body_timeout: float = 30.0
    allowed_origins: list[str] = msgspec.field(default_factory=list)
    websocket_idle_timeout: float = 300.0
    websocket_max_connections: int = 256
    websocket_max_history: int | None = None  # None: max_body_size
    ledger: str | None = None  # the usage ledger's URL (``ProxaiMiddleware(ledger=)``)
    cost_header: bool = False  # x-proxai-cost (USD) on plain answers ($PROXAI_COST_HEADER)


# Keys of an ``[[upstreams]]`` table besides ``Upstream``'s own fields.
_CONFIG_ONLY = ("api_key_env", "allow_inline_key")
# ``Upstream`` fields a file does not set: the wrapped app is a Python-API upstream.
_NOT_IN_FILES = ("inner", "inner_path", "_", "key_index")
UPSTREAM_KEYS = frozenset(
    [f.name for f in fields(Upstream) if f.name not in _NOT_IN_FILES] + list(_CONFIG_ONLY)
)


class StoreConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    url: str = "memory"
    secret_env: str | None = None  # the variable holding the owner-hash key
    ttl: float | None = None
    max_entries: int | None = None
    max_bytes: int | None = None
    prefix: str | None = None  # Redis key prefix


class FallbackConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    upstream: str
    model: str | None = None  # None: the routed model


class RouteConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    model: str
    upstream: str
    model_rewrite: str | None = None
    fallbacks: list[FallbackConfig] = msgspec.field(default_factory=list)


class BudgetConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    tokens: int | None = None
    usd: float | None = None
    window: str | float = "1d"
    per: str = "owner"
    routes: list[str] = msgspec.field(default_factory=list)
    name: str | None = None
    hold_ttl: float | None = None


class SearchConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    backend: str | None = None  # "brave"; None: no backend
    api_key_env: str | None = None  # None: the backend's usual variable
    base_url: str | None = None
    max_results: int = 5
    timeout: float = 15.0
    max_searches: int = 8


# The search backends a configuration can name, and the variable each key is read from.
SEARCH_BACKENDS = {"brave": "BRAVE_API_KEY"}


def build_search(conf: SearchConfig, env: dict[str, str], backend: str | None = None) -> Searcher:
    """The ``[search]`` table (``backend`` overriding its backend) as a ``Searcher``."""
    name = backend or env.get("PROXAI_SEARCH") or conf.backend
    found: BraveSearch | None = None
    if name:
        if name not in SEARCH_BACKENDS:
            raise ConfigError(
                f"search.backend: {name!r} is not one of {', '.join(sorted(SEARCH_BACKENDS))}"
            )
        variable = conf.api_key_env or SEARCH_BACKENDS[name]
        key = env.get(variable)
        if not key:
            raise ConfigError(f"search.api_key_env: ${variable} is not set")
        options: dict[str, Any] = {"timeout": conf.timeout}
        if conf.base_url:
            options["base_url"] = conf.base_url
        found = BraveSearch(key, **options)
    try:
        return Searcher(found, conf.max_results, conf.timeout, conf.max_searches)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    upstreams: list[dict[str, Any]] = msgspec.field(default_factory=list)
    routes: list[RouteConfig] = msgspec.field(default_factory=list)
    store: StoreConfig = msgspec.field(default_factory=StoreConfig)
    budgets: list[BudgetConfig] = msgspec.field(default_factory=list)
    search: SearchConfig = msgspec.field(default_factory=SearchConfig)
    # The price table: a TOML price file's path, or the same as a [prices] table
    # (``usage.prices`` documents the format); unset: the default table.
    prices: str | dict[str, Any] | None = None


def parse(data: dict[str, Any]) -> Config:
    try:
        config = msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    if config.server.workers < 1:
        raise ConfigError("server.workers: must be 1 or more")
    check_admission(config.server, "server.")
    names = [str(u.get("name")) for u in config.upstreams]
    for i, u in enumerate(config.upstreams):
        for key in u:
            if key not in UPSTREAM_KEYS:
                raise ConfigError(f"upstreams[{i}].{key}: unknown key")
        if not isinstance(u.get("name"), str):
            raise ConfigError(f"upstreams[{i}].name: required, a string")
        if names.count(u["name"]) > 1:
            raise ConfigError(f"upstreams[{i}].name: {u['name']!r} is used twice")
        try:
            key_variables(u)
        except ValueError as exc:
            raise ConfigError(f"upstreams[{i}].api_key_env: {exc}") from None
        if u.get("api_key") is not None and not u.get("allow_inline_key"):
            raise ConfigError(
                f"upstreams[{i}].api_key: keys belong in the environment (api_key_env); "
                "set allow_inline_key = true to keep one in the file"
            )
        try:
            _upstream(u, u.get("api_key"))  # every value checked now, keys aside
        except (msgspec.ValidationError, ValueError) as exc:
            raise ConfigError(f"upstreams[{i}]: {exc}") from None
    st = config.store
    if not (st.url in ("memory", "off") or st.url.startswith(("sqlite:///", "redis", "unix://"))):
        raise ConfigError(
            f"store.url: {st.url!r} is not memory, off, sqlite:///path or redis://host:port/db"
        )
    if config.prices is not None:
        try:
            load_prices(config.prices)
        except ValueError as exc:
            raise ConfigError(f"prices: {exc}") from None
    for i, r in enumerate(config.routes):
        if r.upstream not in names:
            raise ConfigError(f"routes[{i}].upstream: no upstream named {r.upstream!r}")
        for j, f in enumerate(r.fallbacks):
            if f.upstream not in names:
                raise ConfigError(
                    f"routes[{i}].fallbacks[{j}].upstream: no upstream named {f.upstream!r}"
                )
    build_budgets(config)  # every value checked now
    return config


def build_budgets(config: Config) -> list[Budget]:
    """The ``[[budgets]]`` tables as ``Budget`` objects."""
    built = []
    for i, b in enumerate(config.budgets):
        options: dict[str, Any] = {f: getattr(b, f) for f in b.__struct_fields__}
        if options["hold_ttl"] is None:
            del options["hold_ttl"]
        try:
            built.append(Budget(**options))
        except ValueError as exc:
            raise ConfigError(f"budgets[{i}]: {exc}") from None
    try:
        check_distinct(built)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return built


def key_variables(table: dict[str, Any]) -> tuple[str, ...]:
    """The environment variables an upstream's keys come from: none, one, or a pool."""
    names = table.get("api_key_env")
    if names is None:
        return ()
    listed = [names] if isinstance(names, str) else names
    if not isinstance(listed, list) or not all(isinstance(n, str) and n for n in listed):
        raise ValueError("a variable name, or a list of them (a key pool)")
    if not listed:
        raise ValueError("a key pool names at least one variable")
    if len(set(listed)) != len(listed):
        raise ValueError("the pool names one variable twice")
    return tuple(listed)


def load(path: str | Path) -> Config:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return parse(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None


@cache
def _field_types() -> dict[str, Any]:
    # A file names a CA path or a switch for ``verify``; an ssl.SSLContext is the
    # Python API's only.
    return get_type_hints(Upstream, localns={"Verify": bool | str})


def _upstream(table: dict[str, Any], key: str | list[str] | None) -> Upstream:
    types = _field_types()
    values: dict[str, Any] = {}
    for name, value in table.items():
        if name in _CONFIG_ONLY:
            continue
        try:
            values[name] = msgspec.convert(value, types[name])
        except msgspec.ValidationError as exc:
            raise ValueError(f"{name}: {exc}") from None
    values["api_key"] = key
    return Upstream(**values)


def build_upstream(table: dict[str, Any], env: dict[str, str] | None = None) -> Upstream:
    env = dict(os.environ) if env is None else env
    key = table.get("api_key")
    variables = key_variables(table)
    if variables:
        keys = []
        for variable in variables:
            value = env.get(variable)
            if not value:
                raise ConfigError(f"upstreams.{table['name']}.api_key_env: ${variable} is not set")
            keys.append(value)
        key = keys[0] if isinstance(table["api_key_env"], str) else keys
    knobs = routing_env(env)
    try:
        return _upstream({**table, **knobs}, key)
    except ValueError as exc:  # the key from the environment (named, never shown)
        raise ConfigError(f"upstreams.{table['name']}: {exc}") from None


def build_routes(config: Config, env: dict[str, str] | None = None) -> list[Route]:
    """Routes from the configuration; with upstreams but no routes, every model goes
    to the first upstream."""
    ups = {u["name"]: build_upstream(u, env) for u in config.upstreams}
    if not config.routes:
        return [Route("*", next(iter(ups.values())))] if ups else []
    routes = []
    for i, r in enumerate(config.routes):
        try:
            fallbacks = [Fallback(ups[f.upstream], model=f.model) for f in r.fallbacks]
            routes.append(Route(r.model, ups[r.upstream], r.model_rewrite, fallbacks=fallbacks))
        except ValueError as exc:
            raise ConfigError(f"routes[{i}]: {exc}") from None
    return routes


# The upstream keys also read from $PROXAI_<KEY>, over every upstream's own value.
ROUTING_ENV = (
    "first_content_timeout",
    "max_retries",
    "retry_budget",
    "max_retry_after",
    "key_cooldown",
    "target_cooldown",
    "continuation",
)


def routing_env(env: dict[str, str]) -> dict[str, Any]:
    """$PROXAI_FIRST_CONTENT_TIMEOUT, $PROXAI_MAX_RETRIES, ... as upstream options."""
    types = _field_types()
    found: dict[str, Any] = {}
    for name in ROUTING_ENV:
        raw = env.get("PROXAI_" + name.upper())
        if raw is None or not raw.strip():
            continue
        try:
            value = raw.strip() if name == "continuation" else msgspec.json.decode(raw)
            found[name] = msgspec.convert(value, types[name])
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise ConfigError(f"$PROXAI_{name.upper()}: {raw!r} is not a valid {name}") from None
    return found


# The ``[server]`` keys also read from $PROXAI_<KEY> (origins comma-separated).
_ADMISSION_ENV = (
    "body_timeout",
    "allowed_origins",
    "websocket_idle_timeout",
    "websocket_max_connections",
    "websocket_max_history",
)


def admission_env(server: ServerConfig, env: dict[str, str]) -> None:
    """Apply $PROXAI_BODY_TIMEOUT, $PROXAI_ALLOWED_ORIGINS, ... over ``server``."""
    types = get_type_hints(ServerConfig)
    for name in _ADMISSION_ENV:
        raw = env.get("PROXAI_" + name.upper())
        if raw is None or not raw.strip():
            continue
        value: Any = [o.strip() for o in raw.split(",") if o.strip()]
        if name != "allowed_origins":
            try:
                value = msgspec.convert(msgspec.json.decode(raw), types[name])
            except (msgspec.ValidationError, msgspec.DecodeError):
                raise ConfigError(f"$PROXAI_{name.upper()}: {raw!r} is not a number") from None
        setattr(server, name, value)
    check_admission(server, "")


def check_admission(server: ServerConfig, where: str) -> None:
    for name in ("body_timeout", "websocket_idle_timeout", "websocket_max_connections"):
        if getattr(server, name) <= 0:
            raise ConfigError(f"{where}{name}: must be more than 0")
    if server.websocket_max_history is not None and server.websocket_max_history < 0:
        raise ConfigError(f"{where}websocket_max_history: must be 0 or more")
    for origin in server.allowed_origins:
        if origin != "*":
            try:
                normalize_origin(origin)
            except ValueError as exc:
                raise ConfigError(f"{where}{exc}") from None


def admission_options(server: ServerConfig) -> dict[str, Any]:
    """The middleware's options of these names, from ``server``."""
    return {name: getattr(server, name) for name in _ADMISSION_ENV}
