"""Reads of the planner: sessions a user may see, a turn's starting point, usage. A session's
transcript as pages and the API read it is planner/domain/transcripts.py."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from django.conf import settings
from django.db.models import BooleanField, Case, Count, Exists, F, OuterRef, Q, QuerySet, Sum, Value, When
from django.db.models.functions import TruncDate

from planner.agent import compaction
from planner.agent.demo import DEMO_MODEL
from planner.agent.loop import History, TurnSettings
from planner.agent.messages import ChatMessage, Provider, ToolDefinition, block_from_wire
from planner.domain.prompt import SUBCHAT_PROMPT, system_prompt
from planner.domain.tools import TOOLS, ToolContext, definitions
from planner.ground.histories import Kept
from planner.ground.process import histories
from planner.models import (
    HumanRequest,
    Message,
    MessageKind,
    QuestionStatus,
    RequestKind,
    RequestStatus,
    Session,
    SessionState,
    TitleSource,
    UsageRecord,
)
from tracker.db import model_rows, sql
from tracker.errors import NotFoundError
from tracker.models import Project
from tracker.repos.selectors import repositories_of
from tracker.selectors import demo_planner_reason, project_planner_config
from tracker.trust.crypto import decrypt
from tracker.trust.permissions import (
    PLANNER_CHAT,
    TRACKER_READ,
    AnyUser,
    Reader,
    has_permission,
    is_superuser,
    project_ids_with,
    visible_projects,
)


def session_list(
    *,
    user: AnyUser,
    project: Project | None = None,
    query: str = "",
    archived: bool = False,
    parent: Session | None = None,
) -> QuerySet[Session]:
    """The user's own sessions in projects they can still read, and the question sub-chats of
    projects where they may chat (docs/domain.md), archived ones left out (with ``archived``: only
    those); ``query`` keeps those whose title contains it (any case); ``parent``: only its
    sub-chats; ``waiting``: a request there waits for them."""
    qs = sessions_visible(user=user).filter(archived_at__isnull=not archived)
    if parent is not None:
        qs = qs.filter(parent=parent)
    if project is not None:
        qs = qs.filter(project=project)
    if query.strip():
        qs = qs.filter(title__icontains=query.strip())
    return qs


def sessions_visible(*, user: AnyUser) -> QuerySet[Session]:
    """Every session ``user`` may read, archived ones included (their transcript stays readable by
    its URL: the audit trail), annotated with ``waiting``: a request there is for them to answer
    or decide."""
    qs = Session.objects.filter(project__in=visible_projects(user)).select_related("project", "user")
    if not is_superuser(user):
        chat = project_ids_with(user, PLANNER_CHAT)
        qs = qs.filter(Q(user_id=user.pk or 0) | Q(question__isnull=False, project_id__in=chat))
    pending = HumanRequest.objects.filter(session=OuterRef("pk"), status=RequestStatus.PENDING)
    question = Q(kind=RequestKind.QUESTION)
    waiting = Case(  # the owner answers every request, but a sub-chat's asker only its questions
        When(question__status=QuestionStatus.NEEDS_HUMAN, then=Value(True)),
        When(question__isnull=False, user_id=user.pk or 0, then=Exists(pending.filter(question))),
        When(question__isnull=False, then=Exists(pending.filter(question | _decidable(user)))),
        # A sub-chat's end answers a start_subchat request, never a human.
        When(user_id=user.pk or 0, then=Exists(pending.exclude(kind=RequestKind.SUBCHAT))),
        default=Value(False),
        output_field=BooleanField(),
    )
    return qs.annotate(waiting=waiting).order_by("-updated_at")


def _decidable(user: AnyUser) -> Q:
    """The approvals of question sub-chats that ``user`` may decide (``requests.may_decide``):
    those of tools whose approver permission they hold in the sub-chat's project."""
    tools: dict[str, list[str]] = {}
    for name, spec in TOOLS.items():
        tools.setdefault(spec.approver, []).append(name)
    decidable = Q(pk__in=[])
    for permission, names in tools.items():
        projects = project_ids_with(user, permission)
        decidable |= Q(kind=RequestKind.APPROVAL, tool__in=names, session__project_id__in=projects)
    return decidable


def session_waiting_count(*, user: AnyUser, project: Project) -> int:
    """How many sessions of ``project`` wait for ``user`` (the chat list's and home page's count)."""
    return session_list(user=user, project=project).filter(Q(waiting=True)).count()


def session_get(*, user: AnyUser, session_id: uuid.UUID | str) -> Session:
    try:
        # Parsed here: a malformed id must not reach the database (Django's UUIDField raises its own error).
        pk = session_id if isinstance(session_id, uuid.UUID) else uuid.UUID(str(session_id))
        return sessions_visible(user=user).select_related("project__organization").get(pk=pk)
    except (Session.DoesNotExist, ValueError) as exc:
        raise NotFoundError("Session not found.") from exc


@dataclass(frozen=True)
class SessionView:
    """What the event loop needs of a session it may see (docs/architecture.md#one-bridge)."""

    id: uuid.UUID
    user_id: int  # its owner
    state: str
    last_message_seq: int
    turn_count: int
    answer_waiting: bool

    @classmethod
    def of(cls, found: Session) -> SessionView:
        return cls(
            id=found.pk,
            user_id=found.user_id,
            state=found.state,
            last_message_seq=found.last_message_seq,
            turn_count=found.turn_count,
            answer_waiting=found.answer_waiting,
        )


def session_view(*, user: AnyUser, session_id: uuid.UUID | str) -> SessionView:
    """:func:`session_get` as plain data."""
    return SessionView.of(session_get(user=user, session_id=session_id))


def session_project_seen(*, user: AnyUser, session_id: uuid.UUID | str) -> int | None:
    """The project of the session if ``user`` may see it, as :func:`sessions_visible` decides,
    from one statement and the user's access: what every frame of a chat checks
    (docs/architecture.md#the-hot-path-in-sql)."""
    try:
        pk = session_id if isinstance(session_id, uuid.UUID) else uuid.UUID(str(session_id))
    except ValueError:
        return None
    found = sql.row(
        "SELECT project_id, user_id, question_id FROM planner_session WHERE id = %s",
        [model_rows.prep(Session, "id", pk)],
    )
    if found is None:
        return None
    project_id, owner_id, question_id = found
    if not has_permission(user, project_id, TRACKER_READ):
        return None
    mine = owner_id == (user.pk or 0)
    if (
        is_superuser(user)
        or mine
        or (question_id is not None and has_permission(user, project_id, PLANNER_CHAT))
    ):
        return int(project_id)
    return None


def settings_page(project: Project) -> str:
    """The page where an owner sets the project's credential (``planner/web/settings_pages.py``)."""
    return f"/projects/{project.key}/settings/"


def _credential_unreadable(project: Project) -> str:
    return (
        "This project's Anthropic API key cannot be decrypted (the server's credential key changed). "
        f"An owner must set the project's credential again, on {settings_page(project)}."
    )


def _no_credential(project: Project) -> str:
    return (
        f"This project has no Anthropic API key. An owner can set one on {settings_page(project)} "
        "(or the server can set ANTHROPIC_API_KEY); until then the demo planner can answer "
        "(the project's provider setting: demo)."
    )


@dataclass(frozen=True)
class Credential:
    """The key a project's model calls use, or why there is none it may use."""

    api_key: str | None = field(repr=False)
    error: str | None = None


def project_credential(project: Project) -> Credential:
    """The project's own credential; the server's ANTHROPIC_API_KEY only if the project has none.

    A credential that no credential key decrypts is an error, never the server's key: the
    project's owner chose to pay with their own key (docs/trust.md#secrets).
    """
    if project.credential_encrypted:
        key = decrypt(project.credential_encrypted)
        if key is None:
            return Credential(api_key=None, error=_credential_unreadable(project))
        return Credential(api_key=key)
    server_key = settings.SERVER.anthropic_api_key
    return Credential(api_key=server_key, error=None if server_key else _no_credential(project))


def project_provider(project: Project) -> Provider:
    """Who answers the project's planner (docs/architecture.md#the-demo-planner): its ``provider``
    setting (the project's own, else the server's), or, unset, the demo planner when no credential
    is set anywhere (neither the project's nor ANTHROPIC_API_KEY), else Anthropic; the tracker's
    ``demo_planner_reason`` decides, and says why."""
    return "demo" if demo_planner_reason(project) is not None else "anthropic"


@dataclass(frozen=True)
class TurnSetup:
    """Where a turn starts from, as plain data: it crosses to the event loop
    (docs/architecture.md#one-bridge). Who the turn acts for and where are ids; its tools load them
    on the database threads (``planner/live/session_io.py``)."""

    history: History
    settings: TurnSettings
    skills: tuple[tuple[str, int], ...]
    user_id: int  # the session's owner: who the turn acts for
    project_id: int
    focus: list[str]
    approve_tools: tuple[str, ...] = ()  # tools whose calls wait for the human's approval
    question_id: int | None = None  # the question of a question's sub-chat
    parent_id: uuid.UUID | None = None  # the chat whose planner started this sub-chat (start_subchat)
    # The session's last stored message: the history's last, unless a retry superseded that one.
    last_seq: int = 0
    untitled: bool = False  # nobody named the chat yet: a title may be proposed after the turn
    token_budget: int | None = None  # the project's daily token budget (docs/trust.md), if it has one


def session_reader(*, session: Session) -> Reader | None:
    """What a question's sub-chat acts with, for its tools and change notes; None for any other chat
    (it acts as its owner).

    Every member of the project who may chat sees a sub-chat, so it acts as if its asker held this
    project's membership alone; and once humans answered or decided its requests in the running
    turn, with what they may do too (the intersection): an answer cannot make the planner do or
    read what its author could not. Read from the stored requests, so a restart changes nothing.
    """
    if session.question_id is None:
        return None
    decided = (
        HumanRequest.objects.filter(session_id=session.pk, turn=session.turn_count, answered_by__isnull=False)
        .exclude(answered_by_id=session.user_id)
        .select_related("answered_by")
        .order_by("resolved_at", "pk")
    )
    others = {r.answered_by_id: r.answered_by for r in decided if r.answered_by is not None}
    return Reader(users=(session.user, *others.values()), project_id=session.project_id)


# The tool context of the turns opened in this process, from their opening (which read the session's
# owner and project already) to their first round of tool calls: both on the database threads.
_OPENED: dict[uuid.UUID, tuple[int, ToolContext]] = {}
KEPT_OPENED = 10_000


def tool_context_keep(*, session: Session) -> None:
    """Keep what the turn ``session`` opens now acts with (its row as the opening holds it), for
    :func:`session_tool_context`."""
    if len(_OPENED) >= KEPT_OPENED:
        _OPENED.clear()
    context = ToolContext(
        user=session.user,
        project=session.project,
        session_id=session.pk,
        question_id=session.question_id,
        shared=session_reader(session=session),
    )
    _OPENED[session.pk] = (session.turn_count, context)


def session_tool_context(*, session_id: uuid.UUID, turn: int, focus: set[str]) -> ToolContext:
    """What the tools of the session's turn ``turn`` act with: its owner, its project and in a
    question's sub-chat its readers (:func:`session_reader`), as its opening in this process read
    them, else read now; ``focus`` is the turn's own."""
    opened = _OPENED.pop(session_id, None)
    if opened is not None and opened[0] == turn:
        context = opened[1]
    else:
        session = Session.objects.select_related("user", "project__organization").get(pk=session_id)
        context = ToolContext(
            user=session.user,
            project=session.project,
            session_id=session_id,
            question_id=session.question_id,
            shared=session_reader(session=session),
        )
    context.focus = focus
    return context


def session_tools(session: Session) -> tuple[ToolDefinition, ...]:
    """The tools ``session``'s model is shown: the repository reads only where its project links a
    repository, answer_question only in a question's sub-chat."""
    linked = session.project.linked_repositories  # read with the session's row on the hot path
    if linked is None:
        linked = bool(repositories_of(session.project))
    return definitions(question=session.question_id is not None, repositories=linked)


def turn_setup(*, session: Session, history: History) -> TurnSetup:
    """Everything a turn of ``session`` (its row as the caller holds it) starts from: its
    ``history``, the prompt and the project's settings."""
    config = project_planner_config(session.project)
    prompt = system_prompt(session.project)
    provider = project_provider(session.project)
    # The demo planner needs no key: it is never given one, nor an error for lacking it.
    credential = project_credential(session.project) if provider == "anthropic" else Credential(None)
    model = config.model if provider == "anthropic" else DEMO_MODEL
    turn_settings = TurnSettings(
        model=model,
        compaction_model=(config.compaction_model or config.model) if provider == "anthropic" else model,
        max_rounds=config.max_rounds,
        max_tokens=config.max_output_tokens,
        compact_at_tokens=config.compact_at_tokens,
        api_key=credential.api_key,
        system=prompt.text if session.parent_id is None else f"{prompt.text}\n\n{SUBCHAT_PROMPT}",
        tools=session_tools(session),
        credential_error=credential.error,
        provider=provider,
    )
    return TurnSetup(
        history=history,
        settings=turn_settings,
        skills=prompt.skills,
        user_id=session.user_id,
        project_id=session.project_id,
        focus=list(session.focus),
        approve_tools=config.approve_tools,
        question_id=session.question_id,
        parent_id=session.parent_id,
        last_seq=session.last_message_seq,
        untitled=session.title_source == TitleSource.NONE and session.question_id is None,
        token_budget=config.daily_token_budget,
    )


def session_history(*, session: Session) -> History:
    """The history a turn of ``session`` sends: the summary and the messages after it.

    The history this process kept when the session's last turn here ended
    (``planner/ground/histories.py``) is taken and only the messages stored since are
    read; the model never sees what the summary covers again.
    """
    kept = histories.take(session.pk)
    if kept is not None and _still_lines_up(kept, session):
        history = kept.history
        if kept.last_seq < session.last_message_seq:
            added = _chat_messages(session.pk, after=kept.last_seq)
            if len(added) != session.last_message_seq - kept.last_seq:
                return _history_read(session)  # a gap: read it all
            history.messages.extend(added)
        history.reported_tokens, history.reported_seq = session.context_tokens, session.context_tokens_seq
        return history
    return _history_read(session)


def context_estimate(*, session: Session) -> int:
    """The context the session's next model call would send, in tokens, estimated as the
    compaction check estimates it (docs/domain.md#planner-sessions): the provider's reported usage of the last
    answer plus the messages stored since, or everything at four characters a token when
    no usage was reported yet."""
    after = session.summary_up_to or 0
    if session.context_tokens:
        after = max(after, session.context_tokens_seq)
        messages = _chat_messages(session.pk, after=after)
        return compaction.estimate_tokens(
            messages=messages,
            reported_tokens=session.context_tokens,
            reported_seq=session.context_tokens_seq,
            summary="",
            system="",
            tools=(),
        )
    return compaction.estimate_tokens(
        messages=_chat_messages(session.pk, after=after),
        reported_tokens=0,
        reported_seq=0,
        summary=session.summary,
        system=system_prompt(session.project).text,
        tools=session_tools(session),
    )


def _still_lines_up(kept: Kept, session: Session) -> bool:
    return (
        kept.history.summary_up_to == session.summary_up_to
        and kept.history.summary == session.summary
        and kept.last_seq <= session.last_message_seq
        # Kept before a message was superseded, it may hold it (docs/protocol.md#retry-and-edit).
        and (session.superseded_through == 0 or kept.last_seq > session.superseded_through)
    )


def _history_read(session: Session) -> History:
    after = session.summary_up_to or 0
    # A chat's first message finds nothing stored: no query (the ORM's is a millisecond of the
    # database thread, at the start of every new chat).
    stored = session.last_message_seq > after
    return History(
        messages=_chat_messages(session.pk, after=after) if stored else [],
        summary=session.summary,
        summary_up_to=session.summary_up_to,
        reported_tokens=session.context_tokens,
        reported_seq=session.context_tokens_seq,
    )


def _chat_messages(session_id: uuid.UUID, *, after: int) -> list[ChatMessage]:
    """The messages after ``after`` the model is sent: superseded ones left out."""
    rows = Message.objects.filter(session_id=session_id, seq__gt=after, superseded=False).order_by("seq")
    return [
        ChatMessage(
            role="assistant" if role == "assistant" else "user",
            content=tuple(block_from_wire(b) for b in content),
            kind=kind,
            seq=seq,
        )
        for seq, role, kind, content in rows.values_list("seq", "role", "kind", "content")
    ]


def usage_by_day(*, project: Project, since: date | None = None) -> list[dict[str, Any]]:
    """Metered model use of ``project`` per day and model, newest day first."""
    qs = UsageRecord.objects.filter(project=project)
    if since is not None:
        qs = qs.filter(created_at__date__gte=since)
    rows = (
        qs.annotate(day=TruncDate("created_at"))
        .values("day", "model")
        .annotate(
            calls=Count("id"),
            input_tokens=Sum("input_tokens"),
            output_tokens=Sum("output_tokens"),
            cache_creation_input_tokens=Sum("cache_creation_input_tokens"),
            cache_read_input_tokens=Sum("cache_read_input_tokens"),
        )
        .order_by("-day", "model")
    )
    return list(rows)


def utc_day_start(moment: datetime) -> datetime:
    """00:00 UTC of ``moment``'s UTC day: where the daily token budget starts again."""
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def tokens_used_since(*, project_id: int, since: datetime) -> int:
    """Every token metered for the project since ``since``: input, output, and the input written
    to and read from the prompt cache, which the provider processed too (one aggregate on the
    ``(project, created_at)`` index)."""
    processed = F("input_tokens") + F("output_tokens")
    processed += F("cache_creation_input_tokens") + F("cache_read_input_tokens")
    total = UsageRecord.objects.filter(project_id=project_id, created_at__gte=since).aggregate(
        tokens=Sum(processed)
    )["tokens"]
    return int(total or 0)


def work_waiting() -> bool:
    """Whether a question, an answered turn, steering a dead turn never read or a sub-chat its
    parent waits for waits for a free turn (after a turn has ended: off the path of any frame)."""
    found = sql.row(
        "SELECT EXISTS (SELECT 1 FROM planner_question WHERE status = %s AND NOT started),"
        " EXISTS (SELECT 1 FROM planner_session WHERE state = %s AND resume_waiting),"
        " EXISTS (SELECT 1 FROM planner_session WHERE state = %s AND answer_waiting),"
        " EXISTS (SELECT 1 FROM planner_humanrequest r JOIN planner_session c"
        " ON c.parent_id = r.session_id WHERE r.kind = %s AND r.status = %s AND c.state = %s"
        " AND c.turn_count = 0)",
        [
            QuestionStatus.OPEN,
            SessionState.PAUSED,
            SessionState.IDLE,
            RequestKind.SUBCHAT,
            RequestStatus.PENDING,
            SessionState.IDLE,
        ],
    )
    return found is not None and any(found)


@dataclass(frozen=True)
class TitleSubject:
    """A chat still unnamed, as its title is proposed from it (``planner/live/titles.py``)."""

    project: Project
    title_calls: int  # title calls metered for the chat so far
    first: list[tuple[str, list[Any]]]  # its first turn's human and assistant messages: kind, content


def title_subject(*, session_id: uuid.UUID) -> TitleSubject | None:
    """The chat ``session_id`` with its project, the title calls made for it and its first turn's
    messages; None when it is gone, named already, or a question's sub-chat (titled by its
    question). In one round trip, without the query compiler: every chat asks once, as its first
    turn ends, while other chats stream (docs/architecture.md#the-hot-path-in-sql)."""
    key = model_rows.prep(Session, "id", session_id)
    chat = (
        f"SELECT s.title_source, s.question_id, {model_rows.columns(Project, 'p')},"  # noqa: S608
        " (SELECT COUNT(*) FROM planner_usagerecord u WHERE u.session_id = s.id AND u.purpose = %s)"
        " FROM planner_session s JOIN tracker_project p ON p.id = s.project_id WHERE s.id = %s",
        ["title", key],
    )
    first = (
        f"SELECT {model_rows.columns(Message)} FROM planner_message"  # noqa: S608
        " WHERE session_id = %s AND turn = 1 AND kind IN (%s, %s) ORDER BY seq",
        [key, MessageKind.HUMAN, MessageKind.ASSISTANT],
    )
    found, messages = sql.result_sets([chat, first])
    if not found or found[0][0] != TitleSource.NONE or found[0][1] is not None:
        return None
    loaded = [model_rows.load(Message, row) for row in messages]
    return TitleSubject(
        project=model_rows.load(Project, found[0][2:-1]),
        title_calls=int(found[0][-1]),
        first=[(m.kind, m.content) for m in loaded],
    )
