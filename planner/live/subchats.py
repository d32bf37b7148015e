"""Sub-chats the planner drives, on the event loop (docs/domain.md#sub-chats).

A turn that called ``start_subchat`` pauses like one that asked a human
(``planner/live/session_io.py``); once it has paused, :func:`start_round` starts each sub-chat's
first turn through the runner like any message (``Runner.send_as``: the running-turn limits, the
hub, watchers); one the limits hold waits for a free turn, started by a pass over the work waiting
(:func:`start_waiting`, ``waiting.py``). When a sub-chat's turn ends, :func:`ended` answers its
request in the parent's paused turn, which resumes through the runner like a human's answer
(``Runner.settle_requests``) once every sub-chat of the round has ended. Stopping the parent stops
its sub-chats (:func:`stop_children`).
"""

from __future__ import annotations

import functools
import logging
import uuid
from typing import TYPE_CHECKING

from django.contrib.auth.models import User

from planner.domain.services import human_requests, subchats
from planner.domain.services.sessions import TurnsFullError
from planner.domain.services.subchats import SubchatNotWaitingError, SubchatStart
from planner.ground.bridge import db
from tracker.errors import BalletError, UnavailableError

if TYPE_CHECKING:
    from planner.live.runner import Runner

logger = logging.getLogger(__name__)


async def start_round(runner: Runner, parent_id: uuid.UUID) -> None:
    """Start the sub-chats the paused turn of ``parent_id`` waits for and that have not started;
    those the running-turn limits hold back wait for a pass over the work waiting."""
    for start in await db(subchats.subchats_to_start)(parent_id=parent_id):
        try:
            await _start(runner, start)
        except UnavailableError:  # the channel layer, down for a moment: a later pass starts it
            runner.hub.work_waiting = True


async def start_waiting(runner: Runner, session_id: uuid.UUID) -> TurnsFullError | bool:
    """Start sub-chat ``session_id``'s first turn, which waited for a free turn (a
    ``waiting.Pass``): True if it started here, False if it no longer waits, else the limit that
    still holds it."""
    start = await db(subchats.subchat_waiting_start)(session_id=session_id)
    return False if start is None else await _start(runner, start)


async def _start(runner: Runner, start: SubchatStart) -> TurnsFullError | bool:
    """Start one sub-chat's first turn, as its owner: True if it started here, False if it no
    longer waits or cannot start, the limit that holds it else. One the running-turn limits hold
    waits, fairly with the rest of the work waiting, until a turn ends (``Runner.start_waiting``);
    one that cannot start for another reason (its owner's access) ends at once, failed, with the
    reason."""
    begun = functools.partial(subchats.subchat_turn_begin, session_id=start.session_id)
    try:
        await runner.send_as(
            start.session_id, start.owner_id, begun, author=start.owner, seen=start.text, kind="human"
        )
    except SubchatNotWaitingError:
        return False
    except TurnsFullError as held:
        logger.info("sub-chat %s waits for a free turn: %s", start.session_id, held.message)
        runner.hub.work_waiting = True
        return held
    except UnavailableError:
        raise
    except BalletError as exc:
        logger.info("sub-chat %s could not start: %s", start.session_id, exc.message)
        await ended(runner, start.session_id, parent_id=start.parent_id, failed=exc.message)
        return False
    return True


async def ended(
    runner: Runner, session_id: uuid.UUID, *, parent_id: uuid.UUID | None = None, failed: str | None = None
) -> None:
    """The turn of sub-chat ``session_id`` ended (``failed``: it could not start): answer its
    parent's request, and resume the parent once none waits. Never raises: a parent that cannot
    be told is logged (its human may stop it)."""
    try:
        if parent_id is None:
            parent_id = await db(subchats.subchat_parent)(session_id=session_id)
            if parent_id is None:
                return
        settle = functools.partial(human_requests.subchat_ended, session_id=session_id, failed=failed)
        await runner.settle_requests(parent_id, settle)
    except Exception:
        logger.exception("the end of sub-chat %s could not be told to its parent", session_id)


async def stop_children(runner: Runner, parent_id: uuid.UUID, user: User) -> None:
    """Stop the sub-chats of ``parent_id`` whose turn runs or waits (its owner stopped it)."""
    for child_id in await db(subchats.subchats_running)(parent_id=parent_id):
        try:
            await runner.stop(session_id=child_id, user=user)
        except BalletError as exc:
            logger.warning("sub-chat %s could not be stopped: %s", child_id, exc.message)
