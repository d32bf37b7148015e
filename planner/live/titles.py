"""The title the planner proposes for a chat after its first turn (docs/protocol.md, docs/architecture.md).

When a session's turn ends with an answer (``completed`` or ``max_rounds``)
and nobody named the chat, the runner asks the project's ``title_model`` (a
cheap model) for a few words, through the gateway like every model call,
metered with purpose ``title``. It runs after ``turn_ended`` was sent, so it
never delays it; it is skipped when the project's daily token budget is used
up, and a failure is logged and leaves the title as it was. The answer is
untrusted text (``chats.proposed_title`` makes it a title) and is stored only
if the chat is still unnamed (``chats.title_propose``); its watchers then get a
``title`` frame.

The call's usage record is written as soon as the provider answered (the
gateway meters before it returns), so it stays even if the process dies
before the title is stored. Such a chat is still unnamed at its next turn's
end, which proposes again: a chat gets at most ``MAX_CALLS`` title calls,
so one whose proposals came back empty is not asked about forever.

Titles are background work: a process makes ``AT_ONCE`` title calls at a time and the others
wait their turn. When many chats end together (200 streams on one daphne), their titles
then no longer crowd the streams still running (docs/benchmarks.md#reading-the-figures).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from ballet.env import DEFAULT_TITLE_MODEL
from planner.agent import frames
from planner.agent.calls import CallRecord, Gateway
from planner.agent.demo import DEMO_MODEL
from planner.agent.frames import Frame
from planner.agent.messages import ChatMessage, ModelRequest, TextBlock
from planner.domain.selectors import (
    Credential,
    project_credential,
    project_provider,
    title_subject,
    tokens_used_since,
    utc_day_start,
)
from planner.domain.services import chats, sessions
from planner.ground.bridge import db
from planner.live.at_once import AtOnce
from planner.models import MessageKind
from tracker.selectors import project_planner_config

logger = logging.getLogger(__name__)

# The fakes of the model recognise a title request by this opening (tests/fakes/).
TITLE_SYSTEM = (
    "You name chats. Reply with a title of at most six words for the conversation below: "
    "plain text on one line, no quotes, no punctuation at the end, nothing else."
)
QUOTED_CHARS = 1500  # of the human's message and of the answer: enough to see what it is about
MAX_TOKENS = 30
TITLED_REASONS = ("completed", "max_rounds")  # the model answered: there is something to name
MAX_CALLS = 2  # per chat: the first proposal, and one more if it was lost or came back empty
AT_ONCE = 2  # title calls a process makes at a time

_calls = AtOnce()

Announce = Callable[[uuid.UUID, list[Frame]], Awaitable[None]]


@dataclass(frozen=True)
class TitleJob:
    """What a title call needs: the session's project, the model and key, and the request."""

    project_id: int
    request: ModelRequest
    api_key: str | None = field(repr=False)


def wanted(*, reason: str | None) -> bool:
    """Does a turn's end for ``reason`` call for a title (before reading the session)?"""
    return reason in TITLED_REASONS


def title_job(*, session_id: uuid.UUID) -> TitleJob | None:
    """The title call for the session, or None: named already, a question's sub-chat (titled
    by its question), ``MAX_CALLS`` made already, nothing to quote, or the project's daily
    token budget used up."""
    subject = title_subject(session_id=session_id)
    if subject is None or subject.title_calls >= MAX_CALLS:
        return None
    project = subject.project
    config = project_planner_config(project)
    provider = project_provider(project)
    if config.daily_token_budget is not None and provider == "anthropic":
        used = tokens_used_since(project_id=project.pk, since=utc_day_start(timezone.now()))
        if used >= config.daily_token_budget:
            logger.info("no title for session %s: the project's daily token budget is used up", session_id)
            return None
    question, answer = _first_exchange(subject.first)
    if not question or not answer:
        return None
    request = ModelRequest(
        model=(config.title_model or DEFAULT_TITLE_MODEL) if provider == "anthropic" else DEMO_MODEL,
        system=TITLE_SYSTEM,
        messages=(ChatMessage(role="user", content=(TextBlock(_prompt(question, answer)),), kind="human"),),
        max_tokens=MAX_TOKENS,
        purpose="title",
        provider=provider,
    )
    credential = project_credential(project) if provider == "anthropic" else Credential(None)
    return TitleJob(project_id=project.pk, request=request, api_key=credential.api_key)


def _first_exchange(first: list[tuple[str, list[Any]]]) -> tuple[str, str]:
    """The first human message and the text the planner answered it with in the first turn."""
    question, answer = "", []
    for kind, content in first:
        text = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        if kind == MessageKind.HUMAN and not question:
            question = text
        elif kind == MessageKind.ASSISTANT and text.strip():
            answer.append(text)
    return question.strip(), "\n\n".join(answer).strip()


def _prompt(question: str, answer: str) -> str:
    return (
        f"<human>\n{_cut(question)}\n</human>\n<assistant>\n{_cut(answer)}\n</assistant>\n\n"
        "The title of this conversation:"
    )


def _cut(text: str) -> str:
    return text if len(text) <= QUOTED_CHARS else text[:QUOTED_CHARS] + " […]"


async def propose(*, session_id: uuid.UUID, gateway: Gateway, announce: Announce) -> str | None:
    """Ask for a title, store it if the chat is still unnamed and tell its watchers; the title
    stored, or None. Never raises: a title is a nicety, the chat works without one. Waits
    while ``AT_ONCE`` others are being proposed in this process."""
    async with _calls.gate(AT_ONCE):
        return await _propose(session_id=session_id, gateway=gateway, announce=announce)


async def _propose(*, session_id: uuid.UUID, gateway: Gateway, announce: Announce) -> str | None:
    try:
        job = await db(title_job)(session_id=session_id)
        if job is None:
            return None

        async def meter(record: CallRecord) -> None:
            await db(sessions.usage_save)(project_id=job.project_id, session_id=session_id, record=record)

        response = await gateway.complete(job.request, api_key=job.api_key, sink=None, meter=meter)
        title = chats.proposed_title(response.text)
        if title is None or not await db(chats.title_propose)(session_id=session_id, title=title):
            return None
    except Exception:
        logger.warning("could not propose a title for session %s", session_id, exc_info=True)
        return None
    await announce(session_id, [frames.title(title=title)])
    return title
