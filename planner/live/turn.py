"""One live turn from its first frame to its last: open it, run the loop, end it.

The runner starts it (``runner.py``) from the setup ``sessions.session_begin``
returned; this module drives it: it announces the turn's start, builds its
loop over the session (``session_io.py``), holds a
grant so that a human who loses ``planner.chat`` stops it (``guard.py``), runs
the loop again while steering arrived just as it completed, and ends it with
``sessions.turn_end``, keeping the session's history in the process for its
next turn (``histories.py``). A turn that was taken for dead and recovered meanwhile
(``TurnSupersededError``, or an end answered ``superseded``) goes quiet: its
recovery already told the watchers.
"""

from __future__ import annotations

import logging

from planner.agent import frames
from planner.agent.calls import Gateway
from planner.agent.loop import TurnLoop, TurnOutcome
from planner.domain.metrics import TURNS
from planner.domain.selectors import TurnSetup
from planner.domain.services import sessions
from planner.domain.services.sessions import Ended, TurnSupersededError
from planner.ground.bridge import db
from planner.ground.turns import LiveTurn
from planner.live import guard
from planner.live.hub import Hub
from planner.live.session_io import SessionIO, budgeted

logger = logging.getLogger(__name__)

MAX_RESTARTS = 5
CRASHED = "Ballet hit an internal error running this turn; it was logged."


async def drive(
    live: LiveTurn, setup: TurnSetup, *, continued: bool, gateway: Gateway, hub: Hub
) -> TurnOutcome | None:
    """Run the turn to its end and send its ``turn_ended`` (unless it was superseded); how it
    ended (None: superseded)."""
    outcome: TurnOutcome | None = TurnOutcome("failed", "The turn could not start.")
    try:
        outcome = await _run(live, setup, continued=continued, gateway=gateway, hub=hub)
    except TurnSupersededError:
        logger.warning(
            "turn %d of session %s was recovered while it ran; it stops", live.turn, live.session_id
        )
        outcome = None
    except Exception:
        logger.exception("planner turn of session %s crashed", live.session_id)
        outcome = TurnOutcome("failed", CRASHED)
        ended = await db(sessions.turn_end)(
            session_id=live.session_id, turn=live.turn, reason="failed", error=CRASHED
        )
        if ended.status == "superseded":
            outcome = None
        else:
            await hub.publish(live.session_id, sessions.steering_frames(ended.steering))
    finally:
        if outcome is not None and outcome.reason != "paused":  # a paused turn has not ended
            TURNS.labels(outcome.reason).inc()
            await hub.publish(
                live.session_id, [frames.turn_ended(reason=outcome.reason, error=outcome.error)]
            )
    return outcome


async def _run(
    live: LiveTurn, setup: TurnSetup, *, continued: bool, gateway: Gateway, hub: Hub
) -> TurnOutcome | None:
    await hub.publish(live.session_id, [frames.turn_started(turn=live.turn, continued=continued)])
    io = SessionIO(live, setup, lambda frame: hub.publish(live.session_id, [frame]))
    live.loop = TurnLoop(io=io, gateway=budgeted(gateway, io), settings=setup.settings, history=setup.history)
    if live.stop_requested:
        live.loop.stop()
    # A human who loses planner.chat while the turn runs stops it (planner/live/guard.py).
    grant = guard.Grant(setup.user_id, setup.project_id, None, lambda _code: live.stop())
    hub.guard.hold(grant)
    try:
        return await _rounds(live, io, hub)
    finally:
        hub.guard.release(grant)


async def _rounds(live: LiveTurn, io: SessionIO, hub: Hub) -> TurnOutcome | None:
    """Run the loop until the turn ends; steering that arrived as it completed runs it on."""
    assert live.loop is not None
    for restart in range(MAX_RESTARTS):
        outcome = await live.loop.run()
        if outcome.reason == "paused":  # stored as paused by the round's save; it waits for answers
            hub.histories.keep(live.session_id, live.loop.history)
            return outcome
        if not io.ended:  # its last answer's save ends a completed turn by itself
            ended = await _end(live, io, hub, outcome, final=restart == MAX_RESTARTS - 1)
            if ended == "superseded":
                return None
            if ended == "steered":
                live.steered()  # deliver it at the next model call
                continue
        hub.histories.keep(live.session_id, live.loop.history)
        return outcome
    raise AssertionError("unreachable: the last restart's end is final")


async def _end(live: LiveTurn, io: SessionIO, hub: Hub, outcome: TurnOutcome, *, final: bool) -> Ended:
    """Store how the loop's run ended (``final``: even with steering waiting) and show the
    steering the turn never read, stored before its end; "ended", "steered" or "superseded"."""
    assert outcome.reason != "paused"
    ended = await db(sessions.turn_end)(
        session_id=live.session_id,
        turn=live.turn,
        reason=outcome.reason,
        error=outcome.error,
        records=io.records,
        final=final,
    )
    if ended.steering:
        assert live.loop is not None
        live.loop.history.messages.extend(message for message, _ in ended.steering)
        await hub.publish(live.session_id, sessions.steering_frames(ended.steering))
    return ended.status
