"""``ballet/healthcheck.py``, the image's probe: 0 when /healthz answers 200, 1 on anything else,
asking with a Host the server serves. Run as Docker runs it, a separate python on a real socket."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ballet.healthcheck import served_host

PROBE = Path(__file__).resolve().parent.parent / "ballet" / "healthcheck.py"


class Server:
    def __init__(self) -> None:
        self.status = 200
        self.hosts: list[str] = []


@pytest.fixture
def server() -> Iterator[tuple[Server, str]]:
    state = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.hosts.append(self.headers["Host"])
            body = json.dumps({"status": "ok" if state.status == 200 else "unavailable"}).encode()
            self.send_response(state.status if self.path == "/healthz" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{httpd.server_address[1]}/healthz"
    finally:
        httpd.shutdown()
        httpd.server_close()


def probe(url: str, allowed_hosts: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"DJANGO_ALLOWED_HOSTS": allowed_hosts} if allowed_hosts is not None else {}
    return subprocess.run(
        [sys.executable, "-I", str(PROBE), url],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_a_healthy_server_passes_and_is_asked_by_a_name_it_serves(server):
    state, url = server
    done = probe(url, "ballet.example.com,other.example.com")
    assert done.returncode == 0, done
    assert state.hosts == ["ballet.example.com"]
    assert '"status": "ok"' in done.stdout


@pytest.mark.parametrize("status", [503, 400, 500])
def test_any_other_answer_fails_and_says_what_came(server, status):
    state, url = server
    state.status = status
    done = probe(url)
    assert done.returncode == 1
    assert done.stdout.startswith(str(status))


def test_no_server_fails_without_a_traceback():
    done = probe("http://127.0.0.1:9/healthz")  # the discard port: nothing listens
    assert done.returncode == 1
    assert "no answer from http://127.0.0.1:9/healthz" in done.stdout
    assert "Traceback" not in done.stderr


def test_only_an_http_url_is_asked():
    done = probe("file:///etc/passwd")
    assert done.returncode == 1
    assert done.stdout == "not an http URL: file:///etc/passwd\n"


@pytest.mark.parametrize(
    ("allowed", "host"),
    [
        (None, "localhost"),
        ("", "localhost"),
        ("*", "localhost"),
        (".example.com", "example.com"),
        (" a.b , c", "a.b"),
    ],
)
def test_the_host_it_names(allowed, host):
    assert served_host(allowed) == host
