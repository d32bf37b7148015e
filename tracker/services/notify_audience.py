"""Whom an event concerns, and what they are told (docs/events.md#people): read for
``tracker/services/notifications.py``, which decides who of them may be told and tells them.

- ``question.needs_human``: the project's members who may chat (they answer it);
- ``request.waiting``: the human of the chat, the one it is private to;
- ``changeset.proposed``: the members who may apply it;
- a ticket that moved (``item.updated``, ``item.runnable``, ``claim.*``, ``report.added``,
  ``comment.added``): its watchers and the holder of its claim (the claim the event names, or
  the active one); a comment's mentions are told as mentions; the holder of an expired claim
  as such.

Whoever acted is never told of it (the planner's request to its own human aside), and a user at
most once per event. The items, watchers, claims and mentions of a batch of events are read at
once, a few statements whatever its size, and only for the kinds of events it holds. Some events
change only what the inbox derives (a changeset decided, a question answered, a ticket in or out
of review): those whose count changed are named apart, to hear it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from django.contrib.auth.models import User

from tracker.db.event_rows import TicketsAsked, ticket_audiences
from tracker.models import Comment, Event, Membership, NotifyKind
from tracker.page_links import changeset_url, item_url
from tracker.trust.permissions import (
    CHANGESET_APPLY,
    PLANNER_CHAT,
    ROLE_PERMISSIONS,
    TRACKER_READ,
)

TICKET_TYPES: Final = (
    "item.updated",
    "item.runnable",
    "claim.taken",
    "claim.released",
    "claim.expired",
    "report.added",
    "comment.added",
)
# The planner asks the human of its chat: they acted only by chatting.
TOLD_THEMSELVES: Final = ("request.waiting",)
# Events that change only what the inbox derives, and who holds what sees it there.
QUIET: Final[dict[str, str]] = {
    "changeset.applied": CHANGESET_APPLY,
    "changeset.rejected": CHANGESET_APPLY,
    "question.answered": PLANNER_CHAT,
}
REVIEW: Final = "in_review"


@dataclass(frozen=True)
class Told:
    """One user to tell of one thing: ``title`` and ``detail`` plain text, ``url`` a path here."""

    user_id: int
    kind: str  # NotifyKind
    title: str
    url: str
    project_id: int | None
    project_key: str | None
    event_id: int | None = None
    detail: str = ""
    notice: str | None = None  # the inbox's notice kind to store; None where the inbox derives it
    permission: str | None = TRACKER_READ  # what they must hold in the project (None: nothing)
    requires: tuple[int, ...] = ()  # projects they must read too
    private_to: int | None = None  # the one user who may be told


@dataclass(frozen=True)
class _Ticket:
    key: str
    title: str
    audience: frozenset[int]  # watchers and active claims' holders
    named: Mapping[int, int]  # a claim an event of the batch names → its holder

    def told(self, event: Event) -> frozenset[int]:
        """Who hears of ``event`` on this ticket: its audience, and the holder of the claim the
        event names (ended by it, say), not of one another event of the batch names."""
        holder = self.named.get(_int(event.data.get("claim")) or 0)
        return self.audience | {holder} if holder is not None else self.audience


def _number(key: str) -> int | None:
    tail = key.rsplit("-", 1)[-1]
    return int(tail) if tail.isascii() and tail.isdigit() and len(tail) < 10 else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _words(value: Any) -> str:
    return str(value).replace("_", " ")


class _Reading:
    """What the events of one batch need read, each read once, when first needed."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self._members: dict[tuple[int, str], list[int]] = {}

    def members(self, project_id: int, permission: str) -> list[int]:
        """The project's members whose role grants ``permission``."""
        key = (project_id, permission)
        if key not in self._members:
            roles = [role for role, granted in ROLE_PERMISSIONS.items() if permission in granted]
            rows = Membership.objects.filter(project_id=project_id, role__in=roles)
            self._members[key] = list(rows.order_by("user_id").values_list("user_id", flat=True))
        return self._members[key]

    @cached_property
    def names(self) -> dict[int, str]:
        """The usernames of those the planner acted for, in this batch."""
        ids = {e.on_behalf_of_id for e in self.events if e.actor.startswith("planner:") and e.on_behalf_of_id}
        return dict(User.objects.filter(pk__in=ids).values_list("pk", "username")) if ids else {}

    def who(self, event: Event) -> str:
        kind, _, rest = event.actor.partition(":")
        if kind == "user":
            return rest
        if kind == "planner":
            name = self.names.get(event.on_behalf_of_id or 0)
            return f"The planner for {name}" if name else "The planner"
        return "Ballet"

    @cached_property
    def mentions(self) -> dict[int, list[int]]:
        """Comment id → the users it mentions, for the comments of this batch that mention someone."""
        ids = [
            comment
            for e in self.events
            if e.type == "comment.added"
            and e.data.get("mentions")
            and (comment := _int(e.data.get("comment")))
        ]
        found: dict[int, list[int]] = {}
        if ids:
            rows = Comment.mentions.through.objects.filter(comment_id__in=ids).order_by("user_id")
            for comment_id, user_id in rows.values_list("comment_id", "user_id"):
                found.setdefault(comment_id, []).append(user_id)
        return found

    @cached_property
    def tickets(self) -> dict[tuple[int, int], _Ticket]:
        """(project id, number) → the item, for the items of this batch's ticket events that
        concern someone: watched, claimed, or mentioning someone."""
        keys = {e.project_id: _project_key(e) for e in self.events if e.project_id is not None}
        return {
            (asked.project_id, number): _Ticket(
                f"{keys[asked.project_id]}-{number}", ticket.title, ticket.audience, ticket.named
            )
            for asked in tickets_asked(self.events)
            for number, ticket in ticket_audiences(asked).items()
        }

    def ticket(self, event: Event) -> _Ticket | None:
        number = _number(event.target)
        if event.project_id is None or number is None:
            return None
        return self.tickets.get((event.project_id, number))

    def question_text(self, event: Event) -> str | None:
        """What the question asked, from its ``question.asked`` event; None for a question joined
        to another (it has none: the one it joined is told)."""
        asked = (
            Event.objects.filter(project=event.project, type="question.asked", target=event.target)
            .order_by("-id")
            .values_list("data", flat=True)
            .first()
        )
        return str(asked.get("text") or "") if isinstance(asked, dict) else None


def tickets_asked(events: list[Event]) -> list[TicketsAsked]:
    """The tickets whose audience :func:`told_of` reads for ``events``, per project (what
    ``tracker/services/events.py`` reads ahead, in the round trip of their INSERT)."""
    numbers: dict[int, set[int]] = {}
    claims: dict[int, set[int]] = {}
    for e in events:
        number = _number(e.target) if e.type in TICKET_TYPES and e.project_id else None
        if e.project_id is None or number is None:
            continue
        numbers.setdefault(e.project_id, set()).add(number)
        if (claim := _int(e.data.get("claim"))) is not None:
            claims.setdefault(e.project_id, set()).add(claim)
    # A mention, or an expired claim's holder, is told whoever else hears of the ticket.
    every = any(
        (e.type == "comment.added" and e.data.get("mentions")) or e.type == "claim.expired" for e in events
    )
    return [
        TicketsAsked(project_id, tuple(sorted(wanted)), tuple(sorted(claims.get(project_id, ()))), every)
        for project_id, wanted in sorted(numbers.items())
    ]


def told_of(events: list[Event]) -> tuple[list[Told], set[int]]:
    """Who each of ``events`` concerns and what they are told; and those whose inbox changed only
    by what it derives."""
    reading = _Reading(events)
    told: list[Told] = []
    quiet: set[int] = set()
    for event in events:
        if event.project_id is None:  # organization-wide knowledge concerns no one in particular
            continue
        handler = HANDLERS.get(event.type)
        if handler is not None:
            told.extend(_once(event, handler(event, reading)))
        quiet.update(_quiet(event, reading))
    return told, quiet


def _once(event: Event, told: list[Told]) -> list[Told]:
    """``told`` without whoever acted (Ballet itself acts for no one), each user once."""
    actor = None if event.actor.startswith("ballet:") else event.on_behalf_of_id
    seen: set[int] = set()
    kept = []
    for each in told:
        if each.user_id in seen or (each.user_id == actor and event.type not in TOLD_THEMSELVES):
            continue
        seen.add(each.user_id)
        kept.append(each)
    return kept


def _quiet(event: Event, reading: _Reading) -> list[int]:
    assert event.project_id is not None
    permission = QUIET.get(event.type)
    if permission is None and event.type == "item.updated":
        state = (event.data.get("changes") or {}).get("state") or []
        permission = CHANGESET_APPLY if REVIEW in state else None
    return reading.members(event.project_id, permission) if permission else []


def _project_key(event: Event) -> str:
    project = event.project
    assert project is not None  # told_of passes on only the events of a project
    return project.key


def _told(event: Event, user_id: int, kind: str, title: str, url: str, **more: Any) -> Told:
    return Told(
        user_id=user_id,
        kind=kind,
        title=title,
        url=url,
        project_id=event.project_id,
        project_key=_project_key(event) if event.project_id else None,
        event_id=event.pk,
        requires=tuple(event.requires or ()),
        private_to=event.private_to_id,
        **more,
    )


# --- each type --------------------------------------------------------------------------------------


def _question(event: Event, reading: _Reading) -> list[Told]:
    assert event.project_id is not None
    people = reading.members(event.project_id, PLANNER_CHAT)
    text = reading.question_text(event) if people else None
    if text is None:
        return []
    about = f" about {event.data['item']}" if event.data.get("item") else ""
    title = f"A question from an agent waits for a human{about}: {text}"
    detail = f"Why the planner left it to you: {event.data.get('reason') or 'it could not answer.'}"
    url = f"/inbox/#question-{event.target.removeprefix('question:')}"
    return [
        _told(event, user, NotifyKind.QUESTION, title, url, detail=detail, permission=PLANNER_CHAT)
        for user in people
    ]


def _request(event: Event, reading: _Reading) -> list[Told]:
    if event.private_to_id is None:
        return []
    data = event.data
    if data.get("kind") == "approval":
        title = f"The planner waits for your approval to {_words(data.get('tool') or 'act')}"
    else:
        title = f"The planner asks you: {data.get('question') or 'a question in your chat'}"
    url = f"/projects/{_project_key(event)}/chat/{data.get('session', '')}/"
    return [_told(event, event.private_to_id, NotifyKind.APPROVAL, title, url)]


def _changeset(event: Event, reading: _Reading) -> list[Told]:
    assert event.project_id is not None
    number = _int(event.data.get("number"))
    if number is None:
        return []
    title = f"{reading.who(event)} proposes changeset #{number}: {event.data.get('title', '')}"
    url = changeset_url(_project_key(event), number)
    return [
        _told(event, user, NotifyKind.CHANGESET, title, url, permission=CHANGESET_APPLY)
        for user in reading.members(event.project_id, CHANGESET_APPLY)
    ]


def _ticket_moved(event: Event, reading: _Reading) -> list[Told]:
    ticket = reading.ticket(event)
    if ticket is None:
        return []
    url = item_url(_project_key(event), ticket.key)
    first: list[Told] = []
    if event.type == "comment.added":
        url = f"{url}#comment-{_int(event.data.get('comment')) or ''}"
        mentioned = reading.mentions.get(_int(event.data.get("comment")) or 0, [])
        title = f"{reading.who(event)} mentioned you on {ticket.key}: {ticket.title}"
        detail = str(event.data.get("excerpt") or "")
        first = [
            _told(event, user, NotifyKind.MENTION, title, url, detail=detail, notice="mention")
            for user in mentioned
        ]
    elif event.type == "claim.expired" and event.on_behalf_of_id:
        title = f"Your claim on {ticket.key} expired: {ticket.title}"
        first = [_told(event, event.on_behalf_of_id, NotifyKind.CLAIM, title, url)]
    title, detail = _moved(event, reading, ticket)
    notice = "comment" if event.type == "comment.added" else "watched"
    return first + [
        _told(event, user, NotifyKind.TICKET, title, url, detail=detail, notice=notice)
        for user in sorted(ticket.told(event))
    ]


def _moved(event: Event, reading: _Reading, ticket: _Ticket) -> tuple[str, str]:
    """What happened to ``ticket``, in words, and more of it for a mail."""
    who, key, data = reading.who(event), ticket.key, event.data
    holder = data.get("holder") or who
    said: dict[str, tuple[str, str]] = {
        "item.runnable": (f"{key} can be worked on now", ""),
        "claim.taken": (f"{holder} claimed {key}", ""),
        "claim.released": (f"{who} released the claim of {holder} on {key}", str(data.get("reason") or "")),
        "claim.expired": (f"The claim of {holder} on {key} expired", ""),
        "report.added": (
            f"{who} reported {_words(data.get('kind', 'progress'))} on {key}",
            str(data.get("summary") or ""),
        ),
        "comment.added": (f"{who} commented on {key}", str(data.get("excerpt") or "")),
    }
    head, detail = said.get(event.type) or (_updated(who, key, data), "")
    return f"{head}: {ticket.title}", detail


def _updated(who: str, key: str, data: dict[str, Any]) -> str:
    changes = data.get("changes") or {}
    if isinstance(changes, dict) and isinstance(changes.get("state"), list) and len(changes["state"]) == 2:
        return f"{who} moved {key} to {_words(changes['state'][1])}"
    if isinstance(changes, dict) and changes:
        return f"{who} changed the {', '.join(_words(name) for name in sorted(changes))} of {key}"
    if data.get("blocker"):
        return f"{who} changed the blockers of {key}"
    return f"{who} changed {key}"


HANDLERS: Final[dict[str, Callable[[Event, _Reading], list[Told]]]] = {
    "question.needs_human": _question,
    "request.waiting": _request,
    "changeset.proposed": _changeset,
    **dict.fromkeys(TICKET_TYPES, _ticket_moved),
}
