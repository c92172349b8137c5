"""The proxy of ``bench/default_path.py``: ``ProxaiMiddleware`` exactly as a user mounts
it, with no performance options, one route per upstream protocol (the model's prefix
picks it) to ``BENCH_UPSTREAM``. ``BENCH_TRANSPORT=httpx`` passes ``lean_http=False``
(the middleware's default before issue 16). An https upstream's test CA comes from
``SSL_CERT_FILE``, as a user's would, so the ``Upstream`` has no TLS option either.
``BENCH_ROUTING=on`` (``bench/routing.py``) gives each route a two-key pool and a
fallback of another protocol on the same upstream: routing on, never needed;
``BENCH_STORE`` is its ``store=`` (the routing state's engine too).
``BENCH_ACCOUNTING=on`` (``bench/routing.py --accounting``) turns on ``metrics``, a
SQLite ``ledger`` in a temporary directory, and the ``x-proxai-cost`` header (or some
of them: ``metrics,ledger,cost``).

    BENCH_UPSTREAM=https://127.0.0.1:9000 python -m uvicorn bench.servers.default_proxy:app
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from proxai_asgi import Fallback, ProxaiMiddleware, Route, Upstream

_BASE = os.environ["BENCH_UPSTREAM"]
PREFIXES = {
    "chat": "openai_chat_completions",
    "responses": "openai_responses",
    "anthropic": "anthropic_messages",
    "gemini": "gemini_generate_content",
}


async def _not_found(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def _base(protocol: str) -> str:
    return _BASE + "/v1" if protocol.startswith("openai") else _BASE


def _route(prefix: str, protocol: str) -> Route:
    if os.environ.get("BENCH_ROUTING") != "on":
        return Route(f"{prefix}-*", Upstream(protocol, _base(protocol)))  # type: ignore[arg-type]
    pool = Upstream(protocol, _base(protocol), api_key=["bench-k1", "bench-k2"])  # type: ignore[arg-type]
    chat = "openai_chat_completions"
    other = "anthropic_messages" if protocol == chat else chat
    backup = Upstream(other, _base(other), api_key="bench-k3")  # type: ignore[arg-type]
    return Route(f"{prefix}-*", pool, fallbacks=[Fallback(backup)])


_routes = [_route(prefix, protocol) for prefix, protocol in PREFIXES.items()]
_options: dict[str, object] = {}
if os.environ.get("BENCH_TRANSPORT") == "httpx":
    _options["lean_http"] = False
if os.environ.get("BENCH_STORE"):
    _options["store"] = os.environ["BENCH_STORE"]
_accounting = os.environ.get("BENCH_ACCOUNTING", "")
_parts = {"metrics", "ledger", "cost"} if _accounting == "on" else set(_accounting.split(","))
if "metrics" in _parts:
    _options["metrics"] = True
if "ledger" in _parts:
    _ledger_dir = tempfile.mkdtemp(prefix="proxai-bench-ledger-")
    _options["ledger"] = f"sqlite:///{_ledger_dir}/usage.db"
if "cost" in _parts:
    _options["cost_header"] = True
app = ProxaiMiddleware(_not_found, routes=_routes, **_options)  # type: ignore[arg-type]
