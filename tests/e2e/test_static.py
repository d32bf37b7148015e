"""Static files from a real daphne with DEBUG off, configured as each mode is deployed: the
base settings embedded (``make run``, no collectstatic), the production settings in
production mode (the README's steps, collectstatic included)."""

from __future__ import annotations

import gzip
import re
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest

from tests.fakes.messages_api import FakeMessagesAPI
from tests.fakes.servers import Server, production_mode, served

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SOURCE_CSS = ROOT / "tracker" / "static" / "tracker" / "ballet.css"
# What the TLS-terminating proxy in front of production sets; the production settings redirect without it.
PROXIED = {"X-Forwarded-Proto": "https"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("static")
    settings = "ballet.settings.production" if production_mode() else "ballet.settings.base"
    with (
        FakeMessagesAPI() as fake,
        served(home, fake.base_url, extra_env={"DJANGO_SETTINGS_MODULE": settings}) as running,
    ):
        yield running


def get(server: Server, path: str, **headers: str) -> tuple[int, Message, bytes]:
    request = urllib.request.Request(server.url + path, headers={**PROXIED, **headers})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.headers, response.read()


def stylesheet(server: Server) -> str:
    status, _, body = get(server, "/accounts/login/")
    assert status == 200
    match = re.search(r'href="(/static/tracker/ballet[^"]*\.css)"', body.decode())
    assert match, body
    return match.group(1)


def test_a_page_links_its_stylesheet_and_the_server_serves_it(server):
    url = stylesheet(server)
    status, headers, body = get(server, url, **{"Accept-Encoding": "identity"})
    assert status == 200
    assert headers["Content-Type"].startswith("text/css")
    assert body == SOURCE_CSS.read_bytes()
    if production_mode():
        assert re.fullmatch(r"/static/tracker/ballet\.[0-9a-f]{12}\.css", url), url
        assert headers["Cache-Control"] == "max-age=315360000, public, immutable"
        assert headers["Strict-Transport-Security"]  # through SecurityMiddleware, before WhiteNoise
    else:
        assert url == "/static/tracker/ballet.css"
        assert headers["Cache-Control"] == "max-age=60, public"


def test_the_stylesheet_comes_compressed_to_a_browser_that_asks(server):
    status, headers, body = get(server, stylesheet(server), **{"Accept-Encoding": "gzip"})
    assert status == 200
    if production_mode():  # collectstatic wrote the compressed copies
        assert headers["Vary"] == "Accept-Encoding"
        assert headers["Content-Encoding"] == "gzip"
        body = gzip.decompress(body)
    else:  # the apps' folders hold none
        assert headers["Content-Encoding"] is None
    assert body == SOURCE_CSS.read_bytes()


@pytest.mark.parametrize(
    "name", ["planner/vendor/markdown-it.min.js", "planner/vendor/highlight.min.js", "planner/markdown.js"]
)
def test_the_chats_scripts_are_served(server, name):
    status, headers, body = get(server, f"/static/{name}", **{"Accept-Encoding": "identity"})
    assert status == 200
    assert headers["Content-Type"].startswith("text/javascript")
    assert body == (ROOT / "planner" / "static" / name).read_bytes()


@pytest.mark.parametrize("path", ["/api/schema/docs/", "/api/schema/redoc/"])
def test_the_api_doc_pages_name_only_this_server_and_it_serves_their_files(server, path):
    status, headers, body = get(server, path)
    assert status == 200
    assert "script-src 'self';" in headers["Content-Security-Policy"]
    html = body.decode()
    assert not re.search(r"https?://", html), html
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any(url.startswith("/static/drf_spectacular_sidecar/") for url in assets), assets
    for url in assets:
        status, headers, content = get(server, url.replace("&amp;", "&"))
        assert status == 200, url
        assert headers["Content-Type"].split(";")[0] in {
            "text/css",
            "text/javascript",
            "application/javascript",
            "image/png",
        }, url
        assert content, url
