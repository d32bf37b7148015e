"""Celery tasks of the planner: the periodic sweep that recovers turns whose process died."""

from __future__ import annotations

import logging

from celery import shared_task

from planner.services import sessions_recover_dead

logger = logging.getLogger(__name__)


@shared_task(name="planner.recover_dead_turns", ignore_result=True)
def recover_dead_turns() -> int:
    """Recover every running session whose process died, even if nobody opens it."""
    recovered = sessions_recover_dead()
    if recovered:
        logger.info("recovered %d planner session(s) whose turn died", recovered)
    return recovered
