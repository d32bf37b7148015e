"""The reuse judge's call (``planner/domain/services/reuse_judge.py``, docs/domain.md#agents-questions):
the project's title model asked, through the gateway like every model call, whether an answered
question asks what a new one asks.

It runs on the event loop between the two database calls of an ask (``runner.ask``), so no
transaction and no database thread waits on the network: :func:`judge_job` (on the database
threads, as ``titles.title_job``) adds the model, the key and the budget to what the domain chose
to show. It never raises: no key, the daily token budget used up, or a failure (the API down, a
refused key, a timeout) reads as "none asks the same", logged, and the question is asked as if
nothing were remembered. The call is metered with purpose ``reuse_judge`` as soon as the
provider answered.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.utils import timezone

from ballet.env import DEFAULT_TITLE_MODEL
from planner.agent.calls import CallRecord, Gateway
from planner.agent.messages import ChatMessage, ModelRequest, TextBlock
from planner.domain.selectors import project_credential, tokens_used_since, utc_day_start
from planner.domain.services import sessions
from planner.domain.services.reuse_judge import JUDGE_SYSTEM, JudgeCall, Verdict, verdict_of
from planner.ground.bridge import db
from tracker.models import Project
from tracker.selectors import project_planner_config

logger = logging.getLogger(__name__)

MAX_TOKENS = 5  # one number


@dataclass(frozen=True)
class JudgeJob:
    request: ModelRequest
    api_key: str | None = field(repr=False)


def judge_job(call: JudgeCall) -> JudgeJob | None:
    """The request for ``call``, or None: no key, or the project's daily token budget used up."""
    project = Project.objects.get(pk=call.project_id)
    config = project_planner_config(project)
    if config.daily_token_budget is not None:
        used = tokens_used_since(project_id=project.pk, since=utc_day_start(timezone.now()))
        if used >= config.daily_token_budget:
            logger.info("no reuse judge in %s: the daily token budget is used up", project.key)
            return None
    credential = project_credential(project)
    if credential.api_key is None:
        return None
    request = ModelRequest(
        model=config.title_model or DEFAULT_TITLE_MODEL,
        system=JUDGE_SYSTEM,
        messages=(ChatMessage(role="user", content=(TextBlock(call.prompt),), kind="human"),),
        max_tokens=MAX_TOKENS,
        purpose="reuse_judge",
        provider="anthropic",
    )
    return JudgeJob(request, credential.api_key)


async def verdict(call: JudgeCall, *, gateway: Gateway) -> Verdict:
    """What the judge says of ``call``'s candidates; ``Verdict(None)`` if it could not say."""

    async def meter(record: CallRecord) -> None:
        await db(sessions.usage_save)(project_id=call.project_id, session_id=None, record=record)

    try:
        job = await db(judge_job)(call)
        if job is None:
            return Verdict(None)
        response = await gateway.complete(job.request, api_key=job.api_key, sink=None, meter=meter)
    except Exception:
        logger.warning("the reuse judge could not be asked in project %s", call.project_id, exc_info=True)
        return Verdict(None)
    return verdict_of(response.text, call)
