"""Configuration: one schema for the TOML file, the environment and the CLI.

```toml
[server]
host = "127.0.0.1"
port = 8080
prefix = ""                  # serve the LLM paths under a mount point
max_body_size = 33554432
lean_http = true             # plain-http upstreams via the lean HTTP/1.1 pool (false: httpx)
responses_websocket = true   # serve Codex's Responses WebSocket (false: 426, clients use HTTP)
workers = 1                  # processes serving the port; each has its own pools and limits

[store]                      # stored Responses (previous_response_id, retrieve, delete)
url = "memory"               # "off", "sqlite:////var/lib/proxai/responses.db", "redis://host:6379/0"
secret_env = "PROXAI_STORE_SECRET"  # owner-hash key; instances sharing a store must agree
ttl = 2592000                # seconds since last use (30 days)
max_entries = 10000          # memory and SQLite
max_bytes = 268435456        # memory

[[upstreams]]
name = "claude"
protocol = "anthropic_messages"
base_url = "https://api.anthropic.com"
api_key_env = "ANTHROPIC_API_KEY"   # keys come from the environment
default_max_tokens = 4096
lossy = false
headers = { "x-team" = "search" }

[[routes]]
model = "claude-*"           # glob; first match wins
upstream = "claude"
model_rewrite = "claude-sonnet-4-5"
```

With no upstream at all, the built-in demo upstream answers (offline).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from .codec import ProtocolName
from .routing import Route, Upstream


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


class ServerConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    host: str = "127.0.0.1"
    port: int = 8080
    prefix: str = ""
    max_body_size: int = 32 * 1024 * 1024
    log_level: str = "info"
    demo_protocol: ProtocolName = "openai_chat_completions"
    lean_http: bool = True
    responses_websocket: bool = True
    workers: int = 1  # processes serving the port (each with its own pools and limits)


class UpstreamConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str
    protocol: ProtocolName
    base_url: str
    api_key_env: str | None = None
    api_key: str | None = None  # only with allow_inline_key = true
    allow_inline_key: bool = False
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    connect_timeout: float = 10.0
    read_timeout: float = 600.0
    stream_idle_timeout: float = 300.0
    tool_stall_timeout: float = 120.0
    default_max_tokens: int = 4096
    lossy: bool = False
    native_custom_tools: bool = False
    chat_max_tokens_field: str = "max_completion_tokens"
    echo_reasoning_content: bool = False
    cache_breakpoints: bool = True


class StoreConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    url: str = "memory"
    secret_env: str | None = None  # the variable holding the owner-hash key
    ttl: float | None = None
    max_entries: int | None = None
    max_bytes: int | None = None
    prefix: str | None = None  # Redis key prefix


class RouteConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    model: str
    upstream: str
    model_rewrite: str | None = None


class Config(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    server: ServerConfig = msgspec.field(default_factory=ServerConfig)
    upstreams: list[UpstreamConfig] = msgspec.field(default_factory=list)
    routes: list[RouteConfig] = msgspec.field(default_factory=list)
    store: StoreConfig = msgspec.field(default_factory=StoreConfig)


def parse(data: dict[str, Any]) -> Config:
    try:
        config = msgspec.convert(data, Config)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    if config.server.workers < 1:
        raise ConfigError("server.workers: must be 1 or more")
    names = [u.name for u in config.upstreams]
    for i, u in enumerate(config.upstreams):
        if names.count(u.name) > 1:
            raise ConfigError(f"upstreams[{i}].name: {u.name!r} is used twice")
        if u.api_key is not None and not u.allow_inline_key:
            raise ConfigError(
                f"upstreams[{i}].api_key: keys belong in the environment (api_key_env); "
                "set allow_inline_key = true to keep one in the file"
            )
        if u.chat_max_tokens_field not in ("max_completion_tokens", "max_tokens"):
            raise ConfigError(
                f"upstreams[{i}].chat_max_tokens_field: must be max_completion_tokens or max_tokens"
            )
    st = config.store
    if not (st.url in ("memory", "off") or st.url.startswith(("sqlite:///", "redis", "unix://"))):
        raise ConfigError(
            f"store.url: {st.url!r} is not memory, off, sqlite:///path or redis://host:port/db"
        )
    for i, r in enumerate(config.routes):
        if r.upstream not in names:
            raise ConfigError(f"routes[{i}].upstream: no upstream named {r.upstream!r}")
    return config


def load(path: str | Path) -> Config:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return parse(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def build_upstream(u: UpstreamConfig, env: dict[str, str] | None = None) -> Upstream:
    env = dict(os.environ) if env is None else env
    key = u.api_key
    if u.api_key_env:
        key = env.get(u.api_key_env)
        if not key:
            raise ConfigError(f"upstreams.{u.name}.api_key_env: ${u.api_key_env} is not set")
    return Upstream(
        u.protocol,
        u.base_url,
        key,
        name=u.name,
        headers=dict(u.headers),
        connect_timeout=u.connect_timeout,
        read_timeout=u.read_timeout,
        stream_idle_timeout=u.stream_idle_timeout,
        tool_stall_timeout=u.tool_stall_timeout,
        default_max_tokens=u.default_max_tokens,
        lossy=u.lossy,
        native_custom_tools=u.native_custom_tools,
        chat_max_tokens_field=u.chat_max_tokens_field,
        echo_reasoning_content=u.echo_reasoning_content,
        cache_breakpoints=u.cache_breakpoints,
    )


def build_routes(config: Config, env: dict[str, str] | None = None) -> list[Route]:
    """Routes from the configuration; with upstreams but no routes, every model goes
    to the first upstream."""
    ups = {u.name: build_upstream(u, env) for u in config.upstreams}
    if not config.routes:
        return [Route("*", next(iter(ups.values())))] if ups else []
    return [Route(r.model, ups[r.upstream], r.model_rewrite) for r in config.routes]
