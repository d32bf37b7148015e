"""A real Ballet server on a fake Messages API, and a Chromium logged in to it.

The server starts once per module (about ten seconds); each test opens its own
chat. The fake model answers by script: a test registers the replies for a
keyword with :func:`Script.on`, and a request is answered from the script of
the last human message that names a keyword, one reply per model call. A reply
may also be a function of the request (to answer with what the request says).
The title the planner proposes after a chat's first turn (``planner/live/titles.py``) is
answered from :meth:`Script.titled` for the keyword the first message names, else
with the fake's default title.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from tests.fakes.messages_api import FakeMessagesAPI, Reply, TextReply, message_text
from tests.fakes.servers import PASSWORD, Server, served

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
VIEWPORTS = {
    "wide": {"width": 1280, "height": 900},
    "375": {"width": 375, "height": 740},
}


ScriptedReply = Reply | Callable[[dict[str, Any]], Reply]


class Script:
    """Replies by keyword: the n-th model call after a human message gets its n-th reply."""

    def __init__(self) -> None:
        self.replies: dict[str, list[ScriptedReply]] = {}
        self.titles: dict[str, Reply] = {}
        self.lock = threading.Lock()

    def titled(self, keyword: str, reply: Reply) -> str:
        """Answer the title request of a chat whose first message names ``keyword`` with ``reply``."""
        with self.lock:
            self.titles[keyword] = reply
        return keyword

    def title(self, request: dict[str, Any]) -> Reply | None:
        text = " ".join(message_text(m) for m in request.get("messages", []))
        with self.lock:
            return next((reply for keyword, reply in self.titles.items() if keyword in text), None)

    def on(self, keyword: str, *replies: ScriptedReply) -> str:
        with self.lock:
            self.replies[keyword] = list(replies)
        return keyword

    def __call__(self, request: dict[str, Any]) -> Reply | None:
        calls_since = 0
        for message in reversed(request.get("messages", [])):
            if message.get("role") == "assistant":
                calls_since += 1
                continue
            text = message_text(message)
            if text.lstrip().startswith("<workspace-changes>"):
                continue  # change notes quote what other tests wrote, keywords and all
            with self.lock:
                for keyword, replies in self.replies.items():
                    if keyword in text:
                        reply = replies[min(calls_since, len(replies) - 1)]
                        return reply(request) if callable(reply) else reply
        return TextReply("(unscripted)")


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def fake_api(script: Script) -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(responder=script, title_responder=script.title) as fake:
        yield fake


@pytest.fixture(scope="module")
def server(fake_api: FakeMessagesAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with served(tmp_path_factory.mktemp("live"), fake_api.base_url) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def signed_in(browser: Any, server: Server, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The storage state (cookies) of ``demo`` signed in through the login form."""
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    page.goto("/accounts/login/?next=/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{server.url}/")
    path = str(tmp_path_factory.mktemp("state") / "demo.json")
    context.storage_state(path=path)
    context.close()
    return path


@pytest.fixture
def page(browser: Any, server: Server, signed_in: str) -> Iterator[Any]:
    """A fresh tab of ``demo``; any page error fails the test."""
    context = browser.new_context(base_url=server.url, storage_state=signed_in)
    context.set_default_timeout(10_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield tab
    context.close()
    assert not errors, errors


def shell(server: Server, code: str) -> str:
    """The last line ``code`` printed in ``manage.py shell`` on the server's deployment."""
    return server.deployment.manage("shell", "-c", code).strip().splitlines()[-1]


def agent_key(server: Server) -> str:
    """A fresh API key of the demo's worker ``agent``, a member of DEMO, with the scopes the seed
    gives its own (whose key was printed once and cannot be read back)."""
    return shell(
        server,
        "from django.contrib.auth.models import User; "
        "from planner.management.commands.seed_demo import AGENT_SCOPES; "
        "from tracker.services.keys import key_create; "
        "agent = User.objects.get(username='agent'); "
        "print(key_create(user=agent, name='live tests', scopes=AGENT_SCOPES)[1])",
    )


@pytest.fixture(scope="module")
def agent_token(server: Server) -> str:
    """:func:`agent_key`, once for the module's server."""
    return agent_key(server)


@pytest.fixture(params=[("wide", "light"), ("375", "light"), ("wide", "dark")], ids="-".join)
def tab(request: pytest.FixtureRequest, browser: Any, server: Server, signed_in: str) -> Iterator[Any]:
    """A signed-in page, wide and light, at 375 px, and wide and dark; no script error allowed."""
    yield from _tab(request.param, browser, server, signed_in)


@pytest.fixture(params=[("wide", "light"), ("wide", "dark")], ids="-".join)
def wide_tab(request: pytest.FixtureRequest, browser: Any, server: Server, signed_in: str) -> Iterator[Any]:
    """:func:`tab`, wide only: for pages the phone test checks at 375 px, light and dark."""
    yield from _tab(request.param, browser, server, signed_in)


def _tab(variant: tuple[str, str], browser: Any, server: Server, signed_in: str) -> Iterator[Any]:
    width, scheme = variant
    context = browser.new_context(
        base_url=server.url, storage_state=signed_in, viewport=VIEWPORTS[width], color_scheme=scheme
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield page
    context.close()
    assert not errors, errors
