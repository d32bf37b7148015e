"""Writes of the planner: sessions, the transcript, tool calls, events, usage.

Each function is one transaction; the runner calls them from the event loop
on its database threads (``planner/ground/bridge.py``). A session has one writer at a time: the
process running its turn (or, when idle, whoever starts the next one under
the session's row lock).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, assert_never

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone
from redis import RedisError

from ballet.env import LimitsConfig
from planner.agent import frames
from planner.agent.calls import CallRecord
from planner.agent.frames import Frame, TurnEndReason
from planner.agent.loop import History
from planner.agent.messages import ChatMessage, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from planner.domain.metrics import TOOL_CALLS, TURNS
from planner.domain.prompt import prompt_reads
from planner.domain.selectors import TurnSetup, session_history, session_reader, tool_context_keep, turn_setup
from planner.domain.services.agent_questions import QuestionNotWaitingError, question_unanswered
from planner.domain.services.notes import NOTED_EVENT, notes_for, notes_summary, notes_text
from planner.domain.tools import ToolContext, ToolOutcome, call_tool
from planner.ground.process import PROCESS_ID, owner_alive
from planner.models import (
    Event,
    Message,
    MessageKind,
    Question,
    QuestionStatus,
    Session,
    SessionState,
    TitleSource,
    ToolCall,
    UsageRecord,
)
from tracker.db import sql
from tracker.db.locks import locked as row_locked
from tracker.errors import (
    ConflictError,
    InvalidStateError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    UnavailableError,
    ValidationError,
)
from tracker.inputs import refuse_nul
from tracker.models import Organization, Project
from tracker.selectors import activity_since
from tracker.trust.limits import LIMITER_UNAVAILABLE, rate_hit
from tracker.trust.permissions import (
    PLANNER_CHAT,
    access_loaded,
    access_query,
    access_scope,
    has_permission,
    require,
)

MAX_MESSAGE_CHARS = 32_000
MAX_TITLE = 200
INTERRUPTED_RESULT = json.dumps(
    {
        "error": {
            "code": "interrupted",
            "message": "The turn ended (its process stopped) before this call finished.",
        }
    }
)

ARCHIVED = "This chat is archived: it can be read but takes no more messages. Start a new chat instead."
RECOVERED = "The process running this turn stopped; the turn was recovered."

Meaning = Literal["started", "steered", "continued"]
Ended = Literal["ended", "steered", "superseded"]


class NotQueuedError(ConflictError):
    """No steering message of the caller waits: the planner already read it, or none was sent."""

    code = "not_queued"


class TurnsFullError(RateLimitedError):
    """The running-turn limit of ``scope`` (the user's, or the project's) refuses a turn for now."""

    def __init__(self, message: str, *, scope: Literal["user", "project"]) -> None:
        super().__init__(message)
        self.scope = scope


class TurnSupersededError(ConflictError):
    """The session no longer runs this turn: it was recovered (its process was taken for dead)
    and maybe a new turn started. The turn goes quiet without writing anything more."""


def check_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise ValidationError({"text": ["Write a message."]})
    if len(text) > MAX_MESSAGE_CHARS:
        raise ValidationError({"text": [f"At most {MAX_MESSAGE_CHARS} characters."]})
    refuse_nul(text=text)
    return text


@transaction.atomic
def session_create(
    *, user: User, project: Project, title: Any = "", parent: Session | None = None
) -> Session:
    """Open a chat session in ``project`` for ``user`` (needs ``planner.chat``)."""
    require(user, project, PLANNER_CHAT)
    refuse_nul(title=title)
    if not isinstance(title, str) or len(title) > MAX_TITLE:
        raise ValidationError({"title": [f"Expected a string of at most {MAX_TITLE} characters."]})
    if parent is not None and parent.project_id != project.pk:
        raise ValidationError({"parent": ["A sub-chat belongs to its parent's project."]})
    head = Organization.objects.values_list("activity_seq", flat=True).get(pk=project.organization_id)
    title = title.strip()
    return Session.objects.create(
        project=project,
        user=user,
        parent=parent,
        title=title,
        title_source=TitleSource.HUMAN if title else TitleSource.NONE,  # a given title is the human's
        last_seen_seq=head,
    )


def _append(session: Session, message: ChatMessage, turn: int, author: User | None = None) -> ChatMessage:
    """Insert ``message`` as the session's next one; the caller holds the transaction."""
    session.last_message_seq += 1
    stored = replace(message, seq=session.last_message_seq)
    sql.insert([_message_row(session.pk, turn, stored, author)])
    return stored


def _message_row(
    session_id: uuid.UUID, turn: int, message: ChatMessage, author: User | None = None
) -> Message:
    return Message(
        session_id=session_id,
        seq=message.seq,
        role=message.role,
        kind=message.kind,
        content=message.wire_content(),
        author=author,
        turn=turn,
    )


def _human(text: str, kind: str) -> ChatMessage:
    return ChatMessage(role="user", content=(TextBlock(text),), kind=kind)


@dataclass(frozen=True)
class Begin:
    meaning: Meaning
    turn: int
    message: ChatMessage | None  # None when steering: delivered at the next model call
    recovered: tuple[Frame, ...] = ()  # a dead turn of the session was recovered first: what to tell
    setup: TurnSetup | None = None  # where the turn it started or continued starts from
    # To send before the turn's own: the requests a reply resolved, the approved calls it ran.
    frames: tuple[Frame, ...] = ()


# The reply to a turn paused on requests (``planner/domain/services/human_requests.py``), given by the
# runner: the turn it resumes, or None when no request waits. It runs in session_begin's
# transaction, under its lock.
Reply = Callable[[Session, User, str], "Begin | None"]


@transaction.atomic
@sql.batched(ends_transaction=True)  # its writes go with the statements that follow them, or the commit
def session_begin(
    *, session_id: uuid.UUID, user: User, text: str, question: bool = False, reply: Reply | None = None
) -> Begin:
    """Give a human message its meaning: start, steer or continue a turn.

    A running session whose process died is recovered first, so the message
    starts a new turn. The limits of docs/trust.md#limits (messages per minute, running
    turns, queued steering) refuse a message before anything is written. A
    turn it starts or continues is opened in the same transaction: change
    notes delivered, ``turn_started`` recorded, its setup returned. To a turn
    paused on requests, the message is the reply (``planner/domain/services/human_requests.py``).
    A ``question``'s first message is not counted against the message rate
    (only the running-turn limits keep it waiting, docs/domain.md#agents-questions).
    """
    # What this turn's prompt will read, read with the locks (it asks what the session's last
    # start here asked, unless the project's skill changed since: then it reads it itself).
    with sql.reading_ahead(_PROMPT_READS.get(session_id, []), with_next=True):
        return _begin(session_id, user, text, question=question, reply=reply)


# Per session, what the prompt of its last turn started in this process read (session_begin).
_PROMPT_READS: dict[uuid.UUID, list[sql.Statement]] = {}
KEPT_PROMPT_READS = 10_000


def _begin(session_id: uuid.UUID, user: User, text: str, *, question: bool, reply: Reply | None) -> Begin:
    session, running = _lock_to_begin(session_id, user)
    recovered = _recover_if_dead(session)
    limits: LimitsConfig = settings.BALLET_LIMITS
    if question and session.state != SessionState.IDLE:
        raise QuestionNotWaitingError("This question's sub-chat has started already.")
    if session.state == SessionState.RUNNING:
        _check_steering(session, text, limits)
        _count_message(user, limits)
        session.steering = [*session.steering, {"text": text, "author": user.get_username()}]
        session.save(update_fields=["steering", "updated_at"])
        return Begin("steered", session.turn_count, None, recovered)
    continuing = session.state == SessionState.PAUSED
    _check_running_turns(session, user, limits, running)  # a reply resumes a turn: it counts like a start
    if continuing and reply is not None:
        _count_message(user, limits)
        replied = reply(session, user, text)
        if replied is not None:
            return replied
    if question:
        _question_started(session)
    elif not (continuing and reply is not None):
        _count_message(user, limits)
    if not continuing:
        session.turn_count += 1
    if not session.title:
        session.title = " ".join(text.split())[:60]
    history = session_history(session=session)  # as it stands before this turn's first messages
    kind = MessageKind.CONTINUE if continuing else MessageKind.HUMAN
    message = _run_here(session, history, _human(text, kind), user, also=("turn_count", "title"))
    meaning: Meaning = "continued" if continuing else "started"
    setup = _open(session, history, continued=continuing)
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


def _run_here(
    session: Session,
    history: History,
    first: ChatMessage | None,
    author: User | None,
    *,
    also: tuple[str, ...],
) -> ChatMessage | None:
    """Store ``first`` (and the change notes since the session last looked) as the turn's next
    messages, in the session and its ``history``, and make this process the turn's runner; the
    row is saved with the fields in ``also``. The caller holds the session's row lock. A retry
    has no ``first``: its turn answers the history as it stands."""
    stored = None
    if first is not None:
        stored = _append(session, first, session.turn_count, author)
        history.messages.append(stored)
    if session.project.organization.activity_seq > session.last_seen_seq:
        history.messages.extend(m for m, _ in _append_notes(session, session.turn_count, session.focus))
    session.state = SessionState.RUNNING
    session.turn_owner = PROCESS_ID
    session.heartbeat_at = timezone.now()
    session.answer_waiting = False  # the turn answers the history as it stands
    fields = ["last_message_seq", "last_seen_seq", "state", "turn_owner", "heartbeat_at", "answer_waiting"]
    _save(session, [*also, *fields])
    return stored


def _open(session: Session, history: History, *, continued: bool, retry: bool = False) -> TurnSetup:
    """Record ``turn_started`` (with the skill versions of its prompt); the turn's setup. What its
    prompt read is kept for the session's next start here (:func:`session_begin`)."""
    setup = turn_setup(session=session, history=history)
    tool_context_keep(session=session)
    if len(_PROMPT_READS) >= KEPT_PROMPT_READS:
        _PROMPT_READS.clear()
    _PROMPT_READS[session.pk] = prompt_reads(session.project)
    data: dict[str, Any] = {
        "continued": continued,
        "skills": [{"name": n, "version": v} for n, v in setup.skills],
        "model": setup.settings.model,
    }
    if retry:
        data["retry"] = True
    sql.insert([Event(session=session, kind="turn_started", turn=session.turn_count, data=data)])
    return setup


def _count_message(user: User, limits: LimitsConfig) -> None:
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
    delivered (``_deliver_inputs`` takes the same lock), never both and never lost; once the
    planner has read it (or nothing waits), :class:`NotQueuedError`.
    """
    session = _lock(session_id, user)
    if not session.steering:
        raise NotQueuedError(
            "Nothing of yours waits for the planner any more: it already read your last message "
            "(or none was queued), so there is nothing to take back."
        )
    *kept, last = session.steering
    session.steering = kept
    session.save(update_fields=["steering", "updated_at"])
    return str(last["text"])


def check_running_turns(session: Session) -> None:
    """:func:`_check_running_turns` for the session's owner, as whom a resumed turn runs; the
    caller holds the session's row lock."""
    _check_running_turns(session, session.user, settings.BALLET_LIMITS)


@dataclass(frozen=True)
class _Running:
    """The planner turns running but the session's own: its user's, and its project's."""

    mine: int
    here: int


def _check_running_turns(
    session: Session, user: User, limits: LimitsConfig, running: _Running | None = None
) -> None:
    """Refuse a new or continued turn past the running-turn limits of the user and the project;
    ``running``, if the caller counted them already under the project's row lock."""
    if running is None:
        # The project's row serializes turn starts in the project, so two cannot both take the last
        # place (SQLite's transactions here take the database's write lock first: serialized
        # already). Nobody reads the lock's row: in a batch it goes with the count, in one round trip.
        lock, count = _running_reads(sql.prep(Session, "id", session.pk), user)
        sql.write(*lock)
        running = _Running(*(sql.row(*count) or (0, 0)))
    counts = {"mine": running.mine, "here": running.here}
    if counts["mine"] >= limits.running_turns_per_user:
        raise TurnsFullError(
            f"You already have {limits.running_turns_per_user} planner turns running; "
            "wait for one to end, or stop one.",
            scope="user",
        )
    if counts["here"] >= limits.running_turns_per_project:
        raise TurnsFullError(
            f"{limits.running_turns_per_project} planner turns are already running in "
            f"{session.project.key}; try again when one has ended.",
            scope="project",
        )


def _lock(session_id: uuid.UUID, user: User) -> Session:
    """The session, locked, for its owner alone: nobody else speaks in someone's session."""
    return _lock_reading(session_id, user, counting=False)[0]


def _lock_to_begin(session_id: uuid.UUID, user: User) -> tuple[Session, _Running | None]:
    """:func:`_lock`; unless the session's turn runs, also the project's row locked and the turns
    running (:func:`_check_running_turns`), read in the same round trip as the lock."""
    return _lock_reading(session_id, user, counting=True)


def _lock_reading(session_id: uuid.UUID, user: User, *, counting: bool) -> tuple[Session, _Running | None]:
    """:func:`_lock`: the session's row lock and the user's access read in one round trip (a
    pipeline, docs/architecture.md#the-hot-path-in-sql), and with ``counting`` what
    :func:`_lock_to_begin` reads. The project's row lock comes after the session's, as everywhere."""
    key = sql.prep(Session, "id", session_id)
    reads = [_lock_statement(key), access_query([user.pk])]
    if counting:
        reads.extend(_running_reads(key, user, unless_running=True))
    with access_scope(within=True):
        found, access, *counted = sql.result_sets(reads)
        access_loaded([user.pk], access)
        session = _session_loaded(found[0]) if found else None
        if session is None or (session.user_id != user.pk and session.question_id is None):
            raise NotFoundError("Session not found.")
        require(user, session.project, PLANNER_CHAT)
    if session.archived_at is not None:
        raise InvalidStateError(ARCHIVED)
    if session.user_id != user.pk:
        raise PermissionDeniedError(
            "Only the agent that asked sends messages in a question's sub-chat; answer its questions "
            "in place."
        )
    session.user = user
    locked_project, count = counted or ([], [])
    return session, _Running(*count[0]) if locked_project else None


def _running_reads(
    key: Any, user: User, *, unless_running: bool = False
) -> tuple[sql.Statement, sql.Statement]:
    """The project's row lock of the session ``key`` (with ``unless_running``, only if its turn does
    not run: steering never waits on it), and the count of the turns running but its own, the
    user's and the project's."""
    project = "SELECT project_id FROM planner_session WHERE id = %s"
    project_params = [key]
    if unless_running:
        project, project_params = f"{project} AND state <> %s", [key, SessionState.RUNNING]
    lock = (f"SELECT id FROM tracker_project WHERE id = ({project}){sql.for_update()}", project_params)  # noqa: S608
    count = (
        "SELECT COALESCE(SUM(CASE WHEN user_id = %s THEN 1 ELSE 0 END), 0),"
        " COALESCE(SUM(CASE WHEN project_id = (SELECT project_id FROM planner_session WHERE id = %s)"
        " THEN 1 ELSE 0 END), 0) FROM planner_session WHERE state = %s AND id <> %s",
        [user.pk, key, SessionState.RUNNING, key],
    )
    return lock, count


def _lock_statement(key: Any) -> sql.Statement:
    """The session with its project and organization, its row locked, in SQL
    (docs/architecture.md#the-hot-path-in-sql)."""
    lock = f"{sql.for_update()} OF s" if connection.features.has_select_for_update_of else ""
    selected = f"{sql.columns(Session, 's')}, {sql.columns(Project, 'p')}, {sql.columns(Organization, 'o')}"
    statement = (
        f"SELECT {selected} FROM planner_session s JOIN tracker_project p ON p.id = s.project_id"  # noqa: S608
        f" JOIN tracker_organization o ON o.id = p.organization_id WHERE s.id = %s{lock}"
    )
    return statement, [key]


def _locked(session_id: uuid.UUID) -> Session | None:
    """The session with its project and organization, its row locked."""
    found = sql.row(*_lock_statement(sql.prep(Session, "id", session_id)))
    return None if found is None else _session_loaded(found)


def _session_loaded(found: sql.Row) -> Session:
    """The session of a row of :func:`_lock_statement`, with its project and organization."""
    ends = len(Session._meta.concrete_fields), len(Project._meta.concrete_fields)
    session = sql.load(Session, found[: ends[0]])
    session.project = sql.load(Project, found[ends[0] : ends[0] + ends[1]])
    session.project.organization = sql.load(Organization, found[ends[0] + ends[1] :])
    return session


def _save(session: Session, fields: list[str]) -> None:
    """``session.save(update_fields=fields)`` (with ``updated_at``), without the query compiler."""
    session.updated_at = timezone.now()
    values = {name: getattr(session, name) for name in dict.fromkeys([*fields, "updated_at"])}
    sql.update_later(Session, values, "id = %s", [sql.prep(Session, "id", session.pk)])


def session_inputs(*, session_id: uuid.UUID, turn: int, focus: list[str]) -> list[tuple[ChatMessage, str]]:
    """Deliver steering and change notes: store them as messages, advance last seen.

    Returns each new message with its author's name ("" for change notes). The
    common case, nothing new, costs one read and no transaction.
    """
    if not inputs_waiting(session_id=session_id):
        return []
    return _deliver_inputs(session_id=session_id, turn=turn, focus=focus)


def inputs_waiting(*, session_id: uuid.UUID) -> bool:
    """Is steering waiting, or has the organization's activity moved past what the session saw?"""
    return any(_waiting(session_id))


# What waits for a session's turn, over its row: the steering queued, what the session last saw of
# its organization's activity, and how far that activity has gone.
_WAITS = {
    "steering": "planner_session.steering",
    "seen": "planner_session.last_seen_seq",
    "activity": "(SELECT o.activity_seq FROM tracker_project p JOIN tracker_organization o"
    " ON o.id = p.organization_id WHERE p.id = planner_session.project_id)",
}
_WAITING = ", ".join(_WAITS.values())


def _waiting(session_id: uuid.UUID) -> tuple[bool, bool]:
    """Whether steering waits for the session's turn, and whether change notes do."""
    key = sql.prep(Session, "id", session_id)
    found = sql.row(f"SELECT {_WAITING} FROM planner_session WHERE id = %s", [key])  # noqa: S608
    if found is None:
        raise Session.DoesNotExist(f"Session {session_id} not found.")
    return _waits(found)


def _waits(found: sql.Row) -> tuple[bool, bool]:
    steering, last_seen, activity = found
    return bool(sql.json_out(steering)), activity > last_seen


@transaction.atomic
def _deliver_inputs(*, session_id: uuid.UUID, turn: int, focus: list[str]) -> list[tuple[ChatMessage, str]]:
    """Deliver steering and change notes: store them as messages, advance last seen.

    Returns each new message with its author's name ("" for change notes).
    """
    session = Session.objects.select_for_update(of=("self",)).select_related("project").get(pk=session_id)
    _check_current(session, turn)
    seen = session.last_seen_seq
    delivered = _append_steering(session, turn)
    delivered += _append_notes(session, turn, focus or session.focus)
    if delivered or session.last_seen_seq != seen:
        session.heartbeat_at = timezone.now()
        session.save(
            update_fields=["steering", "last_seen_seq", "last_message_seq", "heartbeat_at", "updated_at"]
        )
    return delivered


def _append_notes(session: Session, turn: int, focus: list[str]) -> list[tuple[ChatMessage, str]]:
    """Store the change notes of the organization's activity since the session last looked,
    as a message of ``turn``, and move its ``last_seen_seq``. The caller saves the row."""
    events = activity_since(organization_id=session.project.organization_id, after_seq=session.last_seen_seq)
    if not events:
        return []
    session.last_seen_seq = events[-1].seq
    reader = session_reader(session=session) or session.user
    noted = notes_for(
        events, session_label=f"planner:{session.pk}", project=session.project, user=reader, focus=focus
    )
    if not noted:
        return []
    message = _append(session, _human(notes_text(noted), MessageKind.CHANGES), turn)
    # What the note says, in a line for the chat's readers (the transcript's ``summary``).
    summary = {"seq": message.seq, "summary": notes_summary(noted)}
    Event.objects.create(session=session, kind=NOTED_EVENT, turn=turn, data=summary)
    return [(message, "")]


def _append_steering(session: Session, turn: int) -> list[tuple[ChatMessage, str]]:
    """Store the session's queued steering as its authors' messages of ``turn`` and empty the
    queue; each message with its author's name. The caller holds the row and saves it."""
    appended = []
    for item in session.steering:
        author = User.objects.filter(username=item["author"]).first()
        appended.append(
            (_append(session, _human(item["text"], MessageKind.STEER), turn, author), item["author"])
        )
    session.steering = []
    return appended


@dataclass(frozen=True)
class ToolRecord:
    """A tool call as it ran, stored with the round's results."""

    call: ToolUseBlock
    outcome: ToolOutcome
    duration_ms: float
    actor: str
    user_id: int


@dataclass
class StepRecords:
    """What a step of a turn stores beside its message, in the same transaction."""

    usage: list[CallRecord] = field(default_factory=list)
    tools: list[ToolRecord] = field(default_factory=list)
    project_id: int = 0

    def write(self, session_id: uuid.UUID, turn: int) -> None:
        usage, tools = self.rows(session_id, turn)
        if usage:
            sql.insert(usage)
        if tools:
            sql.insert(tools)

    def rows(self, session_id: uuid.UUID, turn: int) -> tuple[list[UsageRecord], list[ToolCall]]:
        """The rows to store (the records are then given up: stored with this step or never)."""
        usage = [_usage_row(self.project_id, session_id, r) for r in self.usage]
        tools = [_tool_row(session_id, turn, r) for r in self.tools]
        self.usage.clear()
        self.tools.clear()
        return usage, tools


def _tool_row(session_id: uuid.UUID, turn: int, record: ToolRecord) -> ToolCall:
    return ToolCall(
        session_id=session_id,
        turn=turn,
        tool_use_id=record.call.id,
        name=record.call.name,
        input=record.call.input,
        output=record.outcome.output,
        is_error=record.outcome.is_error,
        duration_ms=record.duration_ms,
        actor=record.actor,
        on_behalf_of_id=record.user_id,
    )


@dataclass(frozen=True)
class Saved:
    messages: list[ChatMessage]  # as stored, with their seqs
    inputs_waiting: bool  # steering or change notes wait for the next model call
    steering_waiting: bool = False
    ended: bool = False  # the answer ended the turn (``completed``)

    @property
    def message(self) -> ChatMessage:
        return self.messages[-1]


@transaction.atomic
@sql.batched(ends_transaction=True)  # the step's inserts go with the read of what waits, or the commit
def message_save(
    *,
    session_id: uuid.UUID,
    turn: int,
    after_seq: int,
    message: ChatMessage,
    usage: Usage | None = None,
    focus: list[str] | None = None,
    records: StepRecords | None = None,
    last: bool = False,
    then: ChatMessage | None = None,
    question_id: int | None = None,
) -> Saved:
    """Store an assistant answer (with its reported usage) or a tool-results message.

    ``records`` (metered calls, the round's tool calls) are written in the
    same transaction: one commit per step of a turn. The answer also says
    whether input waits for the next model call, sparing it a round trip. The
    ``last`` answer of a turn (no tool calls) ends it ``completed`` in the same
    transaction, unless steering waits: then the turn goes on. ``then``
    (the results of an answer's calls that only read) is stored right after it. ``question_id``:
    the question of a sub-chat, which a turn that ends here without answering leaves to the humans.
    """
    stored = [message] if then is None else [message, then]
    changes: dict[str, Any] = {"last_message_seq": after_seq + len(stored)}
    if usage is not None and usage.context_tokens:
        changes |= {"context_tokens": usage.context_tokens, "context_tokens_seq": after_seq + 1}
    if focus is not None:
        changes["focus"] = focus
    saved = [replace(m, seq=after_seq + i) for i, m in enumerate(stored, start=1)]
    if connection.vendor == "postgresql" and question_id is None:
        return _saved_at_once(session_id, turn, after_seq, changes, saved, records=records, end=last)
    advanced = _advance(session_id, turn, after_seq, changes, end=last)
    sql.insert([_message_row(session_id, turn, m) for m in saved])
    if records is not None:
        records.write(session_id, turn)
    if advanced.ended:
        sql.insert([Event(session_id=session_id, kind="turn_ended", turn=turn, data={"reason": "completed"})])
        if question_id is not None:
            question_unanswered(question_id=question_id, reason=UNANSWERED["completed"])
    return advanced.saved(saved)


def _saved_at_once(
    session_id: uuid.UUID,
    turn: int,
    after_seq: int,
    changes: dict[str, Any],
    saved: list[ChatMessage],
    *,
    records: StepRecords | None,
    end: bool,
) -> Saved:
    """:func:`message_save` on PostgreSQL in one statement, sent with the COMMIT: the row's
    update (:func:`_step`), the step's rows inserted only if it moved the row (the turn's end only
    if it ended it), and what waits read back (``sql.update_inserting``). Nothing is stored when
    the row did not move: then the refusal :func:`_advance` gives."""
    step = _step(session_id, turn, after_seq, changes, end=end)
    rows: list[tuple[Any, str]] = [(_message_row(session_id, turn, m), "") for m in saved]
    if records is not None:
        usage, tools = records.rows(session_id, turn)
        rows += [(row, "") for row in [*usage, *tools]]
    if end:
        done = Event(session_id=session_id, kind="turn_ended", turn=turn, data={"reason": "completed"})
        rows.append((done, "ended"))
    found = sql.update_inserting(
        Session, step.values, step.where, step.params, returning=_MOVED, inserting=rows
    )
    return step.advanced(found).saved(saved)


@dataclass(frozen=True)
class _Advanced:
    ended: bool  # the turn ended
    steering: bool = False  # or steering waits for its next model call
    notes: bool = False  # change notes wait for it

    def saved(self, messages: list[ChatMessage]) -> Saved:
        if self.ended:
            return Saved(messages=messages, inputs_waiting=False, ended=True)
        waiting = self.steering or self.notes
        return Saved(messages=messages, inputs_waiting=waiting, steering_waiting=self.steering)


# What a step's update returns: whether it ended the turn, and what waits (``_WAITS``).
_MOVED = {"ended": "planner_session.turn_owner = ''", **_WAITS}


@dataclass(frozen=True)
class _Step:
    """A step's update of the session's row (:func:`_step`)."""

    session_id: uuid.UUID
    turn: int
    values: dict[str, Any]
    where: str
    params: list[Any]

    def advanced(self, found: sql.Row | None) -> _Advanced:
        """What the update did, from the row it returned (``_MOVED``); refused if it moved none:
        the turn is no longer this process's, or something was stored since."""
        if found is None:
            current, params = _current(self.session_id, self.turn)
            if not sql.row(f"SELECT 1 FROM planner_session WHERE {current}", params):  # noqa: S608
                raise TurnSupersededError(f"Session {self.session_id} no longer runs turn {self.turn} here.")
            raise ConflictError(f"Session {self.session_id} changed under its running turn.")
        if found[0]:
            return _Advanced(ended=True)
        steering, notes = _waits(found[1:])
        return _Advanced(ended=False, steering=steering, notes=notes)


def _current(session_id: uuid.UUID, turn: int) -> tuple[str, list[Any]]:
    """The condition that this process runs ``turn`` of the session (the session's only writer
    then), and its parameters."""
    key = sql.prep(Session, "id", session_id)
    return "id = %s AND state = %s AND turn_owner = %s AND turn_count = %s", [
        key,
        SessionState.RUNNING,
        PROCESS_ID,
        turn,
    ]


def _step(session_id: uuid.UUID, turn: int, after_seq: int, changes: dict[str, Any], *, end: bool) -> _Step:
    """The update moving the session's row past the messages being stored, if this process runs
    ``turn`` and nothing was stored since ``after_seq`` (the seq check proves it); with ``end``,
    ending the turn unless steering waits (each column the end changes checks it itself)."""
    now = timezone.now()
    values: dict[str, Any] = changes | {"heartbeat_at": now, "updated_at": now}
    if end:
        idle = ("steering = %s", [sql.prep(Session, "steering", [])])
        values |= {
            "state": sql.Case(*idle, _state_after("completed")),
            "turn_owner": sql.Case(*idle, ""),
            "heartbeat_at": sql.Case(*idle, None, otherwise=now),
        }
    current, params = _current(session_id, turn)
    return _Step(session_id, turn, values, f"{current} AND last_message_seq = %s", [*params, after_seq])


def _advance(
    session_id: uuid.UUID, turn: int, after_seq: int, changes: dict[str, Any], *, end: bool
) -> _Advanced:
    """:func:`_step`'s update, made: whether it ended the turn, or else what waits for the turn's
    next model call (read by the update itself: no round trip of its own)."""
    step = _step(session_id, turn, after_seq, changes, end=end)
    key = step.params[0]
    returning = ", ".join(_MOVED.values())
    return step.advanced(
        sql.update_returning(Session, step.values, step.where, step.params, pk=key, returning=returning)
    )


def advance(session_id: uuid.UUID, turn: int, after_seq: int, changes: dict[str, Any]) -> None:
    """Change the row of the session whose running ``turn`` this process owns, if nothing was
    stored since ``after_seq`` (a turn pausing on requests); the caller holds the transaction."""
    _advance(session_id, turn, after_seq, changes, end=False)


def turn_continue(session: Session, results: ChatMessage) -> Begin:
    """Continue the session's turn that was paused on requests, now that none is pending: store
    the round's ``results``, deliver change notes, open the turn again in this process. The caller
    holds the session's row lock (its ``user`` loaded: the owner, as whom the turn acts)."""
    history = session_history(session=session)
    session.resume_waiting = False
    _run_here(session, history, results, None, also=("focus", "resume_waiting"))
    setup = _open(session, history, continued=True)
    return Begin("continued", session.turn_count, None, setup=setup)


def turn_close(session: Session, results: ChatMessage, *, reason: TurnEndReason) -> None:
    """End the session's paused turn for ``reason`` (stopped): store the round's ``results`` so the
    history stays valid. The caller holds the session's row lock."""
    _append(session, results, session.turn_count)
    _append_steering(session, session.turn_count)  # before the end, as turn_end stores it
    session.state = _state_after(reason)
    session.turn_owner = ""
    session.heartbeat_at = None
    session.resume_waiting = False
    fields = ["last_message_seq", "focus", "state", "turn_owner", "heartbeat_at", "resume_waiting"]
    session.save(update_fields=[*fields, "steering", "updated_at"])
    Event.objects.create(session=session, kind="turn_ended", turn=session.turn_count, data={"reason": reason})
    _question_left(session, reason)
    transaction.on_commit(TURNS.labels(reason).inc)


def tool_run(*, context: ToolContext, call: ToolUseBlock) -> ToolRecord:
    """Run one tool call; its record is stored with the round's results."""
    started = time.perf_counter()
    outcome = call_tool(call.name, call.input, context)
    TOOL_CALLS.labels(call.name, "error" if outcome.is_error else "ok").inc()
    return ToolRecord(
        call=call,
        outcome=outcome,
        duration_ms=(time.perf_counter() - started) * 1000,
        actor=context.actor.label,
        user_id=context.user.pk,
    )


@transaction.atomic
def summary_save(
    *, session_id: uuid.UUID, turn: int, summary: str, up_to: int, estimated_tokens: int
) -> None:
    Session.objects.filter(pk=session_id).update(
        summary=summary,
        summary_up_to=up_to,
        context_tokens=0,
        context_tokens_seq=0,
        updated_at=timezone.now(),
    )
    Event.objects.create(
        session_id=session_id,
        kind="planner.compacted",
        turn=turn,
        data={"up_to": up_to, "estimated_tokens": estimated_tokens},
    )


def _check_current(session: Session, turn: int) -> None:
    """Refuse the writes of a turn that is no longer the session's running turn in this process."""
    if not (
        session.state == SessionState.RUNNING
        and session.turn_owner == PROCESS_ID
        and session.turn_count == turn
    ):
        raise TurnSupersededError(f"Session {session.pk} no longer runs turn {turn} here.")


@dataclass(frozen=True)
class TurnEnd:
    """What :func:`turn_end` did: ``status`` "ended", "steered" (a completed turn has steering
    waiting, and goes on) or "superseded" (the session was recovered meanwhile); the steering the
    turn never read, stored before its end, with its authors' names
    (docs/architecture.md#stopping-pausing-answering)."""

    status: Ended
    steering: list[tuple[ChatMessage, str]] = field(default_factory=list)


@transaction.atomic
def turn_end(
    *,
    session_id: uuid.UUID,
    turn: int,
    reason: TurnEndReason,
    error: str | None,
    records: StepRecords | None = None,
    final: bool = False,
) -> TurnEnd:
    """Record the end of a turn, if it is still the session's running turn in this process.

    ``records`` (usage already paid for, tool calls that ran) are written in any case. A
    completed turn with steering waiting goes on ("steered"), unless it is ``final`` (it went on
    as often as it may). Steering the turn ends without reading is stored as its authors'
    messages before the end: it comes before anything sent later, in the history the next turn
    answers.
    """
    session = row_locked(Session.objects.all()).get(pk=session_id)
    if records is not None:
        records.write(session_id, turn)
    try:
        _check_current(session, turn)
    except TurnSupersededError:
        return TurnEnd("superseded")
    if reason == "completed" and session.steering and not final:
        return TurnEnd("steered")
    steering = _append_steering(session, turn)
    session.state = _state_after(reason)
    session.turn_owner = ""
    session.heartbeat_at = None
    session.save(
        update_fields=["state", "turn_owner", "heartbeat_at", "steering", "last_message_seq", "updated_at"]
    )
    data: dict[str, Any] = {"reason": reason}
    if error:
        data["error"] = error
    Event.objects.create(session_id=session_id, kind="turn_ended", turn=turn, data=data)
    _question_left(session, reason, error)
    return TurnEnd("ended", steering)


def steering_frames(steering: list[tuple[ChatMessage, str]]) -> list[Frame]:
    """The frames that show watchers steering stored for a turn that ended without reading it."""
    return [frames.user_message(seq=m.seq, text=m.text, author=a, kind="steer") for m, a in steering]


UNANSWERED: dict[TurnEndReason, str] = {
    "completed": "The planner ended its turn without answering.",
    "failed": "The planner's turn failed before it answered",
    "max_rounds": "The planner ran out of rounds before it answered.",
    "stopped": "The planner's turn was stopped before it answered.",
}


def _question_left(session: Session, reason: TurnEndReason, error: str | None = None) -> None:
    """A question's sub-chat whose turn ended without an answer leaves the question to the
    project's humans, saying why: a question never hangs."""
    if session.question_id is None:
        return
    why = f"{UNANSWERED[reason]}: {error}" if reason == "failed" and error else UNANSWERED[reason]
    question_unanswered(question_id=session.question_id, reason=why)


def _state_after(reason: TurnEndReason) -> SessionState:
    """The session's state once a turn ended for ``reason``: a turn out of rounds waits to be continued."""
    match reason:
        case "max_rounds":
            return SessionState.PAUSED
        case "completed" | "stopped" | "failed":
            return SessionState.IDLE
        case _:
            assert_never(reason)


def usage_save(*, project_id: int, session_id: uuid.UUID | None, record: CallRecord) -> None:
    _usage_row(project_id, session_id, record).save()


def _usage_row(project_id: int, session_id: uuid.UUID | None, record: CallRecord) -> UsageRecord:
    return UsageRecord(
        project_id=project_id,
        session_id=session_id,
        purpose=record.purpose,
        model=record.model,
        input_tokens=record.usage.input_tokens,
        output_tokens=record.usage.output_tokens,
        cache_creation_input_tokens=record.usage.cache_creation_input_tokens,
        cache_read_input_tokens=record.usage.cache_read_input_tokens,
        latency_ms=record.latency_ms,
        outcome=record.outcome,
        error=record.error,
    )


def _recovered_results(session: Session, pending: list[str]) -> ChatMessage:
    """Results for calls left unanswered: the recorded output where the call ran, else an error."""
    ran = {c.tool_use_id: c for c in ToolCall.objects.filter(session=session, tool_use_id__in=pending)}
    blocks = []
    for tool_use_id in pending:
        call = ran.get(tool_use_id)
        if call is not None:
            content, is_error = json.dumps(call.output, ensure_ascii=False, default=str), call.is_error
        else:
            content, is_error = INTERRUPTED_RESULT, True
        blocks.append(ToolResultBlock(tool_use_id, content, is_error=is_error))
    return ChatMessage(role="user", content=tuple(blocks), kind=MessageKind.TOOL_RESULTS)


def _recover(session: Session, *, answer: bool = True) -> tuple[Frame, ...]:
    """Close a turn whose process died: answer pending calls, keep the steering it never read,
    log the failure, go idle; the frames that tell watchers so.

    Steering accepted for the dead turn is stored as the humans' messages, and the session waits
    for a turn that answers them (``answer_waiting``; not when its owner stops it, ``answer``
    false): a message the server accepted is never lost, nor left unanswered.
    """
    last = Message.objects.filter(session=session).order_by("-seq").first()
    if last is not None and last.role == "assistant":
        pending = [b["id"] for b in last.content if b.get("type") == "tool_use"]
        if pending:
            _append(session, _recovered_results(session, pending), last.turn)
    steering = _append_steering(session, session.turn_count)
    Event.objects.create(
        session=session,
        kind="turn_ended",
        turn=session.turn_count,
        data={"reason": "failed", "error": RECOVERED},
    )
    session.state = SessionState.IDLE
    session.turn_owner = ""
    session.heartbeat_at = None
    session.answer_waiting = answer and bool(steering)
    fields = ["state", "turn_owner", "heartbeat_at", "steering", "last_message_seq", "answer_waiting"]
    session.save(update_fields=[*fields, "updated_at"])
    _question_left(session, "failed", RECOVERED)
    # Its process died before counting it: the turn is counted here, by whichever process
    # recovers it (the Celery sweep, or a daphne the session is opened in), once committed.
    transaction.on_commit(TURNS.labels("failed").inc)
    return (*steering_frames(steering), recovered_frame())


def recovered_frame() -> frames.TurnEndedFrame:
    """The ``turn_ended`` frame that tells watchers what :func:`_recover` stored."""
    return frames.turn_ended(reason="failed", error=RECOVERED)


def _recover_if_dead(session: Session, *, answer: bool = True) -> tuple[Frame, ...]:
    """:func:`_recover` if the session's turn lost its process; what to tell its watchers
    (nothing: it did not)."""
    if session.state != SessionState.RUNNING:
        return ()
    if owner_alive(session_id=session.pk, owner=session.turn_owner, heartbeat_at=session.heartbeat_at):
        return ()
    return _recover(session, answer=answer)


@dataclass(frozen=True)
class Recovered:
    """A session recovered from a dead turn: what to tell its watchers, and whether a turn must
    answer the steering the dead turn never read (:func:`turn_answer`)."""

    session_id: uuid.UUID
    frames: tuple[Frame, ...]
    answer_waiting: bool


@transaction.atomic
def session_recover_if_dead(*, session_id: uuid.UUID, answer: bool = True) -> Recovered | None:
    """Recover the session if its turn's process died (docs/architecture.md); None if it did not."""
    session = row_locked(Session.objects.filter(pk=session_id)).first()
    told = _recover_if_dead(session, answer=answer) if session is not None else ()
    if session is None or not told:
        return None
    return Recovered(session.pk, told, session.answer_waiting)


def sessions_recover_dead() -> list[Recovered]:
    """Recover every running session whose process died; the periodic sweep calls this."""
    running = Session.objects.filter(state=SessionState.RUNNING).values_list("pk", flat=True)
    return [found for pk in list(running) if (found := session_recover_if_dead(session_id=pk))]


@transaction.atomic
def turn_answer(*, session_id: uuid.UUID) -> Begin | None:
    """Start, in this process, the turn that answers the steering a dead turn never read
    (:func:`_recover`); None if nothing waits for it any more (a later message or another
    process started a turn, its owner lost ``planner.chat``, the chat was archived). Past the
    running-turn limits it raises :class:`TurnsFullError` and keeps waiting."""
    session = _locked(session_id)
    if session is None or session.state != SessionState.IDLE or not session.answer_waiting:
        return None
    session.user = User.objects.get(pk=session.user_id)
    if session.archived_at is not None or not has_permission(session.user, session.project, PLANNER_CHAT):
        session.answer_waiting = False
        _save(session, ["answer_waiting"])
        return None
    _check_running_turns(session, session.user, settings.BALLET_LIMITS)
    session.turn_count += 1
    history = session_history(session=session)
    _run_here(session, history, None, session.user, also=("turn_count",))
    setup = _open(session, history, continued=False)
    return Begin("started", session.turn_count, None, setup=setup)


def sessions_answer_waiting(*, limit: int = 100) -> list[tuple[uuid.UUID, int, int]]:
    """Sessions whose steering waits for a turn to answer it, longest waiting first: (id, owner,
    project)."""
    waiting = Session.objects.filter(state=SessionState.IDLE, answer_waiting=True).order_by("updated_at")
    return list(waiting.values_list("pk", "user_id", "project_id")[:limit])
