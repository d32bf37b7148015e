"""The events feed (docs/events.md#the-feed): REST with a wait that the next event ends, the same
as Server-Sent Events resuming from Last-Event-ID, and MCP's ``wait_for_events``; each answers
only what the caller may read, and bad input is a readable 400."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from django.db import connections

from planner.live.event_feed import _feeds
from planner.live.event_waits import events_topic
from planner.live.hub import hub
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import connected, http, token_of
from tracker.models import ApiKey, Scope
from tracker.services.activity import Actor
from tracker.services.items import dependency_add
from tracker.services.keys import key_create
from tracker.services.work import claim_take

pytestmark = pytest.mark.django_db(transaction=True)

FEED = "/api/v1/projects/BAL/events/"


async def feed_waiting(project_id: int, watches: int = 1) -> None:
    """Until ``watches`` waiters joined the project's feed and it read for them and waits: what is
    written then wakes a wait, rather than being found by its first read."""
    for _ in range(500):
        feed = _feeds.get(project_id)
        settled = feed is not None and feed.loop is asyncio.get_running_loop() and feed.idle
        if settled and feed is not None and len(feed.watches) >= watches:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the feed of project {project_id} never waited")


def on_another_thread(work) -> None:
    """What another request does: write and commit on a thread of its own (and close its
    connection, as a request's end does: the test database is dropped after)."""

    def request() -> None:
        try:
            work()
        finally:
            connections.close_all()

    thread = threading.Thread(target=request)
    thread.start()
    thread.join()


async def listening(topic: str) -> None:
    for _ in range(500):
        if topic in hub.listeners:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"nobody listens to {topic}")


async def test_the_feed_answers_at_once_and_reads_on_from_next(project, owner, member, make_item):
    ticket = await sync(make_item)(title="Checkout", state="ready")
    client = await client_for(member)
    first = await client.get(FEED)
    assert first.status_code == 200
    body = first.json()
    assert ("item.runnable", ticket.key) in [(e["type"], e["target"]) for e in body["events"]]
    assert all(e["project"] == "BAL" for e in body["events"])

    again = await client.get(f"{FEED}?after={body['next']}")
    assert again.json() == {"events": [], "next": body["next"]}


async def test_a_wait_is_answered_by_a_claim_made_during_it(project, member, make_item):
    ticket = await sync(make_item)(title="Checkout", state="ready")
    client = await client_for(member)
    head = (await client.get(f"{FEED}?after=now")).json()["next"]
    waiting = asyncio.create_task(client.get(f"{FEED}?after={head}&types=claim.taken&wait=20"))
    await feed_waiting(project.pk)
    assert not waiting.done()

    on_another_thread(lambda: claim_take(actor=Actor(user=member), project=project, item=ticket))

    answered = await asyncio.wait_for(waiting, 10)
    assert answered.status_code == 200
    assert [(e["type"], e["target"]) for e in answered.json()["events"]] == [("claim.taken", ticket.key)]


async def test_an_event_of_another_type_does_not_end_the_wait(project, owner, member, make_item):
    blocker, blocked = await sync(make_item)(title="API"), await sync(make_item)(title="Checkout")
    client = await client_for(member)
    head = (await client.get(f"{FEED}?after=now")).json()["next"]
    waiting = asyncio.create_task(client.get(f"{FEED}?after={head}&types=claim.taken&wait=1"))
    await feed_waiting(project.pk)
    on_another_thread(lambda: depend(owner, blocker, blocked))
    answered = await waiting
    assert answered.json()["events"] == []
    assert answered.json()["next"] > head  # the item's event was read past, not again


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("after=abc", "after"),
        ("after=-1", "after"),
        ("types=claim.taken,bogus", "types"),
        ("wait=61", "wait"),
        ("limit=0", "limit"),
        ("after=1%00", "after"),
    ],
)
async def test_bad_input_is_a_readable_400(project, member, query, field):
    client = await client_for(member)
    answered = await client.get(f"{FEED}?{query}")
    assert answered.status_code == 400
    body = answered.json()
    assert body["error"]["code"] == "invalid"
    assert field in json.dumps(body)


async def test_who_cannot_read_the_project_reads_no_events(project, users, other_project):
    stranger = await client_for(users["stranger"])
    assert (await stranger.get(FEED)).status_code == 404
    viewer = await client_for(users["viewer"])
    assert (await viewer.get(FEED)).status_code == 200


async def test_a_key_reads_events_with_the_read_scope_only(project, member, make_item):
    await sync(make_item)(title="Checkout")
    ask_only, ask_secret = await sync(key_create)(user=member, name="asker", scopes=[Scope.ASK])
    reader, read_secret = await sync(key_create)(user=member, name="reader", scopes=[Scope.READ])
    async with http({"Authorization": f"Bearer {ask_secret}"}) as client:
        assert (await client.get(FEED)).status_code == 403
    async with http({"Authorization": f"Bearer {read_secret}"}) as client:
        assert (await client.get(FEED)).status_code == 200
    assert isinstance(reader, ApiKey)
    assert isinstance(ask_only, ApiKey)


class Stream:
    """An SSE response read as it is sent: the ASGI app called as a server calls it (httpx's ASGI
    transport would wait for the whole body, which a stream never ends)."""

    def __init__(self, path: str, headers: dict[str, str]) -> None:
        self.chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self.start: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        self.closed = asyncio.Event()
        path, _, query = path.partition("?")
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [
                (k.lower().encode(), v.encode()) for k, v in {"host": "testserver", **headers}.items()
            ],
            "client": ("127.0.0.1", 5000),
            "server": ("testserver", 80),
        }
        self.buffer = b""

    async def __aenter__(self) -> Stream:
        from ballet.asgi import application  # noqa: PLC0415

        requested = False

        async def receive() -> Any:
            nonlocal requested
            if not requested:  # the request's (empty) body, then nothing until the client leaves
                requested = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await self.closed.wait()
            return {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.start.set_result(message)
            elif message.get("body"):
                await self.chunks.put(message["body"])

        self.task = asyncio.create_task(application(self.scope, receive, send))
        await asyncio.wait_for(asyncio.shield(self.start), 10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.closed.set()
        await asyncio.wait_for(self.task, 10)

    @property
    def status(self) -> int:
        return self.start.result()["status"]

    async def events(self, count: int) -> list[dict]:
        """The next ``count`` events, parsed (comments and the retry field skipped)."""
        found: list[dict] = []
        while len(found) < count:
            while b"\n\n" not in self.buffer:
                self.buffer += await self.chunks.get()
            block, self.buffer = self.buffer.split(b"\n\n", 1)
            fields = dict(
                line.split(": ", 1)
                for line in block.decode().splitlines()
                if ": " in line and not line.startswith(":")
            )
            if "data" in fields:
                found.append(
                    {"id": fields.get("id"), "event": fields["event"], "data": json.loads(fields["data"])}
                )
        return found


def depend(owner, blocker, blocked) -> None:
    """A write whose commit wakes the stream and writes nothing after (an item's creation or edit
    indexes it for search as it commits)."""
    dependency_add(actor=Actor(user=owner), blocker=blocker, blocked=blocked)


async def test_the_stream_sends_events_as_they_come_and_resumes_from_last_event_id(
    project, owner, member, make_item
):
    api, checkout, receipt = [await sync(make_item)(title=title) for title in ("API", "Checkout", "Receipt")]
    await sync(depend)(owner, api, checkout)
    token = await sync(token_of)(member)
    auth = {"Authorization": f"Token {token}", "Accept": "text/event-stream"}  # as EventSource asks
    async with Stream(f"{FEED}stream/?after=0&types=item.updated", auth) as stream:
        assert stream.status == 200
        headers = {name.lower(): value for name, value in stream.start.result()["headers"]}
        assert headers[b"content-type"].startswith(b"text/event-stream")
        sent = await asyncio.wait_for(stream.events(1), 10)
        await feed_waiting(project.pk)
        on_another_thread(lambda: depend(owner, api, receipt))
        sent += await asyncio.wait_for(stream.events(1), 10)
    assert [e["data"]["data"]["blocked"] for e in sent] == [checkout.key, receipt.key]
    assert sent[0]["event"] == "item.updated"

    async with Stream(f"{FEED}stream/?types=item.updated", {**auth, "Last-Event-ID": sent[0]["id"]}) as again:
        resumed = await asyncio.wait_for(again.events(1), 10)
    assert resumed[0]["data"]["data"]["blocked"] == receipt.key


async def test_a_refusal_before_the_stream_starts_is_the_error_shape(project, users):
    token = await sync(token_of)(users["stranger"])
    headers = {"Authorization": f"Token {token}", "Accept": "text/event-stream"}
    async with Stream(f"{FEED}stream/", headers) as stream:
        assert stream.status == 404
        body = await asyncio.wait_for(stream.chunks.get(), 10)
    assert json.loads(body)["error"]["code"] == "not_found"


async def test_the_stream_ends_with_an_error_when_the_reader_is_removed(project, owner, member, make_item):
    blocker, blocked = await sync(make_item)(title="API"), await sync(make_item)(title="Secret plan")
    token = await sync(token_of)(member)
    async with Stream(f"{FEED}stream/?after=now", {"Authorization": f"Token {token}"}) as stream:
        await feed_waiting(project.pk)
        await sync(lambda: member.memberships.all().delete())()
        on_another_thread(lambda: depend(owner, blocker, blocked))
        text = b""
        while b"event: error" not in text:
            text += await asyncio.wait_for(stream.chunks.get(), 10)
    assert blocked.key.encode() not in text
    assert b"not_found" in text


async def test_mcp_waits_for_events_and_hears_a_claim(project, member, make_item):
    ticket = await sync(make_item)(title="Checkout", state="ready")
    token = await sync(token_of)(member)
    async with connected(token) as session:
        now = {"project": "BAL", "after": "now", "wait_seconds": 0}
        head = json.loads(text_of(await session.call_tool("wait_for_events", now)))
        assert head["events"] == []  # nothing after now
        waiting = asyncio.create_task(
            session.call_tool(
                "wait_for_events",
                {"project": "BAL", "after": head["next"], "types": ["claim.taken"], "wait_seconds": 20},
            )
        )
        await listening(events_topic(project.pk))
        on_another_thread(lambda: claim_take(actor=Actor(user=member), project=project, item=ticket))
        result = await asyncio.wait_for(waiting, 10)
    body = json.loads(text_of(result))
    assert not result.is_error
    assert [(e["type"], e["target"]) for e in body["events"]] == [("claim.taken", ticket.key)]


async def test_mcp_refuses_an_unknown_type_and_an_unreadable_project(project, member, other_project):
    token = await sync(token_of)(member)
    async with connected(token) as session:
        bad = await session.call_tool("wait_for_events", {"project": "BAL", "after": 0, "types": ["nope"]})
        hidden = await session.call_tool("wait_for_events", {"project": "OTH", "after": 0})
    assert bad.is_error
    assert "invalid_input" in text_of(bad)
    assert hidden.is_error
    assert "not found" in text_of(hidden).lower()


def text_of(result) -> str:
    return str(result.content[0].text)
