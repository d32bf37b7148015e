"""Agents' questions (docs/domain.md#agents-questions): ask, read, answer, withdraw, and wait for the answer.

A worker asks about the project or one item; the question gets a sub-chat, a
planner session owned by the asker whose first message is the question, and
the runner starts its turn (``runner.ask``). The planner answers with the tool
``answer_question`` (:func:`question_answer`), or asks the project's humans with
``ask_human`` first. Asking, answering and withdrawing are activity events, so
other sessions' change notes mention them. A question whose first turn the
running-turn limits keep waiting stays ``open`` and unstarted until a turn
frees up (:func:`questions_waiting`).

**Answers are remembered** (``planner/services/answer_reuse.py``): a human's answer, given
directly (:func:`question_answer_human`) or through the planner after the human answered its
``ask_human`` request (:func:`question_answer`), is kept as a decision entry unless marked
one-off; and asking first looks for an answered question of the same item that means the same
thing: found, the question is recorded answered with that answer (``reused_from``), with no
sub-chat and no model call. ``fresh`` asks anyway.

Waiting for the answer (:func:`question_await`) holds no thread and no
database connection: it sleeps on an event this process sets when a question
is answered here, and reads the question again at least every second for
answers given in other processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from planner.live.bridge import db
from planner.models import Question, QuestionStatus, Session
from planner.services import answer_reuse
from tracker.errors import (
    ConflictError,
    InvalidStateError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from tracker.inputs import one_line, refuse_nul
from tracker.models import ActivityEvent, Item, Project
from tracker.permissions import PLANNER_CHAT, PROJECT_ADMIN, TRACKER_READ, has_permission, require
from tracker.selectors import item_get
from tracker.services.activity import Actor, activity_record

MAX_QUESTION_CHARS = 8_000
MAX_WAIT_SECONDS = 60
MAX_IDEMPOTENCY_KEY = 200
POLL_SECONDS = 1.0


def _text(text: Any, *, field: str = "text") -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValidationError({field: ["Write the question." if field == "text" else "Write the answer."]})
    if len(text) > MAX_QUESTION_CHARS:
        raise ValidationError({field: [f"At most {MAX_QUESTION_CHARS} characters."]})
    refuse_nul(**{field: text})
    return text.strip()


HOW_TO_ANSWER = (
    "(Asked by {asker}, a worker. Answer with the answer_question tool, from the plan and the "
    "knowledge base; if they do not settle it, ask the project's humans with ask_human first.)"
)


def first_message(question: Question) -> str:
    """The sub-chat's first message: the question, the item it is about, and how to answer."""
    about = f"About {question.item.key}: {question.item.title}\n\n" if question.item else ""
    how = HOW_TO_ANSWER.format(asker=question.asker.get_username())
    return f"{about}{question.text}\n\n{how}"


@dataclass(frozen=True)
class Asked:
    question: Question
    replayed: bool = False  # asked before with the same idempotency key: nothing new was opened


@transaction.atomic
def question_ask(
    *,
    user: User,
    project: Project,
    text: Any,
    item_key: Any = None,
    idempotency_key: Any = None,
    fresh: Any = False,
) -> Asked:
    """:func:`question_create`, idempotent with ``idempotency_key``: asking again with the same
    key (a client retrying a request whose answer it lost) returns the question first asked with
    it and opens nothing; the same key for another question is a conflict."""
    key = _idempotency_key(idempotency_key)
    fresh = _fresh(fresh)
    if not key:
        return Asked(question_create(user=user, project=project, text=text, item_key=item_key, fresh=fresh))
    try:
        with transaction.atomic():  # a savepoint: a racing twin's insert fails alone
            return Asked(
                question_create(
                    user=user, project=project, text=text, item_key=item_key, idempotency_key=key, fresh=fresh
                )
            )
    except IntegrityError:
        return Asked(
            _replayed(user=user, project=project, key=key, text=_text(text), item_key=item_key), True
        )


def _fresh(fresh: Any) -> bool:
    if fresh is None:
        return False
    if not isinstance(fresh, bool):
        raise ValidationError({"fresh": ["Expected true or false."]})
    return fresh


@transaction.atomic
def question_create(
    *,
    user: User,
    project: Project,
    text: Any,
    item_key: Any = None,
    idempotency_key: str = "",
    fresh: bool = False,
) -> Question:
    """Record ``user``'s question (needs ``planner.chat``): answered at once with the answer of an
    answered question of the same item that means the same (unless ``fresh``), else with its
    sub-chat opened (docs/domain.md#agents-questions)."""
    require(user, project, PLANNER_CHAT)
    text = _text(text)
    item = _item(project, item_key)
    vector = answer_reuse.text_vector(text)
    if vector is not None and not fresh:
        match = answer_reuse.reusable_answer(project=project, item=item, vector=vector)
        if match is not None:
            return _reused(
                user=user,
                project=project,
                item=item,
                text=text,
                idempotency_key=idempotency_key,
                match=match,
                vector=vector,
            )
    question = Question.objects.create(
        project=project, asker=user, item=item, text=text, idempotency_key=idempotency_key
    )
    answer_reuse.vector_store(question, vector)
    asked = _record(
        question, Actor(user=user), "question.asked", {"text": text[:200], "item": _key(question)}
    )
    title = one_line(text, 60)
    # The sub-chat starts past its own question's event: its first message says it already.
    question.session = Session.objects.create(
        project=project, user=user, question=question, title=f"Question: {title}", last_seen_seq=asked.seq
    )
    return question


def _reused(
    *,
    user: User,
    project: Project,
    item: Item | None,
    text: str,
    idempotency_key: str,
    match: answer_reuse.Match,
    vector: answer_reuse.Vector,
) -> Question:
    """The question, recorded answered with ``match``'s answer: no sub-chat, no turn."""
    earlier = match.question
    question = Question.objects.create(
        project=project,
        asker=user,
        item=item,
        text=text,
        idempotency_key=idempotency_key,
        status=QuestionStatus.ANSWERED,
        answer=earlier.answer,
        answered_by=earlier.answered_by,
        answered_at=earlier.answered_at,
        reused_from=earlier,
        started=True,
        embedding=vector.data,
        embedding_model=vector.model,
    )
    data = {
        "text": text[:200],
        "item": _key(question),
        "reused_from": earlier.pk,
        "similarity": round(match.similarity, 3),
        "answer": earlier.answer[:200],
    }
    _record(question, Actor(user=user), "question.reused", data)
    transaction.on_commit(lambda: _answered(question.pk))
    return question


def _idempotency_key(key: Any) -> str:
    if key in (None, ""):
        return ""
    if (
        not isinstance(key, str)
        or len(key) > MAX_IDEMPOTENCY_KEY
        or not key.isascii()
        or not key.isprintable()
    ):
        raise ValidationError(
            {"idempotency_key": [f"Expected printable ASCII of at most {MAX_IDEMPOTENCY_KEY} characters."]}
        )
    return key


def _item(project: Project, item_key: Any) -> Item | None:
    if item_key in (None, ""):
        return None
    if not isinstance(item_key, str):
        raise ValidationError({"item": ["Expected an item key such as DEMO-3."]})
    try:
        return item_get(project=project, key=item_key)
    except NotFoundError as exc:
        raise ValidationError({"item": [exc.message]}) from exc


def _replayed(*, user: User, project: Project, key: str, text: str, item_key: Any) -> Question:
    first = question_list(user=user, project=project).filter(asker=user, idempotency_key=key).first()
    if first is None:  # the key was used in another project
        raise ConflictError("This idempotency key was already used for another question.")
    item = _item(project, item_key)
    if first.text != text or first.item_id != (item.pk if item else None):
        raise ConflictError(
            f"This idempotency key was already used for question {first.pk}, which asks something else."
        )
    return first


def _key(question: Question) -> str | None:
    return question.item.key if question.item is not None else None


def _record(question: Question, actor: Actor, verb: str, data: dict[str, Any]) -> ActivityEvent:
    return activity_record(
        actor=actor,
        organization_id=question.project.organization_id,
        project=question.project,
        verb=verb,
        target=f"question:{question.pk}",
        data=data,
    )


def question_list(
    *, user: User, project: Project, status: str | None = None, asker: str | None = None
) -> QuerySet[Question]:
    """The project's questions, newest first (needs ``tracker.read``); ``asker``: a username."""
    require(user, project, TRACKER_READ)
    qs = Question.objects.filter(project=project)
    qs = qs.select_related("project", "asker", "item__project", "session", "reused_from")
    if asker:
        qs = qs.filter(asker__username=asker)
    return qs.filter(status=status) if status else qs


def question_get(*, user: User, project: Project, question_id: Any) -> Question:
    """One question of the project; NotFoundError for an unknown id or project."""
    require(user, project, TRACKER_READ)
    try:
        number = int(question_id)
    except (TypeError, ValueError):
        raise NotFoundError("Question not found.") from None
    found = question_list(user=user, project=project).filter(pk=number).first()
    if found is None:
        raise NotFoundError("Question not found.")
    return found


@transaction.atomic
def question_answer(*, session_id: uuid.UUID, user: User, answer: str) -> Question:
    """The planner answers its sub-chat's question (``answer_question``), acting for ``user``."""
    session = Session.objects.select_related("question__project", "question__item").get(pk=session_id)
    question = session.question
    if question is None:
        raise InvalidStateError(
            "This session answers no question: answer_question is for question sub-chats."
        )
    question = _locked(question.pk)
    _answer(question, Actor(user=user, planner_session=session_id), answer)
    request = answer_reuse.human_of_session(session_id)
    if request is not None and request.answered_by is not None:  # the planner passes on a human's word
        answer_reuse.decision_record(
            question=question, human=request.answered_by, session_id=session_id, request=request
        )
    return question


UNSETTLED = (QuestionStatus.OPEN, QuestionStatus.NEEDS_HUMAN)


def _answer(question: Question, actor: Actor, answer: str) -> None:
    """Record ``actor``'s answer to the locked ``question`` and wake its waiters once committed."""
    if question.status not in UNSETTLED:
        raise InvalidStateError(f"The question is {question.status}; it takes no answer.")
    question.status = QuestionStatus.ANSWERED
    question.answer = answer
    question.answered_by = actor.label
    question.answered_at = timezone.now()
    question.save(update_fields=["status", "answer", "answered_by", "answered_at"])
    answer_reuse.vector_store(question)
    _record(question, actor, "question.answered", {"answer": answer[:200], "item": _key(question)})
    transaction.on_commit(lambda: _answered(question.pk))


@transaction.atomic
def question_answer_human(
    *, user: User, project: Project, question_id: Any, answer: Any, one_off: Any = False
) -> Question:
    """A member with ``planner.chat`` answers a question its sub-chat left to the project's humans;
    the answer is kept as a decision entry unless ``one_off``."""
    require(user, project, PLANNER_CHAT)
    if not isinstance(one_off, bool):
        raise ValidationError({"one_off": ["Expected true or false."]})
    found = question_get(user=user, project=project, question_id=question_id)
    question = _locked(found.pk)
    if question.status == QuestionStatus.OPEN:
        raise InvalidStateError(
            "The planner is still on this question; answer its request in the sub-chat, or wait until "
            "the question needs a human."
        )
    _answer(question, Actor(user=user), _text(answer, field="answer"))
    if one_off:
        question.one_off = True
        question.save(update_fields=["one_off"])
        return question
    session = getattr(question, "session", None)
    answer_reuse.decision_record(question=question, human=user, session_id=session.pk if session else None)
    return question


def _locked(question_id: int) -> Question:
    return (
        Question.objects.select_for_update(of=("self",))
        .select_related("project", "asker", "item__project", "session")
        .get(pk=question_id)
    )


@transaction.atomic
def question_unanswered(*, question_id: int, reason: str) -> bool:
    """The question's sub-chat ended without answering it: it waits for the project's humans
    (``needs_human``) with ``reason``, and its waiters hear it at once. False if it was settled
    or already waits for them."""
    question = _locked(question_id)
    if question.status != QuestionStatus.OPEN:
        return False
    question.status = QuestionStatus.NEEDS_HUMAN
    question.reason = reason
    question.save(update_fields=["status", "reason"])
    data = {"reason": reason[:200], "item": _key(question)}
    _record(question, Actor(user=question.asker), "question.needs_human", data)
    transaction.on_commit(lambda: _answered(question_id))
    return True


@dataclass(frozen=True)
class Withdrawn:
    question: Question
    session_id: uuid.UUID | None


@transaction.atomic
def question_withdraw(*, user: User, project: Project, question_id: Any) -> Withdrawn:
    """The asker (or a project admin) withdraws an open question; its sub-chat's turn is stopped
    by the caller (``runner.withdraw``)."""
    question = question_get(user=user, project=project, question_id=question_id)
    if question.asker_id != user.pk and not has_permission(user, project, PROJECT_ADMIN):
        raise PermissionDeniedError("Only the asker or a project admin may withdraw a question.")
    question = _locked(question.pk)
    if question.status not in UNSETTLED:
        raise InvalidStateError(f"The question is already {question.status}.")
    question.status = QuestionStatus.WITHDRAWN
    question.answered_at = timezone.now()
    question.save(update_fields=["status", "answered_at"])
    _record(question, Actor(user=user), "question.withdrawn", {"item": _key(question)})
    transaction.on_commit(lambda: _answered(question.pk))
    session_id = Session.objects.filter(question=question).values_list("pk", flat=True).first()
    return Withdrawn(question, session_id)


@transaction.atomic
def question_unstartable(*, question_id: int, reason: str) -> None:
    """The question's sub-chat cannot start (its asker lost access): the humans settle it."""
    Question.objects.filter(pk=question_id).update(started=True)
    question_unanswered(question_id=question_id, reason=f"The planner could not start: {reason}")


def questions_waiting(*, limit: int = 100) -> list[Question]:
    """Open questions whose first turn has not started, oldest first."""
    qs = Question.objects.filter(status=QuestionStatus.OPEN, started=False).select_related(
        "project", "asker", "item", "session"
    )
    return list(qs.order_by("created_at", "pk")[:limit])


# ---------------------------------------------------------------------- waiting for the answer

_waiters: dict[int, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}


def _answered(question_id: int) -> None:
    """Wake this process's waiters of the question (from any thread)."""
    for loop, event in list(_waiters.get(question_id, ())):
        loop.call_soon_threadsafe(event.set)


async def question_await(*, user: User, project: Project, question_id: Any, seconds: float) -> Question:
    """The question once it is no longer open, or as it is after ``seconds`` (at most 60)."""
    question: Question = await db(question_get)(user=user, project=project, question_id=question_id)
    deadline = time.monotonic() + max(0.0, min(float(seconds), MAX_WAIT_SECONDS))
    if question.status != QuestionStatus.OPEN or seconds <= 0:
        return question
    entry = (asyncio.get_running_loop(), asyncio.Event())
    _waiters.setdefault(question.pk, set()).add(entry)
    try:
        # Waiting from before the second read: an answer given meanwhile is read, or wakes it.
        question = await db(question_get)(user=user, project=project, question_id=question.pk)
        for _ in range(int(MAX_WAIT_SECONDS / POLL_SECONDS) + 2):  # bounded: the deadline ends it first
            remaining = deadline - time.monotonic()
            if question.status != QuestionStatus.OPEN or remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(entry[1].wait(), timeout=min(remaining, POLL_SECONDS))
            entry[1].clear()
            question = await db(question_get)(user=user, project=project, question_id=question.pk)
    finally:
        waiters = _waiters[question.pk]
        waiters.discard(entry)
        if not waiters:
            del _waiters[question.pk]
    return question
