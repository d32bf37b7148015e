"""The feed's own route in front of Django (``planner/web/event_route.py``, docs/events.md#the-feed):
waits and streams with a key or token are answered there, the same as the REST views answer, and
the waiters of a project woken by one event each get what they may read of one shared read."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.db import transaction

from planner.web.event_route import waits_here
from tests.factories import MembershipFactory, ProjectFactory
from tests.planner.api_client import client_for
from tests.planner.conftest import sync
from tests.planner.mcp.conftest import http, token_of
from tests.planner.web.test_event_feed import FEED, Stream, depend, feed_waiting, on_another_thread
from tracker.models import Event, Role, Scope
from tracker.services.activity import Actor
from tracker.services.events import event_record
from tracker.services.keys import key_create
from tracker.services.work import claim_take

pytestmark = pytest.mark.django_db(transaction=True)


def scope_of(path: str, query: str, authorization: str | None = "Bearer x", method: str = "GET") -> dict:
    headers = [(b"authorization", authorization.encode())] if authorization else []
    return {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query.encode(),
        "headers": headers,
    }


def test_only_waits_and_streams_with_a_credential_are_routed_here():
    assert waits_here(scope_of(FEED, "after=3&wait=5")) is not None
    assert waits_here(scope_of(FEED, "wait=abc")) is not None  # refused here as REST refuses it
    assert waits_here(scope_of(f"{FEED}stream/", "")) is not None
    assert waits_here(scope_of(FEED, "after=3")) is None  # answered at once: Django's view
    assert waits_here(scope_of(FEED, "wait=0")) is None
    assert waits_here(scope_of(FEED, "wait=5", authorization=None)) is None  # a session: Django's
    assert waits_here(scope_of(FEED, "wait=5", authorization="Basic abc")) is None
    assert waits_here(scope_of(FEED, "wait=5", method="POST")) is None
    assert waits_here(scope_of("/api/v1/projects/BAL/items/", "wait=5")) is None


async def _keys(user, *scopes):
    _key, secret = await sync(key_create)(user=user, name="k", scopes=list(scopes))
    return {"Authorization": f"Bearer {secret}"}


async def test_refusals_are_those_of_the_rest_view(project, users, other_project):
    outsider = await sync(MembershipFactory)(project=other_project, role=Role.VIEWER)
    cases = [
        ({"Authorization": "Bearer ballet_nope.nope"}, 401, "authentication_failed"),
        (await _keys(users["member"], Scope.ASK), 403, "missing_scope"),
        ({"Authorization": f"Token {await sync(token_of)(users['stranger'])}"}, 404, "not_found"),
        ({"Authorization": f"Token {await sync(token_of)(outsider.user)}"}, 404, "not_found"),
    ]
    for headers, status, code in cases:
        async with http(headers) as client:
            for path in (f"{FEED}?wait=5", f"{FEED}stream/"):
                answered = await client.get(path)
                assert answered.status_code == status, (path, answered.text)
                assert answered.json()["error"]["code"] == code
                if status == 401:
                    assert answered.headers["www-authenticate"] == 'Bearer realm="ballet"'
    # The REST view, through Django, answers the same.
    stranger = await client_for(users["stranger"])
    rest = await stranger.get(f"{FEED}?wait=0")
    async with http({"Authorization": f"Token {await sync(token_of)(users['stranger'])}"}) as client:
        here = await client.get(f"{FEED}?wait=5")
    assert (here.status_code, here.json()) == (rest.status_code, rest.json())


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("after=abc&wait=5", "after"),
        ("after=-1&wait=5", "after"),
        ("types=claim.taken,bogus&wait=5", "types"),
        ("wait=61", "wait"),
        ("wait=abc", "wait"),
        ("wait=nan", "wait"),
        ("limit=0&wait=5", "limit"),
        ("after=1%00&wait=5", "after"),
    ],
)
async def test_bad_input_is_a_readable_400_naming_the_field(project, member, query, field):
    async with http({"Authorization": f"Token {await sync(token_of)(member)}"}) as client:
        for path in (FEED, f"{FEED}stream/"):
            answered = await client.get(f"{path}?{query}")
            assert answered.status_code == 400, (path, answered.text)
            body = answered.json()
            assert body["error"]["code"] == "invalid"
            assert field in body["error"]["fields"]


async def test_a_wait_is_answered_during_it_with_its_types_only(project, member, make_item):
    ticket = await sync(make_item)(title="Checkout", state="ready")
    headers = await _keys(member, Scope.READ)
    async with http(headers) as client:
        head = (await client.get(f"{FEED}?after=now")).json()["next"]
        everything = asyncio.create_task(client.get(f"{FEED}?after={head}&wait=20"))
        claims = asyncio.create_task(client.get(f"{FEED}?after={head}&types=claim.taken&wait=20"))
        comments = asyncio.create_task(client.get(f"{FEED}?after={head}&types=comment.added&wait=1"))
        await feed_waiting(project.pk, watches=3)  # each joins after its own first read
        assert not everything.done()
        assert not claims.done()
        on_another_thread(lambda: claim_take(actor=Actor(user=member), project=project, item=ticket))
        waits = asyncio.gather(everything, claims, comments)
        answered, claimed, commented = await asyncio.wait_for(waits, 10)
    assert answered.status_code == claimed.status_code == commented.status_code == 200
    assert "claim.taken" in [e["type"] for e in answered.json()["events"]]
    assert [(e["type"], e["target"]) for e in claimed.json()["events"]] == [("claim.taken", ticket.key)]
    assert commented.json()["events"] == []
    assert commented.json()["next"] >= claimed.json()["next"]  # read past, not again
    for name in ("x-content-type-options", "referrer-policy", "cross-origin-opener-policy"):
        assert name in answered.headers
    assert answered.headers["x-frame-options"] == "DENY"


def record_two(project, hidden, owner, member) -> None:
    """In one transaction: an event that needs ``hidden`` readable too, and one private to ``member``."""
    with transaction.atomic():
        shared = event_record(
            project=project,
            type="knowledge.created",
            actor="owner",
            on_behalf_of=owner,
            target="K-1",
            data={},
        )
        Event.objects.filter(pk=shared.pk).update(requires=[project.pk, hidden.pk])
        event_record(
            project=project,
            type="request.waiting",
            actor="planner",
            on_behalf_of=member,
            target="R-1",
            data={},
            private_to=member,
        )


async def test_one_event_wakes_waiters_of_different_rights_each_with_what_they_may_read(
    project, owner, member
):
    hidden = await sync(ProjectFactory)(organization=project.organization, key="HID", name="Hidden")
    await sync(MembershipFactory)(project=hidden, user=owner, role=Role.VIEWER)
    owner_auth = {"Authorization": f"Token {await sync(token_of)(owner)}"}
    member_auth = {"Authorization": f"Token {await sync(token_of)(member)}"}
    async with http(owner_auth) as owners, http(member_auth) as members:
        head = (await owners.get(f"{FEED}?after=now")).json()["next"]
        by_owner = asyncio.create_task(owners.get(f"{FEED}?after={head}&wait=20"))
        by_member = asyncio.create_task(members.get(f"{FEED}?after={head}&wait=20"))
        await feed_waiting(project.pk, watches=2)
        on_another_thread(lambda: record_two(project, hidden, owner, member))
        seen_by_owner, seen_by_member = await asyncio.wait_for(asyncio.gather(by_owner, by_member), 10)
    assert [e["target"] for e in seen_by_owner.json()["events"]] == ["K-1"]
    assert [e["target"] for e in seen_by_member.json()["events"]] == ["R-1"]
    assert seen_by_owner.json()["next"] == seen_by_member.json()["next"]


async def test_a_member_removed_while_waiting_is_refused(project, owner, member, make_item):
    blocker, blocked = await sync(make_item)(title="API"), await sync(make_item)(title="Secret plan")
    async with http(await _keys(member, Scope.READ)) as client:
        waiting = asyncio.create_task(client.get(f"{FEED}?after=now&wait=20"))
        await feed_waiting(project.pk)
        await sync(lambda: member.memberships.all().delete())()
        on_another_thread(lambda: depend(owner, blocker, blocked))
        answered = await asyncio.wait_for(waiting, 10)
    assert answered.status_code == 404
    assert answered.json()["error"]["code"] == "not_found"
    assert blocked.key not in answered.text


async def test_a_key_revoked_while_streaming_ends_the_stream(project, owner, member, make_item):
    blocker, blocked = await sync(make_item)(title="API"), await sync(make_item)(title="Checkout")
    key, secret = await sync(key_create)(user=member, name="k", scopes=[Scope.READ])
    async with Stream(f"{FEED}stream/?after=now", {"Authorization": f"Bearer {secret}"}) as stream:
        assert stream.status == 200
        headers = dict(stream.start.result()["headers"])
        assert headers[b"cache-control"] == b"no-cache"
        assert headers[b"x-accel-buffering"] == b"no"
        await feed_waiting(project.pk)
        await sync(lambda: type(key).objects.filter(pk=key.pk).update(revoked_at="2026-01-01T00:00:00Z"))()
        on_another_thread(lambda: depend(owner, blocker, blocked))
        text = b""
        while b"event: error" not in text:
            text += await asyncio.wait_for(stream.chunks.get(), 10)
    assert blocked.key.encode() not in text
    assert json.loads(text.split(b"event: error\ndata: ")[1].split(b"\n")[0])["error"]["code"] == (
        "authentication_failed"
    )


async def test_a_legacy_token_is_told_its_sunset(project, member):
    async with http({"Authorization": f"Token {await sync(token_of)(member)}"}) as client:
        answered = await client.get(f"{FEED}?after=now&wait=0.1")
    assert answered.status_code == 200
    assert answered.json()["events"] == []
    assert answered.headers["deprecation"] == "true"
    assert "sunset" in answered.headers


async def test_a_wrong_host_is_refused(project, member):
    headers = {"Authorization": f"Token {await sync(token_of)(member)}", "Host": "evil.example"}
    async with http(headers) as client:
        answered = await client.get(f"{FEED}?wait=5")
    assert answered.status_code == 400
