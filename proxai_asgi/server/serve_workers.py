"""``--workers N``: uvicorn's supervisor over one listening socket, with TCP_NODELAY kept.

``uvicorn.run(..., workers=N)`` binds the shared socket as ``socket.socket(family)``,
whose ``proto`` is 0. Accepted connections inherit that ``proto``, and asyncio only
turns Nagle off (TCP_NODELAY) on sockets that say IPPROTO_TCP. With Nagle on, a
stream's small writes (one per SSE event) wait for the client's ACK of the previous
one, which a keep-alive client delays (by 40 ms or more): a multi-worker server was bound
by those delays, not by its cores (bench/README.md, "Workers"; uvicorn issue #3149).
One worker is unaffected: asyncio binds its socket itself, as IPPROTO_TCP.
"""

from __future__ import annotations

import inspect
import socket
from typing import Any


def tcp_listener(sock: socket.socket) -> socket.socket:
    """The same listening socket, known to Python as TCP (so asyncio sets TCP_NODELAY
    on every connection it accepts) and with TCP_NODELAY set on it as well (Linux
    copies it to accepted connections). A Unix socket is returned as it is."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return sock
    tcp = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
    tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    tcp.set_inheritable(True)  # the workers are spawned with it
    return tcp


def serve(app: str, workers: int, options: dict[str, Any]) -> None:
    """What ``uvicorn.run(app, factory=True, workers=workers, **options)`` does, but
    over :func:`tcp_listener`'s socket: the supervisor starts the workers, replaces
    one that dies and stops them all on SIGINT/SIGTERM."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(app, factory=True, workers=workers, **options)
    sock = tcp_listener(config.bind_socket())
    kwargs: dict[str, Any] = {"sockets": [sock]}
    if "target" in inspect.signature(Multiprocess).parameters:  # as uvicorn 0.30 has it
        kwargs["target"] = uvicorn.Server(config).run
    try:
        Multiprocess(config, **kwargs).run()
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
