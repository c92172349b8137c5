"""The least a Python proxy can do per frame: a TCP relay on asyncio protocols.

Each client connection gets its own upstream connection, and every read on one side is
written to the other as it is: no HTTP, no ASGI, no copy beyond the kernel's. What it
costs per streamed event is the floor under any Python proxy that forwards each frame
as it arrives (``bench/frame_floor.py``).

    python -m bench.servers.tcp_relay --port 8001 --upstream 9000 [--loop uvloop]
"""

from __future__ import annotations

import argparse
import asyncio


class _Side(asyncio.Protocol):
    """One end of a relayed connection; ``peer`` is the other end's transport."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: asyncio.Transport | None = None
        self.pending: list[bytes] = []  # what came before the peer was connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # (uvloop's is not a subclass)

    def data_received(self, data: bytes) -> None:
        if self.peer is None:
            self.pending.append(data)
        else:
            self.peer.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            self.peer.close()


class _ClientSide(_Side):
    def __init__(self, upstream_port: int) -> None:
        super().__init__()
        self.upstream_port = upstream_port

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        upstream_transport, upstream = await loop.create_connection(
            _Side, "127.0.0.1", self.upstream_port
        )
        upstream.peer = self.transport
        self.peer = upstream_transport
        for data in self.pending:
            upstream_transport.write(data)
        self.pending.clear()


async def serve(port: int, upstream_port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _ClientSide(upstream_port), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", type=int, required=True, help="upstream port")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = parser.parse_args()
    if args.loop == "uvloop":
        import uvloop

        uvloop.run(serve(args.port, args.upstream))
    else:
        asyncio.run(serve(args.port, args.upstream))


if __name__ == "__main__":
    main()
