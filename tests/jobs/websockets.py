"""Opening the portal's WebSockets in tests, as a logged-in browser would."""

from __future__ import annotations

from channels.testing import WebsocketCommunicator

from portal.asgi import application


async def open_socket(client, path: str, origin: bytes = b"http://localhost"):
    """``(communicator, connected, close_code)`` for ``path`` with ``client``'s session."""
    cookie = client.cookies["sessionid"].value
    communicator = WebsocketCommunicator(
        application,
        path,
        headers=[
            (b"cookie", f"sessionid={cookie}".encode()),
            (b"origin", origin),
            (b"host", b"localhost"),
        ],
    )
    connected, code = await communicator.connect(timeout=5)
    return communicator, connected, code
