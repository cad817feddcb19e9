"""``python -m portal.serve``: uvicorn's command line, with Nagle's algorithm off on every
connection.

With ``--workers N`` uvicorn binds the listening socket itself, with ``proto`` 0, and asyncio
turns TCP_NODELAY on only for accepted sockets whose ``proto`` is IPPROTO_TCP (uvicorn issue
#3149, open). Every request on a kept-alive connection after its first then waited for the
client's delayed ACK: 44-52 ms for ``GET /api/v2/info`` against 3.5 ms on a fresh connection
(``make run`` on 2 CPUs, so 2 workers), and a job polled through the API finished ~90 ms later
than it did. Linux copies TCP_NODELAY from a listening socket to each socket it accepts, so it
is set on the listening socket here; remove this module once uvicorn sets it.
"""

from __future__ import annotations

import socket
import sys

from uvicorn.config import Config
from uvicorn.main import main

_bind_socket = Config.bind_socket


def bind_socket(config: Config) -> socket.socket:
    sock = _bind_socket(config)
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


Config.bind_socket = bind_socket  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
