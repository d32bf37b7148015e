"""A webhook receiver for tests: an HTTP server on 127.0.0.1, in a thread, that records every
request, checks its Standard Webhooks signature when it knows the secret, and answers as the test
scripts it (a status per request, a redirect, a hang until the test lets it go)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError

WAIT = 15.0  # seconds a test waits for a request before it gives up


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes
    verified: bool | None  # None: no secret to check it with

    @property
    def msg_id(self) -> str:
        return self.headers.get("webhook-id", "")


@dataclass
class Reply:
    status: int = 204
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


Script = Callable[["Receiver", Received], Reply]


def always(status: int, body: bytes = b"") -> Script:
    return lambda _receiver, _request: Reply(status, body=body)


class Receiver:
    """Requests to :attr:`url` are recorded in :attr:`received`, answered by ``script``."""

    def __init__(self, script: Script | None = None, secret: str | None = None) -> None:
        self.script = script or always(204)
        self.secret = secret
        self.received: list[Received] = []
        self._arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {name.lower(): value for name, value in self.headers.items()}
                request = Received(self.path, headers, body, receiver.verified(body, headers))
                with receiver._arrived:
                    receiver.received.append(request)
                    receiver._arrived.notify_all()
                reply = receiver.script(receiver, request)
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def verified(self, body: bytes, headers: dict[str, str]) -> bool | None:
        if self.secret is None:
            return None
        try:
            Webhook(self.secret).verify(body, headers)
        except WebhookVerificationError:
            return False
        return True

    def wait_for(self, count: int, within: float = WAIT) -> bool:
        """Whether ``count`` requests arrived, waiting up to ``within`` seconds for them."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.received) >= count, timeout=within)

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def receiving(script: Script | None = None, secret: str | None = None) -> Iterator[Receiver]:
    receiver = Receiver(script, secret).start()
    try:
        yield receiver
    finally:
        receiver.close()
