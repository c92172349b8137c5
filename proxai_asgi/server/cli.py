"""``proxai-asgi``: the middleware as a standalone proxy, served by uvicorn."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from ..codec import PROTOCOLS
from ..metrics.specs import MULTIPROC_ENV
from ..middleware import ProxaiMiddleware
from ..routing import Route, Upstream
from ..store import MemoryStore, open_store
from ..transport.upstream import Receive, Scope, Send
from ..usage.ledger import open_ledger
from ..usage.prices import load_prices
from . import config as cfg
from . import serve_workers, usage_cli
from .demo import DemoUpstream

EPILOG = """\
Configuration comes from, in increasing priority: the TOML file (--config or
$PROXAI_CONFIG), environment variables ($PROXAI_UPSTREAM_URL, $PROXAI_UPSTREAM_PROTOCOL,
$PROXAI_API_KEY, $PROXAI_HOST, $PROXAI_PORT, $PROXAI_WORKERS, $PROXAI_STORE,
$PROXAI_STORE_SECRET: the owner-hash key; unset, a SQLite or Redis store keeps its
own, else a SQL ledger does, $PROXAI_LEDGER), and these flags. With no upstream
configured, a built-in demo upstream answers offline (it echoes your message), speaking
--demo-protocol so that translation is exercised.

Clients point at http://HOST:PORT: OpenAI SDKs with base_url http://HOST:PORT/v1,
Anthropic SDKs and Claude Code with http://HOST:PORT.

Web pages of other origins than the proxy's own get a 403 unless listed with
--allow-origin (or [server] allowed_origins, $PROXAI_ALLOWED_ORIGINS comma-separated).
The [server] keys body_timeout, websocket_idle_timeout, websocket_max_connections and
websocket_max_history are also read from $PROXAI_<KEY> ($PROXAI_BODY_TIMEOUT, ...).

Failover: a TOML [[routes]] entry takes fallbacks = [{upstream = "name", model = "..."}],
tried in order when its upstream fails before the answer's first content; an
[[upstreams]] entry takes api_key_env = ["VAR1", "VAR2"], a key pool (one key per
request; a revoked or exhausted key is cooled down). --api-key-env VAR1,VAR2 does the
same for the flag-configured upstream. The upstream keys first_content_timeout,
max_retries, retry_budget, max_retry_after, key_cooldown, target_cooldown and
continuation are also read from $PROXAI_<KEY> ($PROXAI_MAX_RETRIES, ...), over every
upstream's own value.

Usage ledger: --ledger URL records one line per exchange; `proxai-asgi usage --ledger URL`
sums it by owner, model and day (`proxai-asgi usage --help`).
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="proxai-asgi",
        description="Serve OpenAI Chat, OpenAI Responses and Anthropic Messages clients "
        "from one upstream of any of the three protocols.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", help="TOML configuration file")
    p.add_argument("--host", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port (default 8080)")
    p.add_argument("--upstream-url", help="upstream base URL, as the protocol's SDK takes it")
    p.add_argument("--upstream-protocol", choices=PROTOCOLS, help="protocol the upstream speaks")
    p.add_argument(
        "--api-key-env",
        help="name of the environment variable holding the upstream key, or several "
        "comma-separated (a key pool) (default PROXAI_API_KEY; unset: forward the "
        "client's own key)",
    )
    p.add_argument("--model-rewrite", help="send every request upstream with this model")
    p.add_argument("--prefix", help="serve the LLM paths under this mount prefix")
    p.add_argument("--lossy", action="store_true", help="drop-and-report instead of rejecting")
    p.add_argument(
        "--httpx",
        action="store_true",
        help="send upstream requests through httpx, not the lean HTTP/1.1 pool",
    )
    p.add_argument(
        "--no-websocket",
        action="store_true",
        help="refuse the Responses WebSocket with 426 (Codex then uses HTTP)",
    )
    p.add_argument("--demo-protocol", choices=PROTOCOLS, help="protocol of the demo upstream")
    p.add_argument(
        "--workers",
        type=int,
        help="processes serving the port (default 1); each has its own upstream "
        "connections and limits",
    )
    p.add_argument(
        "--store",
        help="stored Responses: memory (default), off, sqlite:///path, redis://host:port/db "
        "(default $PROXAI_STORE)",
    )
    p.add_argument(
        "--metrics",
        action="store_true",
        help="serve Prometheus metrics at GET {prefix}/metrics (every worker's in one "
        "scrape; needs the metrics extra)",
    )
    p.add_argument(
        "--ledger",
        help="usage ledger, one record per exchange: sqlite:///path or "
        "postgresql://user@host/db (default $PROXAI_LEDGER, server.ledger; none)",
    )
    p.add_argument(
        "--prices",
        help="a TOML price file over the default price table (default $PROXAI_PRICES)",
    )
    p.add_argument(
        "--cost-header",
        action="store_true",
        help="an x-proxai-cost header (USD) on plain successful answers",
    )
    p.add_argument(
        "--search",
        metavar="BACKEND",
        help="run clients' web searches for upstreams without one with this backend: "
        "brave (its key in $BRAVE_API_KEY; default $PROXAI_SEARCH, search.backend; none)",
    )
    p.add_argument("--log-level", help="debug, info, warning (default info)")
    p.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="a web page origin (scheme://host[:port], or *) allowed to call the proxy "
        "from a browser; repeatable (default: none but the proxy's own)",
    )
    return p


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    """The app behind a standalone proxy: a health check, and 404 for the rest."""
    if scope["type"] != "http":
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/health":
        status, body = 200, b'{"status":"ok"}'
    else:
        status, body = 404, b'{"error":{"message":"not found","type":"not_found_error"}}'
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build_app(
    args: argparse.Namespace, env: dict[str, str] | None = None
) -> tuple[ProxaiMiddleware, cfg.ServerConfig]:
    env = dict(os.environ) if env is None else env
    conf_path = args.config or env.get("PROXAI_CONFIG")
    conf = cfg.load(conf_path) if conf_path else cfg.Config()
    server = conf.server
    if args.host or env.get("PROXAI_HOST"):
        server.host = args.host or env["PROXAI_HOST"]
    if args.port is not None or env.get("PROXAI_PORT"):  # --port 0: any free port
        server.port = int(args.port if args.port is not None else env["PROXAI_PORT"])
    if args.prefix is not None:
        server.prefix = args.prefix
    if args.demo_protocol:
        server.demo_protocol = args.demo_protocol
    if args.log_level:
        server.log_level = args.log_level
    if args.httpx:
        server.lean_http = False
    if args.no_websocket:
        server.responses_websocket = False
    if args.metrics:
        server.metrics = True
    if args.ledger or env.get("PROXAI_LEDGER"):
        server.ledger = args.ledger or env["PROXAI_LEDGER"]
    if args.workers is not None or env.get("PROXAI_WORKERS"):
        server.workers = int(args.workers if args.workers is not None else env["PROXAI_WORKERS"])
    if server.workers < 1:
        raise cfg.ConfigError("--workers (or server.workers): must be 1 or more")
    cfg.admission_env(server, env)
    if args.allow_origin:
        server.allowed_origins = list(args.allow_origin)
        cfg.check_admission(server, "--allow-origin: ")

    url = args.upstream_url or env.get("PROXAI_UPSTREAM_URL")
    routes: list[Route]
    if url:
        protocol = args.upstream_protocol or env.get("PROXAI_UPSTREAM_PROTOCOL")
        if protocol not in PROTOCOLS:
            raise cfg.ConfigError("--upstream-protocol (or $PROXAI_UPSTREAM_PROTOCOL) is required")
        key_env = args.api_key_env or "PROXAI_API_KEY"
        key = _cli_keys(key_env, env, pool="," in key_env)
        knobs = cfg.routing_env(env)
        try:
            upstream = Upstream(protocol, url, key, name="cli", lossy=args.lossy, **knobs)
            routes = [Route("*", upstream, args.model_rewrite)]
        except ValueError as exc:  # e.g. a key with a newline: named, never shown
            raise cfg.ConfigError(f"${key_env} / --upstream-*: {exc}") from None
    else:
        routes = cfg.build_routes(conf, env)
    inner = _not_found
    if not routes:
        demo = Upstream.inner_app(server.demo_protocol, name="demo", lossy=True)
        routes = [Route("*", demo, args.model_rewrite)]
        inner = DemoUpstream()
    st = conf.store
    store_url = args.store or env.get("PROXAI_STORE") or st.url
    secret = env.get("PROXAI_STORE_SECRET") or (env.get(st.secret_env) if st.secret_env else None)
    if st.secret_env and not secret:
        raise cfg.ConfigError(f"store.secret_env: ${st.secret_env} is not set")
    try:
        store = open_store(
            store_url,
            ttl=st.ttl,
            max_entries=st.max_entries,
            max_bytes=st.max_bytes,
            prefix=st.prefix,
        )
    except (ValueError, ImportError) as exc:
        raise cfg.ConfigError(f"--store (or $PROXAI_STORE, store.url): {exc}") from None
    try:
        ledger = open_ledger(server.ledger)
    except ValueError as exc:
        raise cfg.ConfigError(f"--ledger (or $PROXAI_LEDGER, server.ledger): {exc}") from None
    prices = args.prices or env.get("PROXAI_PRICES") or conf.prices
    try:
        price_table = load_prices(prices)
    except ValueError as exc:
        raise cfg.ConfigError(f"--prices (or $PROXAI_PRICES, prices): {exc}") from None
    cost_header = args.cost_header or server.cost_header or _flag(env.get("PROXAI_COST_HEADER"))
    app = ProxaiMiddleware(
        inner,
        routes=routes,
        prices=price_table,
        cost_header=cost_header,
        prefix=server.prefix,
        max_body_size=server.max_body_size,
        lean_http=server.lean_http,
        responses_websocket=server.responses_websocket,
        store=store if store is not None else "off",
        store_secret=secret,
        metrics=_metrics(server.metrics),
        ledger=ledger,
        budgets=cfg.build_budgets(conf),
        search=cfg.build_search(conf.search, env, args.search),
        **cfg.admission_options(server),
    )
    return app, server


def _metrics(on: bool) -> bool:
    if on and importlib.util.find_spec("prometheus_client") is None:
        raise cfg.ConfigError("--metrics needs prometheus_client: pip install proxai-asgi[metrics]")
    return on


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _cli_keys(names: str, env: dict[str, str], *, pool: bool) -> str | list[str] | None:
    """--api-key-env: one variable (unset: the client's own key), or a pool of them
    (every one must be set)."""
    if not pool:
        return env.get(names) or None
    variables = [n.strip() for n in names.split(",") if n.strip()]
    missing = [n for n in variables if not env.get(n)]
    if missing or not variables:
        raise cfg.ConfigError(f"--api-key-env: ${', $'.join(missing) or names} is not set")
    return [env[n] for n in variables]


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["usage"]:
        return usage_cli.main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        app, server = build_app(args)
    except cfg.ConfigError as exc:
        print(f"proxai-asgi: {exc}", file=sys.stderr)
        return 2
    try:
        import uvicorn
    except ImportError:
        print(
            "proxai-asgi: the server needs uvicorn: pip install 'proxai-asgi[server]'",
            file=sys.stderr,
        )
        return 2
    level = server.log_level.upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    routes = ", ".join(
        f"{r.model} -> {r.upstream.label} ({r.upstream.protocol})" for r in app.router.routes
    )
    print(
        f"proxai-asgi on http://{server.host}:{server.port}{server.prefix}  routes: {routes}",
        file=sys.stderr,
    )
    logging.getLogger("uvicorn.access").addFilter(RedactQueryKeys())
    options: dict[str, Any] = {
        "host": server.host,
        "port": server.port,
        "log_level": server.log_level.lower(),
        # A Responses WebSocket frame is a whole request body: the same limit.
        "ws_max_size": server.max_body_size,
    }
    if server.workers == 1:
        uvicorn.run(app, **options)
        return 0
    # uvicorn binds the port once and spawns the workers; each rebuilds the app from
    # the same command line (the environment it inherits carries it).
    os.environ[_WORKER_ARGV] = json.dumps(argv)
    # Workers sharing a SQLite or Redis store read its owner key from it (a random
    # key set here instead would change at every restart and orphan every record).
    if isinstance(app.stored.store, MemoryStore):
        logging.getLogger("proxai_asgi").warning(
            "--workers with the memory store: each worker keeps its own stored responses; "
            "use --store sqlite:///path or redis://... to share them"
        )
    with _metrics_dir(server.metrics):
        serve_workers.serve(f"{__name__}:worker_app", server.workers, options)
    return 0


@contextlib.contextmanager
def _metrics_dir(on: bool) -> Iterator[None]:
    """Workers keep their metrics in files of one fresh directory (prometheus_client's
    multiprocess mode: a scrape on any worker reads every worker's); set before they
    start, removed when they have all stopped."""
    if not on:
        yield
        return
    with tempfile.TemporaryDirectory(prefix="proxai-metrics-") as path:
        os.environ[MULTIPROC_ENV] = path
        try:
            yield
        finally:
            os.environ.pop(MULTIPROC_ENV, None)


_WORKER_ARGV = "PROXAI_WORKER_ARGV"


def worker_app() -> ProxaiMiddleware:
    """The app of one worker process (``--workers N``), built as the parent built it."""
    args = build_parser().parse_args(json.loads(os.environ[_WORKER_ARGV]))
    app, server = build_app(args)
    level = server.log_level.upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("uvicorn.access").addFilter(RedactQueryKeys())
    return app


_QUERY_KEY = re.compile(r"([?&]key=)[^&\s]*")


class RedactQueryKeys(logging.Filter):
    """Access-log lines show request paths with their query; a Gemini client may send
    its API key there (``?key=``), which must not reach the logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _QUERY_KEY.sub(r"\1[redacted]", a) if isinstance(a, str) else a for a in record.args
            )
        return True
