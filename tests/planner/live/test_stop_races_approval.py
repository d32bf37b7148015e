"""Stop and an approval that resumes the turn resolve to one truth: whatever the order in which they
meet, Stop answers True exactly when the turn ends ``stopped``."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from planner.ground.turns import LiveTurn
from planner.live.hub import hub
from planner.live.runner import runner
from planner.models import Event
from tests.fakes.scripted import Hang, call, say
from tests.planner.conftest import sync
from tests.planner.domain.test_requests import pause
from tracker.errors import ConflictError
from tracker.services.activity import Actor
from tracker.services.projects import project_update

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("stop_after", [0, 1, 2, 3, 5, 8, 13])
async def test_stop_racing_an_approval_says_what_happened(
    scripted, chat_project, owner, session, member, stop_after
):
    await sync(project_update)(
        actor=Actor(user=owner), project=chat_project, settings={"approve_tools": ["create_knowledge"]}
    )
    request = await pause(runner, session, member, call("create_knowledge", {"kind": "note", "title": "N"}))
    scripted.add(Hang("Writing", then=say("Done.")))

    async def stop_later() -> bool:
        for _ in range(stop_after):  # let the approval get this many steps ahead
            await asyncio.sleep(0)
        return await runner.stop(session_id=session.pk, user=member)

    answered, stopped = await asyncio.gather(
        runner.reply(session_id=session.pk, user=member, request=str(request.pk), approve=True),
        stop_later(),
        return_exceptions=True,
    )
    assert isinstance(stopped, bool), stopped
    if isinstance(answered, BaseException):  # Stop came first: it cancelled the request, and says so
        assert isinstance(answered, ConflictError), answered
        assert answered.message == "This request was already cancelled."
        assert stopped
    if not stopped:  # the turn runs on: stop it now, as a user would press Stop again
        assert await runner.stop(session_id=session.pk, user=member)
    await runner.wait(session.pk)

    ended = await sync(lambda: Event.objects.filter(session=session, kind="turn_ended").latest("pk").data)()
    assert ended["reason"] == "stopped"


def test_a_stop_for_a_turn_being_started_here_stops_it_once_registered():
    """Another process's Stop reaches this one while it resumes the turn (claimed, not yet
    registered): the turn starts stopped instead of running on after Stop said True."""
    session_id = uuid.uuid4()
    hub.turns.claim(session_id)
    try:
        hub._control(session_id, {"command": "stop"})
        live = LiveTurn(session_id=session_id, turn=1, outbox=None)  # type: ignore[arg-type]
        hub.turns.start(live)
        assert live.stop_requested
    finally:
        hub.turns.release(session_id)
        hub.turns.end(live)
