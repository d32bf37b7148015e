"""What every verb of a session shares: its errors and limits, its row read and locked, and
messages appended to its transcript."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import Any, Literal

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from ballet.env import LimitsConfig
from planner.agent.messages import ChatMessage, TextBlock
from planner.ground.process import PROCESS_ID
from planner.models import (
    Message,
    Session,
    SessionState,
)
from tracker.db import model_rows, sql
from tracker.errors import (
    ConflictError,
    InvalidStateError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    ValidationError,
)
from tracker.inputs import refuse_nul
from tracker.models import Organization, Project
from tracker.trust.permissions import (
    PLANNER_CHAT,
    access_loaded,
    access_query,
    access_scope,
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


def message_text_problem(text: Any) -> tuple[str, str] | None:
    """What is wrong with a message's text, if anything, as (code, words): the one rule of a
    message's text, which every interface applies (REST and the socket before the domain does)."""
    if not isinstance(text, str) or not text.strip():
        return ("invalid", "A message needs a non-empty text.")
    if len(text) > MAX_MESSAGE_CHARS:
        return ("too_large", f"A message is at most {MAX_MESSAGE_CHARS} characters.")
    return None


def check_text(text: Any) -> str:
    """``text``, if :func:`message_text_problem` finds nothing wrong with it and it has no NUL."""
    problem = message_text_problem(text)
    if problem is not None:
        raise ValidationError({"text": [problem[1]]})
    refuse_nul(text=text)
    return str(text)


def append(session: Session, message: ChatMessage, turn: int, author: User | None = None) -> ChatMessage:
    """Insert ``message`` as the session's next one; the caller holds the transaction."""
    session.last_message_seq += 1
    stored = replace(message, seq=session.last_message_seq)
    model_rows.insert([message_row(session.pk, turn, stored, author)])
    return stored


def message_row(
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


def human(text: str, kind: str) -> ChatMessage:
    return ChatMessage(role="user", content=(TextBlock(text),), kind=kind)


def check_running_turns(session: Session) -> None:
    """:func:`turns_limit_check` for the session's owner, as whom a resumed turn runs; the
    caller holds the session's row lock."""
    turns_limit_check(session, session.user, settings.BALLET_LIMITS)


@dataclass(frozen=True)
class _Running:
    """The planner turns running but the session's own: its user's, and its project's."""

    mine: int
    here: int


def turns_limit_check(
    session: Session, user: User, limits: LimitsConfig, running: _Running | None = None
) -> None:
    """Refuse a new or continued turn past the running-turn limits of the user and the project;
    ``running``, if the caller counted them already under the project's row lock."""
    if running is None:
        # The project's row serializes turn starts in the project, so two cannot both take the last
        # place (SQLite's transactions here take the database's write lock first: serialized
        # already). Nobody reads the lock's row: in a batch it goes with the count, in one round trip.
        lock, count = _running_reads(model_rows.prep(Session, "id", session.pk), user)
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


def session_lock(session_id: uuid.UUID, user: User) -> Session:
    """The session, locked, for its owner alone: nobody else speaks in someone's session."""
    return _lock_reading(session_id, user, counting=False)[0]


def lock_to_begin(session_id: uuid.UUID, user: User) -> tuple[Session, _Running | None]:
    """:func:`session_lock`; unless the session's turn runs, also the project's row locked and the turns
    running (:func:`turns_limit_check`), read in the same round trip as the lock."""
    return _lock_reading(session_id, user, counting=True)


def _lock_reading(session_id: uuid.UUID, user: User, *, counting: bool) -> tuple[Session, _Running | None]:
    """:func:`session_lock`: the session's row lock and the user's access read in one round trip (a
    pipeline, docs/architecture.md#the-hot-path-in-sql), and with ``counting`` what
    :func:`lock_to_begin` reads. The project's row lock comes after the session's, as everywhere."""
    key = model_rows.prep(Session, "id", session_id)
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
    """The session with its project and organization, its row locked, and whether the project
    links a repository, in SQL (docs/architecture.md#the-hot-path-in-sql)."""
    lock = f"{sql.for_update()} OF s" if connection.features.has_select_for_update_of else ""
    selected = ", ".join(
        model_rows.columns(model, alias)
        for model, alias in ((Session, "s"), (Project, "p"), (Organization, "o"))
    )
    # Whether the project links a repository (its tools are shown then), in the same round trip.
    linked = "EXISTS (SELECT 1 FROM tracker_repository r WHERE r.project_id = p.id)"
    statement = (
        f"SELECT {selected}, {linked} FROM planner_session s JOIN tracker_project p ON p.id = s.project_id"  # noqa: S608
        f" JOIN tracker_organization o ON o.id = p.organization_id WHERE s.id = %s{lock}"
    )
    return statement, [key]


def session_locked(session_id: uuid.UUID) -> Session | None:
    """The session with its project and organization, its row locked."""
    found = sql.row(*_lock_statement(model_rows.prep(Session, "id", session_id)))
    return None if found is None else _session_loaded(found)


def _session_loaded(found: sql.Row) -> Session:
    """The session of a row of :func:`_lock_statement`, with its project and organization."""
    ends = len(Session._meta.concrete_fields), len(Project._meta.concrete_fields)
    session = model_rows.load(Session, found[: ends[0]])
    session.project = model_rows.load(Project, found[ends[0] : ends[0] + ends[1]])
    session.project.organization = model_rows.load(Organization, found[ends[0] + ends[1] : -1])
    session.project.linked_repositories = bool(found[-1])
    return session


def session_save(session: Session, fields: list[str]) -> None:
    """``session.save(update_fields=fields)`` (with ``updated_at``), without the query compiler."""
    session.updated_at = timezone.now()
    values = {name: getattr(session, name) for name in dict.fromkeys([*fields, "updated_at"])}
    model_rows.update_later(Session, values, "id = %s", [model_rows.prep(Session, "id", session.pk)])


# What waits for a session's turn, over its row: the steering queued, what the session last saw of
# its organization's activity, and how far that activity has gone.
WAITS = {
    "steering": "planner_session.steering",
    "seen": "planner_session.last_seen_seq",
    "activity": "(SELECT o.activity_seq FROM tracker_project p JOIN tracker_organization o"
    " ON o.id = p.organization_id WHERE p.id = planner_session.project_id)",
}


_WAITING = ", ".join(WAITS.values())


def waiting(session_id: uuid.UUID) -> tuple[bool, bool]:
    """Whether steering waits for the session's turn, and whether change notes do."""
    key = model_rows.prep(Session, "id", session_id)
    found = sql.row(f"SELECT {_WAITING} FROM planner_session WHERE id = %s", [key])  # noqa: S608
    if found is None:
        raise Session.DoesNotExist(f"Session {session_id} not found.")
    return waits(found)


def waits(found: sql.Row) -> tuple[bool, bool]:
    steering, last_seen, activity = found
    return bool(sql.json_out(steering)), activity > last_seen


def check_current(session: Session, turn: int) -> None:
    """Refuse the writes of a turn that is no longer the session's running turn in this process."""
    if not (
        session.state == SessionState.RUNNING
        and session.turn_owner == PROCESS_ID
        and session.turn_count == turn
    ):
        raise TurnSupersededError(f"Session {session.pk} no longer runs turn {turn} here.")
