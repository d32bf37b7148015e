"""What people are told, live (docs/events.md#people): the header's count follows a notification
committed on another thread at once (``GET /inbox/stream/``, woken through the hub, no poll), and the
embedded server's mail sender sends a mail once a commit queues it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, MutableMapping
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client

from ballet import lifespan
from ballet.asgi import application
from planner.ground.bridge import db
from planner.live.hub import hub
from planner.live.inbox_waits import inbox_follow, inbox_topic
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import http
from tracker.mail import MailSender, mail_sender
from tracker.models import Mail
from tracker.services.activity import Actor
from tracker.services.comments import comment_add
from tracker.services.notifications import notify_modes_set

# The bridge's threads check their connections now and then, as they do for every wait.
pytestmark = pytest.mark.django_db(transaction=True)


def on_another_thread(work: Callable[[], Any]) -> None:
    """What another request does: write and commit on a thread of its own (and let its connection go)."""

    def run() -> None:
        try:
            work()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def session_cookie(user: Any) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


class Stream:
    """A GET on the ASGI application whose answer is read as it comes, as a browser reads a stream
    (httpx's ASGI transport hands an answer over only once it ended)."""

    def __init__(self, path: str, headers: list[tuple[bytes, bytes]]) -> None:
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"testserver"), *headers],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        self.sent: asyncio.Queue[MutableMapping[str, Any]] = asyncio.Queue()
        self.left = asyncio.Event()
        self.asked = False

    async def receive(self) -> dict[str, Any]:
        if not self.asked:
            self.asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        await self.sent.put(message)

    async def __aenter__(self) -> Stream:
        self.task = asyncio.create_task(application(self.scope, self.receive, self.send))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.left.set()  # the browser goes away: the server stops its stream
        await asyncio.wait_for(self.task, 10)

    async def start(self) -> MutableMapping[str, Any]:
        return await asyncio.wait_for(self.sent.get(), 10)

    async def counts(self, count: int) -> list[int]:
        """The first ``count`` counts it sends."""
        counts: list[int] = []
        while len(counts) < count:
            message = await self.sent.get()
            for block in message.get("body", b"").decode().split("\n\n"):
                if block.startswith("event: count\ndata: "):
                    counts.append(int(block.removeprefix("event: count\ndata: ")))
        return counts


async def test_the_badge_hears_a_mention_committed_on_another_thread(users, make_item):
    owner, member = users["owner"], users["member"]
    ticket = await sync(make_item)(title="Login form")
    cookie = await sync(session_cookie)(owner)
    # Mail in the digest: the server's sender has nothing to send meanwhile (its own test is below).
    await sync(notify_modes_set)(user=owner, modes={"mention": "digest"})
    headers = [(b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode())]
    async with Stream("/inbox/stream/", headers) as stream:
        start = await stream.start()
        assert start["status"] == 200
        assert (b"Content-Type", b"text/event-stream") in start["headers"]
        # The first count is read once the stream listens: what commits from now on wakes it.
        assert await asyncio.wait_for(stream.counts(1), 10) == [0]
        assert inbox_topic(owner.pk) in hub.listeners
        on_another_thread(lambda: comment_add(actor=Actor(user=member), item=ticket, body="@owner look"))
        assert await asyncio.wait_for(stream.counts(1), 10) == [1]

    assert inbox_topic(owner.pk) not in hub.listeners  # the stream ended with its reader


async def test_the_badge_stream_needs_a_session():
    async with http() as client:
        answer = await client.get("/inbox/stream/")
    assert answer.status_code == 403


async def test_a_quiet_stream_keeps_its_connection_alive_and_ends():
    counts = inbox_follow(user_id=0, count=lambda: 3, idle_seconds=0.01, for_seconds=0.2)
    seen = [count async for count in counts]

    assert seen[0] == 3
    assert None in seen[1:]  # keep-alives, no count: nothing changed
    assert set(seen[1:]) == {None}


async def test_the_embedded_server_sends_a_mail_once_a_commit_queues_it(users, make_item, mailoutbox):
    if settings.PRODUCTION_MODE:
        assert not mail_sender.started  # production sends with Celery (tracker.send_mail)
        return
    assert mail_sender.started
    assert lifespan.mail_sender is mail_sender
    ticket = await sync(make_item)(title="Login form")

    on_another_thread(lambda: comment_add(actor=Actor(user=users["member"]), item=ticket, body="@owner look"))

    sent = sync(Mail.objects.filter(status="sent").count)  # read beside the sender, on its threads
    for _ in range(1000):  # woken by the commit: no pass is due for another 30 s
        if await sent() == 1:
            break
        await asyncio.sleep(0.01)
    assert [message.to for message in mailoutbox] == [["owner@example.com"]]
    assert await sent() == 1


async def test_a_senders_pass_sends_what_waits(users, mailoutbox):
    # Queued by hand: a commit that queues it wakes the server's own sender, which would send it first.
    await sync(Mail.objects.create)(
        user=users["owner"], kind="mention", mode="now", subject="Hi", body="Hello\n"
    )
    sender = MailSender(interval=3600)
    await sender.start(run=db)
    try:
        assert await sender.send() == 1
        assert await sender.send() == 0
    finally:
        await sender.stop()
    assert not sender.started
    assert len(mailoutbox) == 1
