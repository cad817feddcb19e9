"""A webhook receiver, run by the tests as a process of its own: it checks each POST's
signature as the README tells a receiver to, answers 204 (401 when the signature is wrong),
and appends what it got to a file, one JSON line per request.

    python tests/notify/receiver.py PORT SECRET FILE
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, SECRET, OUT = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]


def verified(secret: bytes, body: bytes, header: str) -> bool:
    """The README's snippet: the body's HMAC-SHA256 with the shared secret."""
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        valid = verified(SECRET, body, self.headers.get("X-Hub-Signature-256", ""))
        record = {
            "valid": valid,
            "path": self.path,
            "host": self.headers.get("Host"),
            "event": self.headers.get("X-Portal-Event"),
            "delivery": self.headers.get("X-Portal-Delivery"),
            "contentType": self.headers.get("Content-Type"),
            "body": json.loads(body) if valid else None,
        }
        with open(OUT, "a") as out:
            out.write(json.dumps(record) + "\n")
        self.send_response(204 if valid else 401)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Receiver).serve_forever()
