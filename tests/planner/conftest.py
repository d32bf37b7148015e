"""Fixtures for planner tests: a runner on a scripted model, and a session to drive."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.test import Client

from planner.domain.services.sessions import session_create
from planner.ground.bridge import on_db_threads
from planner.live.runner import Runner, runner
from planner.models import Session
from planner.web.routing import websocket_urlpatterns
from tests.fakes.rate_clock import hold_rate_clock
from tests.fakes.scripted import ScriptedGateway
from tracker.services.activity import Actor
from tracker.services.projects import project_update


@pytest.fixture
def scripted() -> Iterator[ScriptedGateway]:
    """The one scripted runner: the process's runner (which the WebSocket, REST and MCP call) on a
    scripted model, the model given to the test to script."""
    model = ScriptedGateway()
    previous = runner._gateway
    runner.gateway = model
    yield model
    runner.gateway = previous


@pytest.fixture
def model(scripted: ScriptedGateway) -> ScriptedGateway:
    """The scripted runner's model, for tests that call the runner directly (``planner``)."""
    return scripted


@pytest.fixture(autouse=True)
async def _turns_settled():
    """After ``turn_ended`` a turn's task still looks for work that waited for a free turn, and a
    first turn proposes its chat's title: a test that stops at that frame lets them finish before
    its database goes (SQLite refuses a flush while another connection reads or writes). Only
    here: the browser tests' Playwright runs an event loop of its own in their thread. The model
    clients the test's event loop opened are closed with it, as the worker closes its pass's:
    left open, each was collected at the interpreter's exit and logged as unclosed."""
    yield
    await runner.settle()
    await runner.close_clients()


@pytest.fixture
async def planner(scripted: ScriptedGateway) -> AsyncIterator[Runner]:
    """The scripted runner, called directly."""
    yield runner
    await runner.settle()  # what follows a test's last turn_ended


@pytest.fixture
def limits(settings, monkeypatch):
    """Set some limits for the test: ``limits(messages_per_minute=3)``."""
    hold_rate_clock(monkeypatch)

    def set_limits(**values):
        settings.BALLET_LIMITS = dataclasses.replace(settings.BALLET_LIMITS, **values)

    return set_limits


def ws_path(session) -> str:
    return f"/ws/planner/sessions/{session.pk}/"


async def open_socket(session, user) -> WebsocketCommunicator:
    """A planner socket of ``user`` (set in the scope, as after login), past its ``state`` frame."""
    ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), ws_path(session))
    ws.scope["user"] = user
    connected, _ = await ws.connect()
    assert connected
    assert (await ws.receive_json_from())["type"] == "state"
    return ws


async def frames_until(communicator, kind: str, limit: int = 200) -> list[dict]:
    """The frames up to and including the first of type ``kind``."""
    seen = []
    for _ in range(limit):
        frame = await communicator.receive_json_from(timeout=5)
        seen.append(frame)
        if frame["type"] == kind:
            return seen
    raise AssertionError(f"no {kind} frame in {seen}")


async def eventually(
    check: Callable[..., bool | Awaitable[bool]], seconds: float, *, every: float = 0.01
) -> None:
    """Wait until ``check()`` holds (its value, or what it returns awaited), looking every ``every``
    seconds; fail once ``seconds`` have passed."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        assert asyncio.get_running_loop().time() < deadline, f"still not so after {seconds} s"
        await asyncio.sleep(every)


def login_cookie(user) -> bytes:
    """A ``Cookie`` header of a fresh login session of ``user``, as the login form makes it."""
    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "tracker.trust.logins.HumanBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    return f"sessionid={store.session_key}".encode()


@pytest.fixture
def chat_project(project, owner):
    project_update(actor=Actor(user=owner), project=project, credential="sk-test")
    return project


@pytest.fixture
def session(chat_project, member):
    return session_create(user=member, project=chat_project)


async def drive(planner: Runner, session, user, text: str):
    """Send ``text`` and wait for the turn to end."""
    begin = await planner.send(session_id=session.pk, user=user, text=text)
    await planner.wait(session.pk)
    return begin


def sync(fn):
    """``fn`` run on the database threads, as the code under test runs its ORM work; the test's
    own setup, so what it returns is not checked for models (planner/ground/bridge.py)."""
    return on_db_threads(fn)


def chat_url(session: Session) -> str:
    return f"/projects/{session.project.key}/chat/{session.pk}/"


@pytest.fixture
def signed_in(client: Client):
    """The test client signed in as the user it is given (the pages' tests)."""

    def sign_in(user) -> Client:
        client.force_login(user)
        return client

    return sign_in
