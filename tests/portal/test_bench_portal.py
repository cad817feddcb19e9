"""What ``bench/_portal.py`` says when a run fails: a bench that stops on a bare JSON error
and deletes the portal's log with its scratch directory leaves nothing to find the cause by."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench._portal import Api, show_log_on_failure


class ServerError(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(500)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", "27")
        self.end_headers()
        self.wfile.write(b"<h1>Server Error (500)</h1>")

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def failing_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ServerError)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_an_answer_that_is_not_json_is_named_with_its_status_and_body(failing_server):
    with pytest.raises(RuntimeError) as failed:
        Api(failing_server).call("POST", "/api/v2/jobs", "x", "text/yaml")
    assert "POST /api/v2/jobs: 500" in str(failed.value)
    assert "Server Error (500)" in str(failed.value)


def test_the_portals_log_is_shown_when_the_run_fails_and_only_then(tmp_path: Path, capsys):
    (tmp_path / "runportal.log").write_text("".join(f"line {n}\n" for n in range(100)))

    def run(failure: type[BaseException] | None) -> str:
        with contextlib.suppress(BaseException), contextlib.ExitStack() as stack:
            stack.push(functools.partial(show_log_on_failure, tmp_path))
            if failure is not None:
                raise failure("the run failed")
        return capsys.readouterr().err

    shown = run(RuntimeError)
    assert "line 99" in shown and "line 40" in shown and "line 39" not in shown
    assert run(None) == ""
    assert run(KeyboardInterrupt) == ""
