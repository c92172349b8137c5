"""The one definition of an upstream's options.

``Upstream`` (``routing.py``) adds where the upstream is; the TOML/environment
configuration reads its keys from these fields; the codecs' encoders consult the
translation knobs. A new option is one field here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .transport.tls import Verify

ChatMaxTokensField = Literal["max_completion_tokens", "max_tokens"]
# How an answer cut after its first content is finished on this upstream: asked to
# continue from the text already sent (an assistant prefill), asked again with only
# what extends that text released ("restart"), or not at all ("off": the client gets
# its protocol's terminal error). None: what the protocol's upstreams generally accept.
Continuation = Literal["prefill", "restart", "off"]


@dataclass(frozen=True, kw_only=True)
class UpstreamOptions:
    name: str | None = None  # label for logs
    headers: Mapping[str, str] = field(default_factory=dict)  # extra headers sent upstream
    # Which certificates an https:// upstream may present (``proxai_asgi.transport.tls``): by
    # default those httpx trusts (certifi, or SSL_CERT_FILE / SSL_CERT_DIR); a CA file
    # or directory path, an ``ssl.SSLContext``, or False for none.
    verify: Verify = True
    connect_timeout: float = 10.0
    read_timeout: float = 600.0  # waiting for headers, and between body chunks
    stream_idle_timeout: float = 300.0  # no upstream bytes for this long mid-stream
    # No content (headers, then a first text, thinking or tool event; keep-alives do
    # not count) this long after sending: when the route has another key or fallback,
    # it is started beside this one and the first to answer wins. Alone, the upstream
    # is waited for up to read_timeout (a reasoning model may think for minutes).
    first_content_timeout: float = 10.0
    # Failures of the target (429, 5xx, overloaded, refused or reset connections,
    # timeouts): retried on the same key this many times, with jittered backoff that
    # honours retry-after, while the waits stay within retry_budget seconds; a
    # retry-after longer than max_retry_after moves on at once.
    max_retries: int = 2
    retry_budget: float = 20.0
    max_retry_after: float = 30.0
    # How long a failing key (401, 403, 402, quota) and a failing target (after its
    # retries) are skipped before they are tried again.
    key_cooldown: float = 600.0
    target_cooldown: float = 15.0
    continuation: Continuation | None = None
    tool_stall_timeout: float = 120.0  # ...or this long while tool arguments are half sent
    # Anthropic requires max_tokens: sent when the client gave no limit.
    default_max_tokens: int = 4096
    # Drop and report fields that would otherwise be rejected (n>1, logprobs, ...).
    lossy: bool = False
    # Send Responses ``custom`` tools natively to a Chat upstream (OpenAI has them,
    # most Chat-compatible servers do not, so the default wraps them as functions).
    native_custom_tools: bool = False
    # Chat upstreams: which max-tokens field to send (OpenAI's reasoning models accept
    # only max_completion_tokens; some older servers only max_tokens).
    chat_max_tokens_field: ChatMaxTokensField = "max_completion_tokens"
    # Chat upstreams: replay reasoning as ``reasoning_content`` on assistant turns
    # (DeepSeek/Kimi-style servers require it in tool loops; OpenAI rejects it).
    echo_reasoning_content: bool = False
    # Anthropic upstreams: place cache breakpoints for clients whose protocol caches
    # prompt prefixes implicitly (``anthropic_messages/cache_breakpoints.py``).
    cache_breakpoints: bool = True
    # Web search: the proxy runs the client's hosted search tool itself (its search
    # backend, the search offered to the model as a function) even though this
    # upstream's protocol has a hosted search (a compatible server without one).
    # Upstreams whose protocol has none (Chat Completions) always get it run so.
    proxy_search: bool = False

    def __post_init__(self) -> None:
        if self.continuation not in (None, "prefill", "restart", "off"):
            raise ValueError(
                f"continuation: must be prefill, restart or off, not {self.continuation!r}"
            )
        if self.max_retries < 0:
            raise ValueError("max_retries: must be 0 or more")
        if self.chat_max_tokens_field not in ("max_completion_tokens", "max_tokens"):
            raise ValueError(
                "chat_max_tokens_field: must be max_completion_tokens or max_tokens, not "
                f"{self.chat_max_tokens_field!r}"
            )
