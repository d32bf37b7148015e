"""A human's message to a session: start a turn, steer the running one, or continue one that
waits (``session_begin``), within the running-turn limits; take back a steering message not
read yet (``steering_retract``)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from redis import RedisError

from ballet.env import LimitsConfig
from planner.domain.selectors import session_history
from planner.domain.services.agent_questions import QuestionNotWaitingError
from planner.domain.services.sessions.recovery import recover_if_dead
from planner.domain.services.sessions.rows import (
    Meaning,
    NotQueuedError,
    human,
    lock_to_begin,
    session_lock,
    turns_limit_check,
)
from planner.domain.services.sessions.turns import PROMPT_READS, Begin, Reply, run_here, turn_open
from planner.models import (
    MessageKind,
    Question,
    QuestionStatus,
    Session,
    SessionState,
)
from tracker.db import sql
from tracker.errors import (
    RateLimitedError,
    UnavailableError,
)
from tracker.trust.limits import LIMITER_UNAVAILABLE, rate_hit


@transaction.atomic
@sql.batched(ends_transaction=True)  # its writes go with the statements that follow them, or the commit
def session_begin(
    *,
    session_id: uuid.UUID,
    user: User,
    text: str,
    question: bool = False,
    reply: Reply | None = None,
    planner: bool = False,
) -> Begin:
    """Give a human message its meaning: start, steer or continue a turn.

    A running session whose process died is recovered first, so the message
    starts a new turn. The limits of docs/trust.md#limits (messages per minute, running
    turns, queued steering) refuse a message before anything is written. A
    turn it starts or continues is opened in the same transaction: change
    notes delivered, ``turn_started`` recorded, its setup returned. To a turn
    paused on requests, the message is the reply (``planner/domain/services/human_requests.py``).
    A ``question``'s first message is not counted against the message rate
    (only the running-turn limits keep it waiting, docs/domain.md#agents-questions), nor is a
    sub-chat's brief, which the ``planner`` sends (docs/domain.md#sub-chats).
    """
    # What this turn's prompt will read, read with the locks (it asks what the session's last
    # start here asked, unless the project's skill changed since: then it reads it itself).
    with sql.reading_ahead(PROMPT_READS.get(session_id, []), with_next=True):
        return _begin(session_id, user, text, question=question, reply=reply, planner=planner)


def _begin(
    session_id: uuid.UUID, user: User, text: str, *, question: bool, reply: Reply | None, planner: bool
) -> Begin:
    session, running = lock_to_begin(session_id, user)
    recovered = recover_if_dead(session)
    limits: LimitsConfig = settings.BALLET_LIMITS
    if question and session.state != SessionState.IDLE:
        raise QuestionNotWaitingError("This question's sub-chat has started already.")
    if session.state == SessionState.RUNNING:
        _check_steering(session, text, limits)
        count_message(user, limits)
        session.steering = [*session.steering, {"text": text, "author": user.get_username()}]
        session.save(update_fields=["steering", "updated_at"])
        return Begin("steered", session.turn_count, None, recovered)
    continuing = session.state == SessionState.PAUSED
    turns_limit_check(session, user, limits, running)  # a reply resumes a turn: it counts like a start
    if continuing and reply is not None:
        count_message(user, limits)
        replied = reply(session, user, text)
        if replied is not None:
            return replied
    if question:
        _question_started(session)
    elif not (continuing and reply is not None) and not planner:
        count_message(user, limits)
    if not continuing:
        session.turn_count += 1
    if not session.title:
        session.title = " ".join(text.split())[:60]
    history = session_history(session=session)  # as it stands before this turn's first messages
    kind = MessageKind.CONTINUE if continuing else MessageKind.HUMAN
    message = run_here(session, history, human(text, kind), user, also=("turn_count", "title"))
    meaning: Meaning = "continued" if continuing else "started"
    setup = turn_open(session, history, continued=continuing)
    return Begin(meaning, session.turn_count, message, recovered, setup)


def _question_started(session: Session) -> None:
    """Mark the sub-chat's question started, under the session's lock: a question settled or
    started meanwhile (another process's pass) is not started again."""
    if session.question_id is None:
        raise QuestionNotWaitingError("This chat answers no question.")
    started = Question.objects.filter(
        pk=session.question_id, status=QuestionStatus.OPEN, started=False
    ).update(started=True)
    if not started:
        raise QuestionNotWaitingError("This question no longer waits for its sub-chat to start.")


def count_message(user: User, limits: LimitsConfig) -> None:
    limit = limits.messages_per_minute
    try:
        allowed = rate_hit(scope="planner-message", key=user.pk, limit=limit, window_seconds=60)
    except RedisError as exc:  # before anything is written: a readable 503
        raise UnavailableError(LIMITER_UNAVAILABLE) from exc
    if not allowed:
        raise RateLimitedError(
            f"You are sending messages too fast: at most {limits.messages_per_minute} a minute. "
            "Try again in a few seconds."
        )


def _check_steering(session: Session, text: str, limits: LimitsConfig) -> None:
    queued = session.steering
    if len(queued) >= limits.steering_queued:
        raise RateLimitedError(
            f"{len(queued)} messages already wait for the planner's next step; "
            "send more once it has read them."
        )
    if sum(len(item["text"]) for item in queued) + len(text) > limits.steering_chars:
        raise RateLimitedError(
            f"Messages waiting for the planner's next step may hold at most {limits.steering_chars} "
            "characters in all; send this once it has read them."
        )


@transaction.atomic
def steering_retract(*, session_id: uuid.UUID, user: User) -> str:
    """Take back the last steering message still waiting for the planner's next model call, and
    return its text (for its author to edit and send again).

    Only the session's owner, as for sending (the same refusals): only they queue steering, so
    the last queued message is theirs. Under the row lock, so a message is either retracted or
    delivered (``deliver_inputs`` takes the same lock), never both and never lost; once the
    planner has read it (or nothing waits), :class:`NotQueuedError`.
    """
    session = session_lock(session_id, user)
    if not session.steering:
        raise NotQueuedError(
            "Nothing of yours waits for the planner any more: it already read your last message "
            "(or none was queued), so there is nothing to take back."
        )
    *kept, last = session.steering
    session.steering = kept
    session.save(update_fields=["steering", "updated_at"])
    return str(last["text"])
