"""A chat's changeset cards follow the decision: the ``changeset`` frame, the transcript (docs/protocol.md).

The decision is made where humans make it — the tracker's services, called by the admin and
by REST — on a thread of its own; the session's watchers hear of it through the hub.
"""

from __future__ import annotations

import logging

import pytest

from planner.live.hub import hub
from tests.planner.conftest import open_socket, sync
from tracker.models import Changeset, ChangesetStatus
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_apply, changeset_propose, changeset_reject
from tracker.services.items import item_update

pytestmark = pytest.mark.django_db(transaction=True)

CREATE = [{"op": "create", "kind": "ticket", "fields": {"title": "Export bookings as CSV"}}]


def propose(session, user, operations=CREATE, *, planner: bool = True) -> Changeset:
    actor = Actor(user=user, planner_session=session.pk if planner else None)
    return changeset_propose(
        actor=actor, project=session.project, title="Add CSV export", operations=operations
    )


async def test_applying_tells_every_watcher_of_the_session_at_once(session, member, owner):
    first = await open_socket(session, member)
    second = await open_socket(session, member)
    changeset = await sync(propose)(session, member)

    await sync(changeset_apply)(actor=Actor(user=owner), changeset=changeset)

    for ws in (first, second):
        frame = await ws.receive_json_from(timeout=5)
        assert frame["type"] == "changeset"
        assert {k: frame[k] for k in ("number", "status", "decided_by", "note", "reason")} == {
            "number": changeset.number,
            "status": "applied",
            "decided_by": owner.username,
            "note": "",
            "reason": "",
        }
        assert frame["decided_at"]
        await ws.disconnect()


async def test_a_rejection_carries_the_reviewers_note(session, member, owner):
    ws = await open_socket(session, member)
    changeset = await sync(propose)(session, member)

    await sync(changeset_reject)(actor=Actor(user=owner), changeset=changeset, note="Not this sprint.")

    frame = await ws.receive_json_from(timeout=5)
    assert (frame["type"], frame["status"], frame["note"]) == ("changeset", "rejected", "Not this sprint.")
    await ws.disconnect()


async def test_a_conflict_carries_its_reason(session, member, owner, make_item):
    item = await sync(make_item)(title="Sign-in page")
    update = [{"op": "update", "item": item.key, "base_version": item.version, "fields": {"title": "Login"}}]
    changeset = await sync(propose)(session, member, update)
    await sync(item_update)(actor=Actor(user=owner), item=item, fields={"title": "Log in"})
    ws = await open_socket(session, member)

    await sync(changeset_apply)(actor=Actor(user=owner), changeset=changeset)

    frame = await ws.receive_json_from(timeout=5)
    assert (frame["type"], frame["status"]) == ("changeset", "conflicted")
    assert "stale" in frame["reason"]
    await ws.disconnect()


async def test_only_the_proposing_sessions_watchers_hear_of_it(session, member, owner, chat_project):
    from planner.domain.services.sessions import session_create  # noqa: PLC0415

    other = await sync(session_create)(user=member, project=chat_project)
    watcher_of_other = await open_socket(other, member)
    by_hand = await sync(propose)(session, member, planner=False)  # proposed over REST, not by a chat
    proposed_here = await sync(propose)(session, member)

    await sync(changeset_apply)(actor=Actor(user=owner), changeset=by_hand)
    await sync(changeset_reject)(actor=Actor(user=owner), changeset=proposed_here)

    assert await watcher_of_other.receive_nothing(timeout=0.3)
    await watcher_of_other.disconnect()


async def test_a_decision_rolled_back_tells_nobody(session, member, owner, monkeypatch):
    ws = await open_socket(session, member)
    changeset = await sync(propose)(session, member)

    def refused(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr("tracker.services.changesets.activity_record", refused)
    with pytest.raises(RuntimeError):
        await sync(changeset_reject)(actor=Actor(user=owner), changeset=changeset, note="no")

    assert await ws.receive_nothing(timeout=0.3)
    assert (await sync(Changeset.objects.get)(pk=changeset.pk)).status == ChangesetStatus.PROPOSED
    await ws.disconnect()


def test_a_decision_stands_when_the_watchers_cannot_be_told(session, member, owner, monkeypatch, caplog):
    changeset = propose(session, member)

    async def unreachable(*args, **kwargs):
        raise ConnectionError("channel layer down")

    monkeypatch.setattr(hub.relay, "publish", unreachable)
    with caplog.at_level(logging.WARNING, logger="planner.live.hub"):
        changeset_apply(actor=Actor(user=owner), changeset=changeset)

    assert Changeset.objects.get(pk=changeset.pk).status == ChangesetStatus.APPLIED
    assert f"could not tell the watchers of session {session.pk}" in caplog.text


def test_the_transcript_shows_each_proposed_changeset_as_it_stands(session, member, owner, client_for):
    applied = propose(session, member)
    rejected = propose(session, member)
    waiting = propose(session, member)
    propose(session, member, planner=False)  # not this chat's
    changeset_apply(actor=Actor(user=owner), changeset=applied)
    changeset_reject(actor=Actor(user=owner), changeset=rejected, note="Later")

    body = client_for(member).get(f"/api/v1/planner/sessions/{session.pk}").json()

    states = {c["number"]: c for c in body["changesets"]}
    assert set(states) == {applied.number, rejected.number, waiting.number}
    assert states[applied.number]["status"] == "applied"
    assert states[applied.number]["decided_by"] == owner.username
    assert (states[rejected.number]["status"], states[rejected.number]["note"]) == ("rejected", "Later")
    assert states[waiting.number]["status"] == "proposed"
    assert states[waiting.number]["decided_by"] == ""
    assert states[waiting.number]["review_url"] == (
        f"/projects/{session.project.key}/changesets/{waiting.number}/"
    )


async def test_applying_over_rest_tells_the_watchers(session, member, owner, client_for):
    ws = await open_socket(session, member)
    changeset = await sync(propose)(session, member)
    url = f"/api/v1/projects/{session.project.key}/changesets/{changeset.number}/apply/"

    response = await sync(client_for(owner).post)(url)

    assert response.status_code == 200, response.content
    frame = await ws.receive_json_from(timeout=5)
    assert (frame["type"], frame["status"], frame["decided_by"]) == ("changeset", "applied", owner.username)
    await ws.disconnect()
