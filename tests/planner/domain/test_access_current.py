"""Access is current (docs/trust.md): open sockets and running turns lose access with their human."""

from __future__ import annotations

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore

from ballet.asgi import application
from planner.domain.tools import ToolContext, call_tool
from planner.live import guard
from planner.live.hub import hub
from planner.live.runner import runner
from planner.models import Message, Session
from planner.web.routing import websocket_urlpatterns
from tests.factories import make_project
from tests.fakes.scripted import Hang, say
from tests.planner.conftest import frames_until, login_cookie, open_socket, sync, ws_path
from tracker.errors import NotFoundError
from tracker.services.activity import Actor
from tracker.services.members import invitation_accept, invitation_create
from tracker.services.projects import membership_remove, membership_set
from tracker.trust.permissions import PLANNER_CHAT, TRACKER_READ, access_scope, has_permission

pytestmark = pytest.mark.django_db(transaction=True)
router = URLRouter(websocket_urlpatterns)


@pytest.fixture(autouse=True)
def _quick_sweeps(monkeypatch):
    monkeypatch.setattr(guard, "SWEEP_SECONDS", 0.05)


async def closed_with(ws: WebsocketCommunicator) -> int:
    """The close code of ``ws``, skipping frames sent before it."""
    for _ in range(50):
        output = await ws.receive_output(timeout=5)
        if output["type"] == "websocket.close":
            return int(output["code"])
    raise AssertionError("the socket stayed open")


async def messages_of(session) -> int:
    return await sync(Message.objects.filter(session=session).count)()


@pytest.mark.parametrize(
    ("change", "code"),
    [("removed", 4404), ("demoted to viewer", 4403), ("deactivated", 4401)],
)
async def test_an_open_socket_is_closed_when_its_user_loses_access(session, member, owner, change, code):
    ws = await open_socket(session, member)
    actor = Actor(user=owner)
    if change == "removed":
        await sync(membership_remove)(actor=actor, project=session.project, username="member")
    elif change == "demoted to viewer":
        await sync(membership_set)(actor=actor, project=session.project, username="member", role="viewer")
    else:
        await sync(User.objects.filter(pk=member.pk).update)(is_active=False)
    assert await closed_with(ws) == code


async def test_a_frame_right_after_removal_starts_nothing(scripted, session, member, owner, monkeypatch):
    monkeypatch.setattr(guard, "SWEEP_SECONDS", 3600)  # the frame comes before any sweep
    ws = await open_socket(session, member)
    await sync(membership_remove)(actor=Actor(user=owner), project=session.project, username="member")
    await ws.send_json_to({"type": "message", "text": "Copy the plan for me"})
    assert await closed_with(ws) == 4404
    assert await messages_of(session) == 0
    assert scripted.requests == []


async def open_logged_in_socket(session, user) -> tuple[WebsocketCommunicator, str]:
    """A socket through the real middleware, logged in by cookie; and the login session's key."""
    cookie = await sync(login_cookie)(user)
    ws = WebsocketCommunicator(
        application, ws_path(session), headers=[(b"cookie", cookie), (b"origin", b"http://127.0.0.1:8000")]
    )
    connected, _ = await ws.connect()
    assert connected
    assert (await ws.receive_json_from())["type"] == "state"
    return ws, cookie.decode().removeprefix("sessionid=")


async def test_logging_out_closes_the_socket(session, member):
    ws, login_key = await open_logged_in_socket(session, member)
    await ws.send_json_to({"type": "stop"})  # a frame while logged in is acted on
    assert (await ws.receive_nothing(timeout=0.3)) is True
    await sync(SessionStore(login_key).flush)()  # what logging out does to the login session
    assert await closed_with(ws) == 4401


async def test_changing_the_password_elsewhere_closes_the_socket(session, member):
    ws, _ = await open_logged_in_socket(session, member)

    def change_password():
        user = User.objects.get(pk=member.pk)
        user.set_password("a-new-long-password")
        user.save()

    await sync(change_password)()
    assert await closed_with(ws) == 4401


async def test_a_running_turn_stops_when_its_human_is_removed(scripted, session, member, owner):
    hang = Hang(text="Reading everything")
    scripted.add(hang)
    await runner.send(session_id=session.pk, user=member, text="Go")
    await hang.started.wait()
    await sync(membership_remove)(actor=Actor(user=owner), project=session.project, username="member")
    await runner.wait(session.pk)
    state = await sync(lambda: Session.objects.get(pk=session.pk).state)()
    assert state == "idle"
    ended = await sync(
        lambda: list(session.events.filter(kind="turn_ended").values_list("data", flat=True))
    )()
    assert ended == [{"reason": "stopped"}]


def test_the_next_tool_call_of_a_removed_member_is_refused(session, member, owner, make_item):
    make_item(title="Confidential roadmap")
    context = ToolContext(user=member, project=session.project, session_id=session.pk)
    assert not call_tool("get_item", {"key": "BAL-1"}, context).is_error
    membership_remove(actor=Actor(user=owner), project=session.project, username="member")
    refused = call_tool("get_item", {"key": "BAL-1"}, context)  # the same user object, as in a turn
    assert refused.is_error
    assert refused.output["error"]["code"] == "permission_denied"
    assert "Confidential" not in refused.content


def test_a_tool_call_of_a_deactivated_human_is_refused(session, member, make_item):
    make_item(title="Confidential roadmap")
    context = ToolContext(user=member, project=session.project, session_id=session.pk)
    User.objects.filter(pk=member.pk).update(is_active=False)
    refused = call_tool("get_item", {"key": "BAL-1"}, context)
    assert refused.output["error"]["code"] == "permission_denied"


async def test_only_the_owner_sends_into_or_stops_a_session(scripted, session, member, users):
    boss = await sync(User.objects.create_superuser)("boss", "boss@example.com", "a-long-password")
    with pytest.raises(NotFoundError):
        await runner.send(session_id=session.pk, user=boss, text="Do as I say")
    with pytest.raises(NotFoundError):
        await runner.stop(session_id=session.pk, user=boss)
    assert await messages_of(session) == 0
    assert scripted.requests == []


async def test_nobody_but_the_owner_stops_a_turn_running_here(scripted, session, member):
    boss = await sync(User.objects.create_superuser)("boss", "boss@example.com", "a-long-password")
    hang = Hang(text="Thinking", then=say("Thinking it through."))
    scripted.add(hang)
    await runner.send(session_id=session.pk, user=member, text="Plan it")
    await hang.started.wait()
    with pytest.raises(NotFoundError):
        await runner.stop(session_id=session.pk, user=boss)
    hang.release.set()
    await runner.wait(session.pk)
    refreshed = await sync(Session.objects.get)(pk=session.pk)
    assert refreshed.state == "idle"
    assert await sync(lambda: Message.objects.filter(session=session).latest("seq").content)() == [
        {"type": "text", "text": "Thinking it through."}
    ]


def test_a_superuser_gets_404_sending_into_someone_elses_session_over_rest(client, session):
    boss = User.objects.create_superuser("boss", "boss@example.com", "a-long-password")
    client.force_login(boss)
    answer = client.post(
        f"/api/v1/planner/sessions/{session.pk}/messages/", {"text": "hi"}, content_type="application/json"
    )
    assert answer.status_code == 404
    assert Message.objects.filter(session=session).count() == 0


async def test_a_readmitted_member_chats_again(scripted, session, member, owner):
    """Removed, then invited again and accepting (nobody rejoins without accepting)."""
    await sync(membership_remove)(actor=Actor(user=owner), project=session.project, username="member")
    ws = WebsocketCommunicator(router, ws_path(session))
    ws.scope["user"] = member
    await ws.connect()
    assert await closed_with(ws) == 4404
    invitation = await sync(invitation_create)(
        actor=Actor(user=owner), project=session.project, username="member", role="member"
    )
    await sync(invitation_accept)(user=member, invitation=invitation)
    scripted.add(say("Welcome back."))
    ws = await open_socket(session, member)  # the same user object: nothing cached on it
    await ws.send_json_to({"type": "message", "text": "Hello again"})
    assert (await frames_until(ws, "turn_ended"))[-1]["reason"] == "completed"
    await ws.disconnect()


def test_one_access_read_per_scope(member, project, django_assert_num_queries):
    with access_scope(), django_assert_num_queries(1):
        for _ in range(5):
            assert has_permission(member, project, TRACKER_READ)
            assert has_permission(member, project, PLANNER_CHAT)
    with django_assert_num_queries(2):  # outside a scope nothing is kept
        has_permission(member, project, TRACKER_READ)
        has_permission(member, project, TRACKER_READ)


async def test_a_revocation_that_fails_does_not_keep_others_open(session, member, owner):
    revoked: list[int] = []

    def broken(code):
        raise RuntimeError("the socket is gone")

    first = guard.Grant(member.pk, session.project_id, None, broken)
    second = guard.Grant(member.pk, session.project_id, None, revoked.append)
    hub.guard.hold(first)
    hub.guard.hold(second)
    await sync(membership_remove)(actor=Actor(user=owner), project=session.project, username="member")
    await hub.guard.sweep()
    assert revoked == [4404]
    assert not hub.guard.holds(first)
    assert not hub.guard.holds(second)


def test_a_sweep_judges_alike_grants_once_and_each_different_one_on_its_own(session, member):
    """Hundreds of sockets of one user in one login are checked as one (planner/live/guard.py),
    and a grant that differs in its project or its login is still judged by itself."""
    kept = login_cookie(member).decode().removeprefix("sessionid=")
    flushed = login_cookie(member).decode().removeprefix("sessionid=")
    SessionStore(flushed).flush()  # logged out in that browser
    other = make_project(organization=session.project.organization)  # the member is not in it

    def grant(project_id: int, login_key: str | None) -> guard.Grant:
        return guard.Grant(member.pk, project_id, login_key, lambda code: None)

    tabs = [grant(session.project_id, kept) for _ in range(200)]
    turn = grant(session.project_id, None)
    elsewhere = grant(other.pk, kept)
    logged_out = grant(session.project_id, flushed)
    refused = guard.refusals([*tabs, turn, elsewhere, logged_out])
    assert refused == {elsewhere: guard.NOT_FOUND, logged_out: guard.NOT_LOGGED_IN}
