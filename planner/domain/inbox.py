"""The inbox (docs/domain.md#the-inbox): what waits for one user, across every project they may read.

Most entries are derived from the plan's and the planner's state, never stored: a question from an
agent left to the humans, a request or approval of the planner, a changeset to review, a ticket in
review, a claim of theirs that expired. Two kinds are rows of their own: a pending invitation, and a
stored notice (a mention, a comment on a watched ticket, a revoked key). An entry's id names what
it is about (``changeset-DEMO-12``), so a dismissal (a ``Dismissal`` row) keeps naming it; an entry
that changes in a way worth a second look gets a new id (a ticket in review: its version).

Who sees what is decided with the one permission check: the projects the user holds each
permission in are read once, and every source filters by them in SQL. Each source is one queryset
annotated with its entries' ids (``entry``) and times (``at``): the list reads each once, the count
reads all of them in one statement (a ``UNION ALL``), whatever the number of projects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from django.contrib.auth.models import User
from django.db.models import CharField, F, Q, QuerySet, Value
from django.db.models.functions import Cast, Coalesce, Concat, Replace
from django.utils import timezone

from planner.domain.tools import TOOLS
from planner.models import HumanRequest, Question, QuestionStatus, RequestKind, RequestStatus
from tracker.models import (
    Changeset,
    ChangesetStatus,
    Claim,
    ClaimStatus,
    Dismissal,
    Invitation,
    InvitationStatus,
    Item,
    ItemKind,
    Notice,
    Project,
)
from tracker.selectors import project_planner_config
from tracker.trust.permissions import (
    CHANGESET_APPLY,
    PLANNER_CHAT,
    TRACKER_READ,
    AnyUser,
    access_of,
    access_scope,
    key_bound,
    project_ids_with,
)

MAX_ENTRIES: Final = 200  # the inbox shows the newest this many
EXPIRED_CLAIM_DAYS: Final = 7  # an expired claim stays in its holder's inbox this long
CONFIRM_DAYS: Final = 7  # the planner's words of a reply wait this long for their human to confirm them
MAX_TITLE: Final = 200  # a question's text is cut to this many characters for its title

# An entry's kind, in words: what the page and the header say.
KIND_WORDS: Final[dict[str, str]] = {
    "question": "Question from an agent",
    "confirm": "Confirm the planner's answer",
    "request": "The planner asks you",
    "approval": "Approval waiting for you",
    "changeset": "Changeset to review",
    "review": "Ticket in review",
    "claim_expired": "Your claim expired",
    "invitation": "Invitation",
    # Stored notices (tracker.models.Notice.kind), written where what they tell happens.
    "mention": "Mention",
    "comment": "Comment on a ticket you watch",
    "watched": "A ticket you watch moved",
    "key_revoked": "Key revoked",
    "webhook_disabled": "Webhook disabled",
}
NOTICE_WORDS: Final = "Notice"  # a stored notice of a kind not named above


@dataclass(frozen=True)
class InboxEntry:
    """One thing waiting for the user: ``title`` is plain text (escape it), ``url`` a path here."""

    id: str
    kind: str
    project: str | None  # the project's key
    title: str
    url: str
    created_at: datetime

    @property
    def words(self) -> str:
        return KIND_WORDS.get(self.kind, NOTICE_WORDS)

    @property
    def invitation_id(self) -> int | None:
        """The invitation's id, for its Accept and Decline buttons; None for other entries."""
        if self.kind != "invitation":
            return None
        return int(self.id.removeprefix("invitation-"))


@dataclass(frozen=True)
class _Reach:
    """The projects ``user`` holds what each source needs in, read once (the one permission check)."""

    user: User
    readable: list[int]
    chat: list[int]
    applying: list[Project]  # loaded: four eyes is each one's own setting
    approvers: dict[str, list[int]]  # a tool's approver permission -> the projects it is held in
    now: datetime
    bound: bool = False  # an API key bound to projects: nothing outside them, invitations included


def _reach(user: User) -> _Reach:
    with access_scope(within=True):  # the user's access read once, whoever asks for it below
        return _reach_now(user)


def _reach_now(user: User) -> _Reach:
    now, bound = timezone.now(), key_bound(user) is not None
    if access_of(user).superuser:  # every project: read once
        projects = list(Project.objects.all())
        everywhere = [p.pk for p in projects]
        return _Reach(user, everywhere, everywhere, projects, _approvers(user, everywhere), now, bound)
    apply_ids = project_ids_with(user, CHANGESET_APPLY)
    applying = list(Project.objects.filter(pk__in=apply_ids)) if apply_ids else []
    readable, chat = project_ids_with(user, TRACKER_READ), project_ids_with(user, PLANNER_CHAT)
    return _Reach(user, readable, chat, applying, _approvers(user, None), now, bound)


def _approvers(user: User, everywhere: list[int] | None) -> dict[str, list[int]]:
    permissions = {spec.approver for spec in TOOLS.values()}
    if everywhere is not None:
        return {permission: everywhere for permission in permissions}
    return {permission: project_ids_with(user, permission) for permission in permissions}


def _text(value: Any) -> Cast:
    return Cast(value, output_field=CharField())


def _id(prefix: str, *parts: Any) -> Concat:
    """An entry's id in SQL: ``prefix-`` then ``parts`` joined by hyphens."""
    joined: list[Any] = [Value(f"{prefix}-")]
    for n, part in enumerate(parts):
        if n:
            joined.append(Value("-"))
        joined.append(part)
    return Concat(*joined, output_field=CharField())


def _questions(reach: _Reach) -> QuerySet[Question]:
    """Agents' questions left to the humans (``needs_human``), for those who may answer them: the
    project's members with planner.chat, in the question's sub-chat; its asker waits, not answers."""
    return (
        Question.objects.filter(
            status=QuestionStatus.NEEDS_HUMAN,
            project_id__in=sorted(set(reach.chat) & set(reach.readable)),
            session__isnull=False,
        )
        .exclude(asker=reach.user)
        .annotate(entry=_id("question", _text("pk")), at=F("created_at"))
    )


def _confirmations(reach: _Reach) -> QuerySet[Question]:
    """Answers the planner worded from the user's reply, for the week after: theirs to confirm (only
    then are they kept: docs/domain.md#agents-questions), or to dismiss."""
    return (
        Question.objects.filter(
            status=QuestionStatus.ANSWERED,
            human=reach.user,
            confirmed=False,
            project_id__in=sorted(set(reach.chat) & set(reach.readable)),
            session__isnull=False,
            answered_at__gte=reach.now - timedelta(days=CONFIRM_DAYS),
        )
        .exclude(answered_via="")
        .annotate(entry=_id("confirm", _text("pk")), at=F("answered_at"))
    )


def _requests(reach: _Reach) -> QuerySet[HumanRequest]:
    """The planner's pending requests the user is to answer or decide, as ``sessions_visible``'s
    ``waiting`` says: in their own chat every one; in a question's sub-chat its questions go to every
    member who may chat (the asker too), its approvals to the members holding the tool's approver
    permission, its asker apart."""
    user = reach.user
    mine = Q(session__user=user)
    decidable = Q(pk__in=[])
    for permission, projects in reach.approvers.items():
        tools = [name for name, spec in TOOLS.items() if spec.approver == permission]
        decidable |= Q(kind=RequestKind.APPROVAL, tool__in=tools, session__project_id__in=projects)
    sub_chat = Q(session__question__isnull=False)
    waiting = (
        (Q(session__question__isnull=True) & mine & ~Q(kind=RequestKind.SUBCHAT))
        | (sub_chat & mine & Q(kind=RequestKind.QUESTION))
        | (
            sub_chat
            & ~mine
            & Q(session__project_id__in=reach.chat)
            & (Q(kind=RequestKind.QUESTION) | decidable)
        )
    )
    return (
        HumanRequest.objects.filter(status=RequestStatus.PENDING, session__project_id__in=reach.readable)
        .filter(waiting)
        .annotate(entry=_id("request", Replace(_text("pk"), Value("-"), Value(""))), at=F("created_at"))
    )


def _changesets(reach: _Reach) -> QuerySet[Changeset]:
    """Proposed changesets the user may decide: they hold changeset.apply there, and, where the
    project asks for four eyes, someone else proposed it."""
    four_eyes = [p.pk for p in reach.applying if project_planner_config(p).four_eyes]
    return (
        Changeset.objects.filter(
            status=ChangesetStatus.PROPOSED, project_id__in=[p.pk for p in reach.applying]
        )
        .exclude(project_id__in=four_eyes, proposed_by=reach.user)
        .annotate(entry=_id("changeset", F("project__key"), _text("number")), at=F("created_at"))
    )


def _reviews(reach: _Reach) -> QuerySet[Item]:
    """Tickets in review where the user holds changeset.apply: those who accept. The ticket's
    version is in the id: edited since it was put away, it asks for a look again."""
    return Item.objects.filter(
        kind=ItemKind.TICKET, state="in_review", project_id__in=[p.pk for p in reach.applying]
    ).annotate(entry=_id("review", F("project__key"), _text("number"), _text("version")), at=F("updated_at"))


def _claims(reach: _Reach) -> QuerySet[Claim]:
    """The user's claims whose lease ran out in the last days, swept (``expired``) or not yet (an
    active claim past its lease holds nothing: ``tracker.work_selectors.held``)."""
    since = reach.now - timedelta(days=EXPIRED_CLAIM_DAYS)
    swept = Q(status=ClaimStatus.EXPIRED, ended_at__gte=since)
    lapsed = Q(status=ClaimStatus.ACTIVE, expires_at__lte=reach.now, expires_at__gte=since)
    return (
        Claim.objects.filter(holder=reach.user, project_id__in=reach.readable)
        .filter(swept | lapsed)
        .annotate(entry=_id("claim", _text("pk")), at=Coalesce("ended_at", "expires_at"))
    )


def _invitations(reach: _Reach) -> QuerySet[Invitation]:
    """Invitations waiting for the user's answer: of projects they cannot read yet (none for a key
    bound to projects: it acts only within them)."""
    qs = Invitation.objects.filter(user=reach.user, status=InvitationStatus.PENDING)
    if reach.bound:
        qs = qs.filter(pk__in=[])
    return qs.annotate(entry=_id("invitation", _text("pk")), at=F("created_at"))


def _notices(reach: _Reach) -> QuerySet[Notice]:
    """The user's stored notices, of projects they still read (or of none, a revoked key, unless
    the request's key is bound to projects)."""
    unbound = Q(pk__in=[]) if reach.bound else Q(project__isnull=True)
    return (
        Notice.objects.filter(user=reach.user)
        .filter(unbound | Q(project_id__in=reach.readable))
        .annotate(entry=_id("notice", _text("pk")), at=F("created_at"))
    )


def _item_url(key: str, number: int) -> str:
    return f"/projects/{key}/items/{key}-{number}/"


def _chat_url(key: str, session_id: Any) -> str:
    return f"/projects/{key}/chat/{session_id}/"


def _cut(text: str) -> str:
    """A title: one line, at most MAX_TITLE characters."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_TITLE else line[: MAX_TITLE - 1] + "…"


def _safe_url(url: str, fallback: str) -> str:
    """A stored notice's address if it is a path of this site, else ``fallback`` (never a script)."""
    return url if url.startswith("/") and not url.startswith("//") and "\\" not in url else fallback


def _question_entries(rows: QuerySet[Any]) -> list[InboxEntry]:
    return [
        InboxEntry(
            q.entry,
            "question",
            q.project.key,
            _cut(f"{q.item.key}: {q.text}" if q.item else q.text),
            _chat_url(q.project.key, q.session.pk),
            q.at,
        )
        for q in rows.select_related("project", "item__project", "session")
    ]


def _confirm_entries(rows: QuerySet[Any]) -> list[InboxEntry]:
    return [
        InboxEntry(
            q.entry,
            "confirm",
            q.project.key,
            _cut(f"The planner answered “{q.text}” from your reply: {q.answer}"),
            _chat_url(q.project.key, q.session.pk),
            q.at,
        )
        for q in rows.select_related("project", "session")
    ]


def _request_entries(rows: QuerySet[Any]) -> list[InboxEntry]:
    entries = []
    for r in rows.select_related("session__project"):
        project = r.session.project.key
        if r.kind == RequestKind.APPROVAL:
            title = f"Approve {r.tool.replace('_', ' ')} in “{r.session.title or 'a chat'}”"
        else:
            title = r.question or f"A question in “{r.session.title or 'a chat'}”"
        kind = "approval" if r.kind == RequestKind.APPROVAL else "request"
        entries.append(
            InboxEntry(r.entry, kind, project, _cut(title), _chat_url(project, r.session_id), r.at)
        )
    return entries


def _changeset_entries(rows: QuerySet[Any]) -> list[InboxEntry]:
    return [
        InboxEntry(
            c.entry,
            "changeset",
            c.project.key,
            _cut(f"#{c.number} {c.title}"),
            f"/projects/{c.project.key}/changesets/{c.number}/",
            c.at,
        )
        for c in rows.select_related("project")
    ]


def _review_entries(rows: QuerySet[Any]) -> list[InboxEntry]:
    return [
        InboxEntry(
            i.entry,
            "review",
            i.project.key,
            _cut(f"{i.key} {i.title}"),
            _item_url(i.project.key, i.number),
            i.at,
        )
        for i in rows.select_related("project")
    ]


def _claim_entries(rows: QuerySet[Any]) -> list[InboxEntry]:
    return [
        InboxEntry(
            c.entry,
            "claim_expired",
            c.project.key,
            _cut(f"{c.item.key} {c.item.title}"),
            _item_url(c.project.key, c.item.number),
            c.at,
        )
        for c in rows.select_related("project", "item__project")
    ]


def _invitation_entries(rows: QuerySet[Any]) -> list[InboxEntry]:
    entries = []
    for i in rows.select_related("project", "invited_by"):
        by = f" (from {i.invited_by.get_username()})" if i.invited_by else ""
        title = _cut(f"Join {i.project.key} {i.project.name} as {i.role}{by}")
        entries.append(InboxEntry(i.entry, "invitation", i.project.key, title, f"/inbox/#{i.entry}", i.at))
    return entries


def _notice_entries(rows: QuerySet[Any]) -> list[InboxEntry]:
    return [
        InboxEntry(
            n.entry,
            n.kind,
            n.project.key if n.project else None,
            _cut(n.title),
            _safe_url(n.url, f"/inbox/#{n.entry}"),
            n.at,
        )
        for n in rows.select_related("project")
    ]


@dataclass(frozen=True)
class _Source:
    rows: Callable[[_Reach], QuerySet[Any]]
    entries: Callable[[QuerySet[Any]], list[InboxEntry]]


# By an id's prefix: where its entries come from.
SOURCES: Final[dict[str, _Source]] = {
    "question": _Source(_questions, _question_entries),
    "confirm": _Source(_confirmations, _confirm_entries),
    "request": _Source(_requests, _request_entries),
    "changeset": _Source(_changesets, _changeset_entries),
    "review": _Source(_reviews, _review_entries),
    "claim": _Source(_claims, _claim_entries),
    "invitation": _Source(_invitations, _invitation_entries),
    "notice": _Source(_notices, _notice_entries),
}


def _undismissed(qs: QuerySet[Any], user: User) -> QuerySet[Any]:
    return qs.exclude(entry__in=Dismissal.objects.filter(user=user).values("entry"))


def _signed_in(user: AnyUser) -> User | None:
    return user if isinstance(user, User) and user.is_authenticated and user.is_active else None


def inbox_entries(*, user: AnyUser, limit: int = MAX_ENTRIES) -> list[InboxEntry]:
    """What waits for ``user``, newest first, at most ``limit`` (≤ MAX_ENTRIES) entries, those they
    dismissed left out: one query per source, whatever the number of projects."""
    found = _signed_in(user)
    if found is None:
        return []
    limit = max(0, min(limit, MAX_ENTRIES))
    reach = _reach(found)
    entries: list[InboxEntry] = []
    for source in SOURCES.values():
        rows = _undismissed(source.rows(reach), found).order_by("-at", "-pk")[:limit]
        entries.extend(source.entries(rows))
    entries.sort(key=lambda entry: (entry.created_at, entry.id), reverse=True)
    return entries[:limit]


def inbox_count(*, user: AnyUser) -> int:
    """How many entries wait for ``user`` (all of them, not only the newest MAX_ENTRIES): one
    statement, after the user's access (the header's count on every page)."""
    found = _signed_in(user)
    if found is None:
        return 0
    reach = _reach(found)
    parts = [
        _undismissed(source.rows(reach), found).order_by().values_list("entry") for source in SOURCES.values()
    ]
    return parts[0].union(*parts[1:], all=True).count()


def inbox_entry_exists(*, user: User, entry_id: str) -> bool:
    """Whether ``entry_id`` names an entry of ``user``'s inbox now, dismissed or not."""
    prefix = entry_id.split("-", 1)[0]
    source = SOURCES.get(prefix)
    if source is None:
        return False
    return source.rows(_reach(user)).filter(entry=entry_id).exists()
