"""Celery tasks of the planner: the periodic sweep that recovers turns whose process died, and the
one that starts what waits for a free turn when no process of the web tier is there to do it."""

from __future__ import annotations

import asyncio
import logging

from asgiref.sync import async_to_sync
from celery import shared_task
from celery.signals import worker_process_init

from planner.domain.selectors import work_waiting
from planner.domain.services.sessions import sessions_recover_dead
from planner.domain.services.subchat_waits import subchats_recovered
from planner.ground.bridge import db
from planner.live.hub import hub
from planner.live.runner import runner

logger = logging.getLogger(__name__)


@worker_process_init.connect
def _load_the_sdk(**_kwargs: object) -> None:
    """A worker runs turns: it loads the Anthropic SDK at its start rather than in its first
    turn (planner/agent/providers.py loads it on demand)."""
    import planner.agent.gateway  # noqa: F401, PLC0415


@shared_task(name="planner.recover_dead_turns", ignore_result=True)
def recover_dead_turns() -> int:
    """Recover every running session whose process died, even if nobody opens it, and tell
    the sessions' watchers in every process that the turn ended, and the parents of sub-chats among
    them that it failed; then answer, here, the steering those turns never read, and resume the
    parents that wait for no other sub-chat
    (docs/architecture.md#when-a-process-redis-or-the-database-fails)."""
    recovered = sessions_recover_dead()
    if recovered:
        logger.info("recovered %d planner session(s) whose turn died", len(recovered))
        for found in recovered:
            hub.publish_from_sync(found.session_id, list(found.frames))
    # A sub-chat's parent hears it failed, and resumes here once none of its sub-chats runs.
    told = subchats_recovered(recovered)
    for parent in told:
        hub.publish_from_sync(parent.parent_id, parent.frames)
    if any(found.answer_waiting for found in recovered) or any(p.resume_waiting for p in told):
        async_to_sync(_run_waiting)()
    return len(recovered)


@shared_task(name="planner.start_waiting_work", ignore_result=True)
def start_waiting_work() -> int:
    """Start the questions and answered turns the running-turn limits kept waiting, once turns
    are free. A turn's end starts them in its own process; this covers the case where that
    process died (its turns recovered by the sweep) and no other turn ends to start them. They
    run here, in the worker, to their end: a turn outlives no event loop."""
    if not work_waiting():
        return 0
    return async_to_sync(_run_waiting)()


SWEEP_SECONDS = 5.0  # as the beat's own sweep
MAX_PASSES = 10_000  # a bound for the loop below: the turns' own bounds end it long before


async def _run_waiting() -> int:
    """Start what waits, then run every turn this loop holds to its end (a turn's end may start
    more: a loop's end would cancel them), sweeping dead turns meanwhile: this task holds a
    worker process that the beat's sweep may be waiting for. The worker's hub runs meanwhile."""
    async with hub.running():
        try:
            started = await runner.start_waiting(force=True)
            for _ in range(MAX_PASSES):
                running = [
                    asyncio.ensure_future(runner.wait(session_id)) for session_id in hub.turns.sessions()
                ]
                if not running:
                    break
                await asyncio.wait(running, timeout=SWEEP_SECONDS)
                recovered = await db(sessions_recover_dead)()
                for found in recovered:
                    await hub.publish(found.session_id, list(found.frames))
                told = await db(subchats_recovered)(recovered)
                for parent in told:
                    await hub.publish(parent.parent_id, parent.frames)
                if any(found.answer_waiting for found in recovered) or any(p.resume_waiting for p in told):
                    await runner.start_waiting(force=True)
            await runner.settle()
        finally:
            await runner.close_clients()  # this loop ends here; the worker lives on
    if started:
        logger.info("started %d planner turn(s) that waited for a free turn", len(started))
    return len(started)
