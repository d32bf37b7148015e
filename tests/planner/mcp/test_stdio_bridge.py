"""The stdio bridge (``manage.py mcp_stdio``) translating messages to HTTP and back, against a tiny
MCP server over HTTP in this process: a client writes lines to the bridge's input and reads its
output as Claude Desktop does, through pipes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from planner.mcp_server.stdio_bridge import bridge_run

ROOT = Path(__file__).resolve().parents[3]
KEY = "ballet_good-key"
# What Ballet answers a POST without a valid key (planner/mcp_server/app.py: refuse).
NOT_AUTHENTICATED = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": "Invalid API key.", "data": {"code": "invalid_key"}},
}
TOOL = {
    "name": "list_runnable",
    "inputSchema": {
        "type": "object",
        "properties": {"project": {"type": "string", "x-mcp-header": "Project"}},
    },
}


def request(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}


@dataclass
class Seen:
    method: str
    headers: dict[str, str]


@dataclass
class FakeMcp:
    """An MCP server over HTTP answering by method, the refusals Ballet's are among them; it keeps
    what it was sent."""

    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def answer(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, str, bytes]:
        method = body.get("method", "")
        self.seen.append(Seen(method, headers))
        if headers.get("authorization") != f"Bearer {KEY}":
            return 401, "application/json", json.dumps(NOT_AUTHENTICATED).encode()
        result: dict[str, dict[str, Any]] = {
            "initialize": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "serverInfo": {"name": "fake"},
            },
            "tools/list": {"tools": [TOOL]},
            "tools/call": {"content": [], "isError": False},
        }
        if method.startswith("notifications/"):
            return 202, "", b""
        if method in result:
            return 200, "application/json", _message(body["id"], result[method])
        return self.trouble(method, body)

    def trouble(self, method: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
        if method == "limited":
            refusal = {
                "code": -32600,
                "message": "Too many requests: 60 a minute.",
                "data": {"code": "throttled"},
            }
            return (
                429,
                "application/json",
                json.dumps({"jsonrpc": "2.0", "id": None, "error": refusal}).encode(),
            )
        if method == "broken":
            return 502, "text/html", b"<html><body>Bad gateway</body></html>"
        if method == "streamed":
            progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
            events = [json.dumps(progress).encode(), _message(body["id"], {"streamed": True})]
            return 200, "text/event-stream", b"".join(b"event: message\ndata: " + e + b"\n\n" for e in events)
        if method == "held":
            self.release.wait(60)
            return 200, "application/json", _message(body["id"], {})
        return 404, "text/plain", b"no such thing"


def _message(request_id: Any, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


@pytest.fixture
def fake() -> Iterator[FakeMcp]:
    server = FakeMcp()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            status, kind, payload = server.answer(body, {k.lower(): v for k, v in self.headers.items()})
            self.send_response(status)
            if kind:
                self.send_header("content-type", kind)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.release.set()
    httpd.shutdown()
    httpd.server_close()


class Bridged:
    """A bridge running on pipes, as a client starts one: lines in, lines out."""

    def __init__(self, url: str, key: str | None) -> None:
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        self.input = os.fdopen(in_write, "wb", buffering=0)
        self.output = os.fdopen(out_read, "rb")
        self.failure: BaseException | None = None
        stdin, stdout = os.fdopen(in_read, "rb"), os.fdopen(out_write, "wb")

        def run() -> None:
            try:
                bridge_run(url=url, key=key, stdin=stdin, stdout=stdout)
            except BaseException as exc:  # the test reports it
                self.failure = exc
            finally:
                stdout.close()
                stdin.close()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def send(self, message: dict[str, Any] | bytes) -> None:
        self.input.write(message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n")

    def receive(self) -> dict[str, Any]:
        line = self.output.readline()
        assert line.endswith(b"\n"), f"the bridge ended its output: {self.failure!r}"
        return json.loads(line)

    def close(self) -> list[dict[str, Any]]:
        """End the input; what the bridge wrote until it ended."""
        self.input.close()
        rest = [json.loads(line) for line in self.output]
        self.thread.join(60)
        assert not self.thread.is_alive(), "the bridge did not end with its input"
        assert self.failure is None, self.failure
        return rest


@pytest.fixture
def bridged(fake: FakeMcp) -> Iterator[Callable[..., Bridged]]:
    started: list[Bridged] = []

    def start(*, key: str | None = KEY, url: str | None = None) -> Bridged:
        started.append(Bridged(url or fake.url, key))
        return started[-1]

    yield start
    for bridge in started:
        if not bridge.input.closed:
            bridge.close()


def test_requests_carry_the_key_and_answers_come_back_one_a_line(fake, bridged):
    bridge = bridged()
    bridge.send(request(1, "initialize", {"protocolVersion": "2025-11-25"}))
    initialized = bridge.receive()
    bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    bridge.send(request(2, "tools/list"))
    listed = bridge.receive()

    assert bridge.close() == []
    assert initialized["id"] == 1
    assert initialized["result"]["protocolVersion"] == "2025-11-25"
    assert listed == {"jsonrpc": "2.0", "id": 2, "result": {"tools": [TOOL]}}
    # The notification and the request after it go out side by side: either may arrive first.
    methods = [seen.method for seen in fake.seen]
    assert (methods[0], sorted(methods[1:])) == ("initialize", ["notifications/initialized", "tools/list"])
    first, *later = (seen.headers for seen in fake.seen)
    assert first["authorization"] == f"Bearer {KEY}"
    assert first["accept"] == "application/json, text/event-stream"
    assert first["content-type"] == "application/json"
    assert "mcp-protocol-version" not in first
    assert [h["mcp-protocol-version"] for h in later] == ["2025-11-25", "2025-11-25"]


def test_a_bad_key_is_a_readable_error_of_that_request(fake, bridged):
    bridge = bridged(key="ballet_wrong")
    bridge.send(request(7, "tools/list"))
    refused = bridge.receive()

    assert bridge.close() == []
    assert refused["id"] == 7
    assert refused["error"]["code"] == -32600
    assert refused["error"]["message"] == (
        "Ballet refused the request (HTTP 401): Invalid API key."
        " Check BALLET_KEY in this MCP server's configuration."
    )
    assert refused["error"]["data"] == {"code": "invalid_key", "http_status": 401}


def test_refusals_answer_their_request_and_the_bridge_goes_on(fake, bridged):
    bridge = bridged()
    bridge.send(request(1, "limited"))
    limited = bridge.receive()
    bridge.send(request(2, "broken"))
    broken = bridge.receive()
    bridge.send(request(3, "tools/list"))
    listed = bridge.receive()

    assert bridge.close() == []
    assert limited["id"] == 1
    assert (
        limited["error"]["message"]
        == "Ballet refused the request (HTTP 429): Too many requests: 60 a minute."
    )
    assert limited["error"]["data"] == {"code": "throttled", "http_status": 429}
    assert broken["id"] == 2
    assert broken["error"] == {
        "code": -32603,
        "message": "Ballet refused the request (HTTP 502): Bad Gateway",
        "data": {"http_status": 502},
    }
    assert listed["result"] == {"tools": [TOOL]}


def test_a_line_that_is_not_json_is_a_parse_error_and_the_bridge_goes_on(fake, bridged):
    bridge = bridged()
    bridge.send(b"{not json\n")
    unparsed = bridge.receive()
    bridge.send(b"[1, 2]\n")
    no_message = bridge.receive()
    bridge.send(request(1, "tools/list"))
    listed = bridge.receive()

    assert bridge.close() == []
    assert unparsed["id"] is None
    assert unparsed["error"]["code"] == -32700
    assert unparsed["error"]["message"].startswith("Parse error: a line that is not JSON")
    assert (no_message["id"], no_message["error"]["code"]) == (None, -32600)
    assert listed["id"] == 1
    assert [seen.method for seen in fake.seen] == ["tools/list"]


def test_a_notification_writes_nothing(fake, bridged):
    bridge = bridged()
    bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    assert bridge.close() == []
    assert [seen.method for seen in fake.seen] == ["notifications/initialized"]


def test_an_sse_answer_is_relayed_message_by_message(fake, bridged):
    bridge = bridged()
    bridge.send(request(4, "streamed"))
    progress = bridge.receive()
    answer = bridge.receive()

    assert bridge.close() == []
    assert progress == {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    assert answer == {"jsonrpc": "2.0", "id": 4, "result": {"streamed": True}}


def test_a_server_that_cannot_be_reached_is_an_error_of_that_request(bridged):
    closed_port = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{closed_port.server_address[1]}/mcp"
    closed_port.server_close()
    bridge = bridged(url=url)
    bridge.send(request(1, "tools/list"))
    unreachable = bridge.receive()

    assert bridge.close() == []
    assert unreachable["id"] == 1
    assert unreachable["error"]["code"] == -32000
    assert unreachable["error"]["message"].startswith(f"Could not reach Ballet at {url}: ")


def test_a_cancelled_request_is_never_answered(fake, bridged):
    bridge = bridged()
    bridge.send(request(1, "held"))
    bridge.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    bridge.send(request(2, "tools/list"))
    listed = bridge.receive()

    assert bridge.close() == []
    assert listed["id"] == 2
    assert "notifications/cancelled" in [seen.method for seen in fake.seen]


def test_the_2026_envelope_carries_the_headers_that_mirror_its_body(fake, bridged):
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    bridge = bridged()
    bridge.send(request(1, "tools/list", meta))
    bridge.receive()
    bridge.send(request(2, "tools/call", {**meta, "name": "list_runnable", "arguments": {"project": "DEMO"}}))
    called = bridge.receive()
    bridge.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    assert bridge.close() == []
    assert called["id"] == 2
    assert [seen.method for seen in fake.seen] == [
        "tools/list",
        "tools/call",
    ]  # that wire has no notifications
    headers = fake.seen[1].headers
    assert headers["mcp-protocol-version"] == "2026-07-28"
    assert (headers["mcp-method"], headers["mcp-name"]) == ("tools/call", "list_runnable")
    assert headers["mcp-param-project"] == "DEMO"


def _command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "BALLET_KEY"} | env
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "mcp_stdio", *args],
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_command_without_a_key_says_so_and_exits_non_zero(fake):
    ran = _command({}, "--url", fake.url)

    assert ran.returncode == 1
    assert ran.stdout == ""
    assert "BALLET_KEY is not set" in ran.stderr
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ftp://ballet.example.com/mcp", "is not an http(s) URL"),
        ("https://ballet.example.com:port/mcp", "is not a URL (Port could not be cast"),
        ("ballet.example.com/mcp", "is not an http(s) URL"),
    ],
)
def test_a_bad_url_is_refused_before_anything_is_read(monkeypatch, url, said):
    monkeypatch.setenv("BALLET_KEY", KEY)

    with pytest.raises(CommandError, match=re.escape(said)):
        call_command("mcp_stdio", "--url", url)


def test_the_command_ends_with_its_input_exit_0(fake):
    ran = _command({"BALLET_KEY": KEY}, "--url", fake.url)

    assert (ran.returncode, ran.stdout) == (0, "")
