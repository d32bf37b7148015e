"""Agents' questions (docs/domain.md#agents-questions): ask, read, answer, withdraw, and wait for the answer.

A worker asks about the project or one item; the question gets a sub-chat, a
planner session owned by the asker whose first message is the question, and
the runner starts its turn (``runner.ask``). The planner answers with the tool
``answer_question`` (:func:`question_answer`), or asks the project's humans with
``ask_human`` first. Asking, answering and withdrawing are activity events, so
other sessions' change notes mention them. A question whose first turn the
running-turn limits keep waiting stays ``open`` and unstarted until a turn
frees up (:func:`questions_waiting`).

**Answers are remembered** (``planner/domain/services/answer_reuse.py``): a human's answer, given
directly (:func:`question_answer_human`) or through the planner after the human answered its
``ask_human`` request (:func:`question_answer`), is kept as a decision entry unless marked
one-off; and asking first looks for an answered question of the same item that means the same
thing: found, the question is recorded answered with that answer (``reused_from``), with no
sub-chat and no model call. ``fresh`` asks anyway.

**Questions in flight are joined**: a question that means the same as one still unsettled about
the same item (the same comparison) is joined to it: no sub-chat, no model call, no new request to
the humans; it waits with that one and is settled with it (``joined_to``). Withdrawing one
withdraws no other: a withdrawn question whose sub-chat others wait on keeps its sub-chat running
for them. Identical asks arriving at once meet one at a time (:func:`_join_lock`).

Waiting for the answer is the runtime's (``planner/live/question_waits.py``): this module sends
``question_settled`` (``planner/domain/signals.py``) once an outcome is committed, and the runtime
wakes the question's waiters in every process.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, connection, transaction
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from planner.domain.services import answer_reuse, reuse_judge
from planner.domain.signals import question_settled
from planner.models import Question, QuestionStatus, Session
from tracker.db.locks import locked as row_locked
from tracker.errors import (
    ConflictError,
    InvalidStateError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from tracker.inputs import idempotency_key as checked_key
from tracker.inputs import one_line, refuse_nul
from tracker.models import ActivityEvent, Item, Project
from tracker.selectors import item_get
from tracker.services.activity import Actor, activity_record
from tracker.trust.permissions import (
    PLANNER_CHAT,
    PROJECT_ADMIN,
    TRACKER_READ,
    Principal,
    has_permission,
    require,
)

MAX_QUESTION_CHARS = 8_000
MAX_START_FAILURES = 3  # unexpected failures to start a question's sub-chat before the humans settle it


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


class QuestionNotWaitingError(InvalidStateError):
    """The question's first turn is not to start: it started already (in another process's pass),
    or the question was settled meanwhile."""


@dataclass(frozen=True)
class WaitingQuestion:
    """A question whose sub-chat's first turn is to start, as the event loop holds it
    (docs/architecture.md#one-bridge)."""

    id: int
    session_id: uuid.UUID
    asker_id: int
    asker: str  # the asker's username: whom the first message is from
    project_id: int
    text: str  # the question as asked: what the sub-chat's watchers see first


def _waiting(question: Question) -> WaitingQuestion:
    return WaitingQuestion(
        id=question.pk,
        session_id=question.session.pk,
        asker_id=question.asker_id,
        asker=question.asker.get_username(),
        project_id=question.project_id,
        text=question.text,
    )


@dataclass(frozen=True)
class Asked:
    question_id: int
    project_id: int
    replayed: bool = False  # asked before with the same idempotency key: nothing new was opened
    start: WaitingQuestion | None = None  # the sub-chat to start; None: replayed, reused or joined
    judge: reuse_judge.JudgeCall | None = None  # nothing recorded yet: ask again with its verdict


@transaction.atomic
def question_ask(
    *,
    user: User,
    project: Project,
    text: Any,
    item_key: Any = None,
    idempotency_key: Any = None,
    fresh: Any = False,
    verdict: reuse_judge.Verdict | None = None,
) -> Asked:
    """:func:`question_create`, idempotent with ``idempotency_key``: asking again with the same
    key (a client retrying a request whose answer it lost) returns the question first asked with
    it and opens nothing; the same key for another question is a conflict. Without a ``verdict``,
    a question the reuse judge should see first is not recorded: the answer carries the judge's
    call (``judge``), and the caller asks again with its verdict (``runner.ask``)."""
    key = checked_key(idempotency_key)
    fresh = _fresh(fresh)
    judging = verdict is None and not (key and _asked_with(user, key))
    asking = functools.partial(
        question_create,
        user=user,
        project=project,
        text=text,
        item_key=item_key,
        idempotency_key=key,
        fresh=fresh,
        verdict=verdict,
        judging=judging,
    )
    try:
        if not key:
            question = asking()
        else:
            try:
                with transaction.atomic():  # a savepoint: a racing twin's insert fails alone
                    question = asking(idempotency_key=key)
            except IntegrityError:
                first = _replayed(user=user, project=project, key=key, text=_text(text), item_key=item_key)
                return Asked(first.pk, project.pk, replayed=True)
    except reuse_judge.JudgeFirst as first:
        return Asked(0, project.pk, judge=first.call)
    opened = question.reused_from_id is None and question.joined_to_id is None
    return Asked(question.pk, project.pk, start=_waiting(question) if opened else None)


def _asked_with(user: User, key: str) -> bool:
    """Has ``user`` asked with idempotency ``key`` already (a retry, or a conflict: no judge)?"""
    return Question.objects.filter(asker=user, idempotency_key=key).exists()


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
    verdict: reuse_judge.Verdict | None = None,
    judging: bool = False,
) -> Question:
    """Record ``user``'s question (needs ``planner.chat``): answered at once with the answer of an
    answered question of the same item that means the same, or joined to an unsettled one that
    does (unless ``fresh``); else with its sub-chat opened (docs/domain.md#agents-questions)."""
    require(user, project, PLANNER_CHAT)
    text = _text(text)
    item = _item(project, item_key)
    vector = answer_reuse.text_vector(text)
    if vector is not None and not fresh:
        _join_lock(project, item)
        asking = _Asking(user, project, item, text, idempotency_key, vector)
        match = answer_reuse.reusable_answer(project=project, item=item, vector=vector)
        if match is None and verdict is not None:
            match = reuse_judge.judged_match(project=project, item=item, vector=vector, verdict=verdict)
        if match is not None:
            return _reused(asking, match)
        joinable = answer_reuse.joinable_question(project=project, item=item, vector=vector)
        if joinable is not None:
            return _joined(asking, joinable)
        call = (
            reuse_judge.judge_call(project=project, item=item, text=text, vector=vector) if judging else None
        )
        if call is not None:
            raise reuse_judge.JudgeFirst(call)
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


@dataclass(frozen=True)
class _Asking:
    """A question being recorded, before it is: who asks what, about which item."""

    user: User
    project: Project
    item: Item | None
    text: str
    idempotency_key: str
    vector: answer_reuse.Vector


def _join_lock(project: Project, item: Item | None) -> None:
    """Make identical questions about the item asked at once meet one at a time, so that each
    finds the one before it to join (for the transaction). SQLite takes one writer at a time
    already; PostgreSQL takes a lock of the transaction on the (project, item) pair, before any
    row lock, so that it waits in no cycle."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            key = (project.pk % 2**31, item.pk % 2**31 if item is not None else 0)
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", key)


def _reused(asking: _Asking, match: answer_reuse.Match) -> Question:
    """The question, recorded answered with ``match``'s answer: no sub-chat, no turn."""
    earlier = match.question
    question = _without_sub_chat(
        asking,
        match,
        "question.reused",
        {"reused_from": earlier.pk, "answer": earlier.answer[:200]},
        status=QuestionStatus.ANSWERED,
        answer=earlier.answer,
        answered_by=earlier.answered_by,
        answered_via=earlier.answered_via,
        human_id=earlier.human_id,
        confirmed=earlier.confirmed,
        answered_at=earlier.answered_at,
        reused_from=earlier,
    )
    transaction.on_commit(_waking(question.pk))
    return question


def _joined(asking: _Asking, match: answer_reuse.Match) -> Question:
    """The question, joined to ``match``'s unsettled question: it waits for that one's outcome, as
    that one stands now (open, or waiting for the humans with its reason)."""
    primary = match.question
    return _without_sub_chat(
        asking,
        match,
        "question.joined",
        {"joined_to": primary.pk},
        status=primary.status,
        reason=primary.reason,
        joined_to=primary,
    )


def _without_sub_chat(
    asking: _Asking, match: answer_reuse.Match, verb: str, data: dict[str, Any], **fields: Any
) -> Question:
    """The question, recorded with ``fields`` and no sub-chat of its own (never to start), and its
    activity event ``verb`` saying what it matched."""
    question = Question.objects.create(
        project=asking.project,
        asker=asking.user,
        item=asking.item,
        text=asking.text,
        idempotency_key=asking.idempotency_key,
        started=True,
        embedding=asking.vector.data,
        embedding_model=asking.vector.model,
        **fields,
    )
    said = {"text": asking.text[:200], "item": _key(question), "similarity": round(match.similarity, 3)}
    _record(question, Actor(user=asking.user), verb, {**said, **data})
    return question


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
    qs = Question.objects.filter(project=project).defer("embedding")  # kilobytes no reader needs
    qs = qs.select_related("project", "asker", "item__project", "session")
    # A joined question's sub-chat is the one of the question it joined: read with it, in the
    # same statement, rather than once for each joined question serialized.
    joined = Session.objects.filter(question_id=OuterRef("joined_to_id")).values("pk")[:1]
    qs = qs.annotate(joined_session_id=Subquery(joined))
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


def question_status(*, user: Principal, project_id: int, question_id: int) -> str:
    """The question's status, as a wait reads it again and again (one statement and the reader's
    access); NotFoundError for a question the user may not read (any more)."""
    status = (
        Question.objects.filter(pk=question_id, project_id=project_id)
        .values_list("status", flat=True)
        .first()
        if has_permission(user, project_id, TRACKER_READ)
        else None
    )
    if status is None:
        raise NotFoundError("Question not found.")
    return status


@transaction.atomic
def question_answer(*, session_id: uuid.UUID, user: User, answer: str) -> Question:
    """The planner answers its sub-chat's question (``answer_question``), acting for ``user``: the
    question and those joined to it that are still unsettled."""
    session = Session.objects.select_related("question__project", "question__item").get(pk=session_id)
    if session.question is None:
        raise InvalidStateError(
            "This session answers no question: answer_question is for question sub-chats."
        )
    own = session.question.pk  # a sub-chat's question is the first of its group
    actor = Actor(user=user, planner_session=session_id)
    request = answer_reuse.human_of_session(session_id)
    # The planner passes on a human's reply in its own words: the answer stands on that human's
    # word, but is kept (a decision, given to later questions) only once they confirm the wording.
    human = request.answered_by if request is not None else None
    return _answer_group(group_locked(own), own, actor, answer, human=human)[0]


UNSETTLED = (QuestionStatus.OPEN, QuestionStatus.NEEDS_HUMAN)


def group_locked(first: int) -> list[Question]:
    """The group of the question ``first`` (one joined to no other: a sub-chat's), locked, in one
    order (by id: the first asked first): it and every question joined to it."""
    locked = (
        row_locked(Question.objects.select_related("project", "asker", "item__project", "session"))
        .filter(Q(pk=first) | Q(joined_to_id=first))
        .order_by("pk")
    )
    return list(locked)


def first_of(question: Question) -> int:
    """The question that ``question``'s group is joined to: the one with the sub-chat."""
    return question.joined_to_id or question.pk


def _answer_group(
    group: list[Question], question_id: int, actor: Actor, answer: str, *, human: User | None
) -> list[Question]:
    """Answer the unsettled questions of the locked ``group`` (``human``: whose answer it is, or on
    whose reply the planner answered); those answered, ``question_id``'s own first when it was
    unsettled. An InvalidStateError when none was."""
    unsettled = sorted((q for q in group if q.status in UNSETTLED), key=lambda q: (q.pk != question_id, q.pk))
    if not unsettled:
        status = next((q.status for q in group if q.pk == question_id), "settled")
        raise InvalidStateError(f"The question is {status}; it takes no answer.")
    for question in unsettled:
        _answer(question, actor, answer, human=human)
    return unsettled


def _answer(question: Question, actor: Actor, answer: str, *, human: User | None) -> None:
    """Record ``actor``'s answer to the locked, unsettled ``question`` and wake its waiters once
    committed: ``human``'s (the planner's words of it when the planner acts), or the planner's own."""
    relayed = human is not None and actor.planner_session is not None
    question.status = QuestionStatus.ANSWERED
    question.answer = answer
    question.answered_by = f"user:{human.get_username()}" if human is not None else actor.label
    question.answered_via = actor.label if relayed else ""
    question.human = human
    question.answered_at = timezone.now()
    question.save(update_fields=["status", "answer", "answered_by", "answered_via", "human", "answered_at"])
    answer_reuse.vector_store(question)
    _record(question, actor, "question.answered", {"answer": answer[:200], "item": _key(question)})
    transaction.on_commit(_waking(question.pk))


@transaction.atomic
def question_answer_human(
    *, user: User, project: Project, question_id: Any, answer: Any, one_off: Any = False
) -> Question:
    """A member with ``planner.chat`` answers a question its sub-chat left to the project's humans
    (and with it those joined to the same); the answer is kept as a decision entry unless
    ``one_off``."""
    require(user, project, PLANNER_CHAT)
    if not isinstance(one_off, bool):
        raise ValidationError({"one_off": ["Expected true or false."]})
    found = question_get(user=user, project=project, question_id=question_id)
    group = group_locked(first_of(found))
    if any(q.status == QuestionStatus.OPEN for q in group):
        raise InvalidStateError(
            "The planner is still on this question; answer its request in the sub-chat, or wait until "
            "the question needs a human."
        )
    answered = _answer_group(group, found.pk, Actor(user=user), _text(answer, field="answer"), human=user)
    question = answered[0]
    if one_off:
        Question.objects.filter(pk__in=[q.pk for q in answered]).update(one_off=True)
        question.one_off = True
        return question
    session_id = Session.objects.filter(question_id=first_of(found)).values_list("pk", flat=True).first()
    answer_reuse.decision_record(question=question, human=user, session_id=session_id)
    return question


@transaction.atomic
def question_unanswered(*, question_id: int, reason: str) -> bool:
    """The question's sub-chat ended without answering it: it waits for the project's humans
    (``needs_human``) with ``reason``, and so do those joined to it; their waiters hear it at
    once. False if none was open (settled, or already waiting for the humans). ``question_id``:
    a sub-chat's question."""
    opened = [q for q in group_locked(question_id) if q.status == QuestionStatus.OPEN]
    for question in opened:
        question.status = QuestionStatus.NEEDS_HUMAN
        question.reason = reason
        question.save(update_fields=["status", "reason"])
        data = {"reason": reason[:200], "item": _key(question)}
        _record(question, Actor(user=question.asker), "question.needs_human", data)
        transaction.on_commit(_waking(question.pk))
    return bool(opened)


@dataclass(frozen=True)
class Withdrawn:
    question_id: int
    # The sub-chat to stop: the question's own, once no question joined to it waits on it any more.
    session_id: uuid.UUID | None


@transaction.atomic
def question_withdraw(*, user: User, project: Project, question_id: Any) -> Withdrawn:
    """The asker (or a project admin) withdraws an unsettled question, and no other: the sub-chat
    that questions joined to it still wait on runs on for them. Its turn is stopped by the caller
    (``runner.withdraw``) once nothing waits on it."""
    found = question_get(user=user, project=project, question_id=question_id)
    if found.asker_id != user.pk and not has_permission(user, project, PROJECT_ADMIN):
        raise PermissionDeniedError("Only the asker or a project admin may withdraw a question.")
    group = group_locked(first_of(found))
    question = next(q for q in group if q.pk == found.pk)
    if question.status not in UNSETTLED:
        raise InvalidStateError(f"The question is already {question.status}.")
    question.status = QuestionStatus.WITHDRAWN
    question.answered_at = timezone.now()
    question.save(update_fields=["status", "answered_at"])
    _record(question, Actor(user=user), "question.withdrawn", {"item": _key(question)})
    transaction.on_commit(_waking(question.pk))
    if any(q.status in UNSETTLED for q in group):
        return Withdrawn(question.pk, None)
    primary = group[0].joined_to_id or group[0].pk
    return Withdrawn(
        question.pk, Session.objects.filter(question_id=primary).values_list("pk", flat=True).first()
    )


@transaction.atomic
def question_unstartable(*, question_id: int, reason: str) -> None:
    """The question's sub-chat cannot start (its asker lost access, or it failed to start time
    after time): the humans settle it."""
    Question.objects.filter(pk=question_id).update(started=True)
    question_unanswered(question_id=question_id, reason=f"The planner could not start: {reason}")


@transaction.atomic
def question_start_failed(*, question_id: int, reason: str) -> bool:
    """Count an unexpected failure to start the question's sub-chat; past :data:`MAX_START_FAILURES`
    the humans settle it (:func:`question_unstartable`). True if it was left to them."""
    Question.objects.filter(pk=question_id).update(start_failures=F("start_failures") + 1)
    failures = Question.objects.filter(pk=question_id).values_list("start_failures", flat=True).first()
    if failures is None or failures < MAX_START_FAILURES:
        return False
    question_unstartable(question_id=question_id, reason=reason)
    return True


def questions_waiting(*, limit: int = 100) -> list[WaitingQuestion]:
    """Open questions whose first turn has not started, oldest first."""
    qs = Question.objects.filter(status=QuestionStatus.OPEN, started=False).select_related("asker", "session")
    return [_waiting(q) for q in qs.order_by("created_at", "pk")[:limit]]


def questions_waiting_on(session: Session) -> bool:
    """Whether a question still waits on the sub-chat: its own, or one joined to it, unsettled."""
    own = session.question_id
    if own is None:
        return False
    return Question.objects.filter(Q(pk=own) | Q(joined_to_id=own), status__in=UNSETTLED).exists()


def _waking(question_id: int) -> Callable[[], None]:
    """What wakes this process's waiters of the question, once the transaction commits."""

    def wake() -> None:
        question_settled.send(sender=None, question_id=question_id)

    return wake
