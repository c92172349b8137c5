"""Which browser pages may use the proxy: the ``Origin`` check.

A proxy that holds an upstream key serves whoever reaches it, and a web page the user
visits can reach a proxy on the user's machine. Command-line clients and SDKs send no
``Origin``; browsers send it on every cross-origin request, every POST and every
WebSocket handshake, and ``Sec-Fetch-Site`` (which a page cannot forge) on every
request. So a request to an LLM path is refused (403) when a browser says it comes
from a page that is neither the proxy's own origin nor listed in ``allowed_origins``
(``"*"`` lists every origin). A listed origin gets the CORS headers it needs, preflights
included; nothing else is ever answered with a CORS allowance.

The proxy's own origin is the request's ``Host`` -- except on a loopback listener,
where a ``Host`` that is not a loopback name means DNS rebinding (a page on
``attacker.example`` whose name now resolves to 127.0.0.1): a browser then calls the
request same-origin, so only the ``Host`` tells.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from ..transport.upstream import Message, RawHeaders, Scope, Send

_DEFAULT_PORTS = {b"http": b"80", b"ws": b"80", b"https": b"443", b"wss": b"443"}
_METHODS = b"POST, GET, DELETE, OPTIONS"


def _authority(origin: bytes) -> bytes | None:
    """``host[:port]`` of a serialized origin, lowercased, its scheme's default port
    dropped; None for ``null`` or anything that is not ``scheme://host[:port]``."""
    scheme, sep, rest = origin.strip().lower().partition(b"://")
    if not sep or not rest or b"/" in rest:
        return None
    return _strip_port(rest, _DEFAULT_PORTS.get(scheme))


def _strip_port(authority: bytes, default: bytes | None) -> bytes:
    host, sep, port = authority.rpartition(b":")
    if sep and not host.endswith(b"]") and b":" in host:
        return authority  # a bare IPv6 address: no port to strip
    if sep and (port == default or (default is None and port in (b"80", b"443"))):
        return host
    return authority


def _hostname(authority: bytes) -> str:
    if authority.startswith(b"["):
        return authority[1:].partition(b"]")[0].decode("latin-1")
    return authority.partition(b":")[0].decode("latin-1")


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True  # browsers resolve these to loopback themselves: not rebindable
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize(origin: str) -> bytes:
    """An ``allowed_origins`` entry as the check compares it."""
    authority = _authority(origin.encode("latin-1"))
    if authority is None:
        raise ValueError(
            f"allowed_origins: {origin!r} is not an origin (scheme://host[:port]) or '*'"
        )
    scheme = origin.strip().lower().partition("://")[0].encode()
    return scheme + b"://" + authority


class OriginPolicy:
    """The ``allowed_origins`` of one middleware."""

    def __init__(self, allowed: Iterable[str]) -> None:
        entries = list(allowed)
        self.any = "*" in entries
        self.allowed = frozenset(normalize(o) for o in entries if o != "*")

    def admit(self, scope: Scope) -> tuple[bool, bytes | None]:
        """(allowed?, the origin to answer with CORS headers, if any)."""
        origin = fetch_site = host = None
        for k, v in scope.get("headers", ()):
            if k == b"origin" and origin is None:
                origin = v
            elif k == b"sec-fetch-site":
                fetch_site = v.strip().lower()
            elif k == b"host" and host is None:
                host = v
        if origin is None:
            # No Origin: not a browser (CLIs, SDKs), or a browser's no-cors request,
            # which says where it comes from in Sec-Fetch-Site.
            return self.any or fetch_site not in (b"cross-site", b"same-site"), None
        authority = _authority(origin)
        if self.any or (authority is not None and self._listed(origin, authority)):
            return True, origin
        own = None if host is None else _strip_port(host.strip().lower(), None)
        same = authority is not None and (authority == own or fetch_site == b"same-origin")
        if same and not _rebound(scope, own):
            return True, None
        return False, None

    def _listed(self, origin: bytes, authority: bytes) -> bool:
        return origin.strip().lower().partition(b"://")[0] + b"://" + authority in self.allowed


def _rebound(scope: Scope, host: bytes | None) -> bool:
    """A loopback listener reached under a name that is not a loopback one."""
    server = scope.get("server")
    if not server or not isinstance(server[0], str) or not _is_loopback(server[0]):
        return False
    return host is None or not _is_loopback(_hostname(host))


def cors_headers(origin: bytes) -> RawHeaders:
    return [
        (b"access-control-allow-origin", origin),
        (b"access-control-expose-headers", b"*"),
        (b"vary", b"origin"),
    ]


def with_cors(send: Send, origin: bytes) -> Send:
    """``send`` with the CORS headers a listed origin needs to read the answer."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [*message.get("headers", ()), *cors_headers(origin)]
            message = {**message, "headers": headers}
        await send(message)

    return wrapped


def preflight_headers(scope: Scope, origin: bytes) -> RawHeaders:
    """What a listed origin's preflight is answered with: the methods of the LLM
    paths, the headers it asked for (the SDKs send a dozen of their own)."""
    headers = [
        *cors_headers(origin),
        (b"access-control-allow-methods", _METHODS),
        (b"access-control-max-age", b"600"),
    ]
    for k, v in scope.get("headers", ()):
        if k == b"access-control-request-headers":
            headers.append((b"access-control-allow-headers", v))
        elif k == b"access-control-request-private-network" and v.strip().lower() == b"true":
            headers.append((b"access-control-allow-private-network", b"true"))
    return headers
