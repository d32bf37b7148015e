"""Celery tasks of the planner: the periodic sweep that recovers turns whose process died."""

from __future__ import annotations

import logging
import uuid

from asgiref.sync import async_to_sync
from celery import shared_task

from planner import events
from planner.identity import stamped
from planner.services import recovered_frame, sessions_recover_dead

logger = logging.getLogger(__name__)


@shared_task(name="planner.recover_dead_turns", ignore_result=True)
def recover_dead_turns() -> int:
    """Recover every running session whose process died, even if nobody opens it, and tell
    the sessions' watchers in every process that the turn ended."""
    recovered = sessions_recover_dead()
    if recovered:
        logger.info("recovered %d planner session(s) whose turn died", len(recovered))
        async_to_sync(_announce)(recovered)
    return len(recovered)


async def _announce(session_ids: list[uuid.UUID]) -> None:
    for session_id in session_ids:
        try:
            await events.publish(session_id, [stamped(recovered_frame())])
        except Exception:
            logger.warning("could not announce the recovery of session %s", session_id, exc_info=True)
