"""People's notifications (docs/events.md#people): whom an event concerns, told in their inbox at
once and by e-mail as they chose.

:func:`notifications_queue` is called by the event recorder (``tracker/services/events.py``) in the
events' transaction. For each event it finds the people it concerns
(``tracker/services/notify_audience.py``), keeps those who may be told (never an agent, only active
users who may still read the event), and for each of them:

- stores an inbox ``Notice`` for what the inbox does not derive from the plan's state (a ticket
  that moved, a comment on it, a mention, a webhook disabled); questions, requests, changesets to
  decide, expired claims and invitations the inbox shows by itself;
- queues a ``Mail`` by the user's mode for the kind (``NotificationPreference``: now, the daily
  digest, or off; without a row, the kind's default), written now (``tracker/mail.py``), for a user
  with an address.

One transaction tells each person once per kind and page (a claim moves its ticket too: one
notice). Once it commits, each of them hears that their inbox changed (``inbox_changed``: the
header's count follows live) and a mail to send at once is sent soon (``tracker.tasks``).
:func:`notify_users` tells people of what is no event (an invitation, a webhook disabled).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from django.contrib.auth.models import User
from django.db import transaction

from tracker.commit_hooks import on_commit_robust
from tracker.errors import ValidationError
from tracker.mail import mail_text
from tracker.models import Event, Mail, Notice, NotificationPreference, NotifyKind, NotifyMode, Project
from tracker.services.notify_audience import Told, told_of
from tracker.signals import inbox_changed
from tracker.tasks import mail_send_soon
from tracker.trust.permissions import TRACKER_READ, access_load, access_scope, has_permission

MAX_TITLE: Final = 300  # Notice.title's length
MAX_URL: Final = 300  # Notice.url's and Mail.url's

DEFAULT_MODES: Final[dict[str, str]] = {
    NotifyKind.QUESTION: NotifyMode.NOW,
    NotifyKind.APPROVAL: NotifyMode.NOW,
    NotifyKind.CHANGESET: NotifyMode.DIGEST,
    NotifyKind.TICKET: NotifyMode.DIGEST,
    NotifyKind.MENTION: NotifyMode.NOW,
    NotifyKind.CLAIM: NotifyMode.DIGEST,
    NotifyKind.WEBHOOK: NotifyMode.DIGEST,
    NotifyKind.INVITATION: NotifyMode.NOW,
}

# The inbox's notice kind (planner/domain/inbox.py's words) of the kinds it does not derive.
NOTICE_KINDS: Final[dict[str, str]] = {
    NotifyKind.TICKET: "watched",
    NotifyKind.MENTION: "mention",
    NotifyKind.WEBHOOK: "webhook_disabled",
}


def notifications_queue(events: list[Event]) -> None:
    """Queue the notifications of ``events`` for the people they concern, in their transaction."""
    told, quiet = told_of(events)
    with transaction.atomic(savepoint=False):  # the events' transaction: its commit tells them
        _deliver(told)
        if quiet:
            _batch().user_ids.update(quiet)


def notify_users(
    users: Iterable[User | int],
    kind: str,
    title: str,
    url: str,
    project: Project | None,
    *,
    event: Event | None = None,
) -> list[Notice]:
    """Tell ``users`` of something that is no event of theirs (an owner's webhook was disabled, an
    invitation): ``title`` plain text, ``url`` a path here. Call it in the transaction of what it
    tells. Those who may not read ``project`` are not told (an invitation's invitee aside, who
    reads it once they accept), nor agents, nor inactive users. The notices stored, if any."""
    if kind not in NotifyKind.values:
        raise ValueError(f"unknown notification kind {kind!r}")
    readers = kind != NotifyKind.INVITATION
    told = [
        Told(
            user_id=user if isinstance(user, int) else user.pk,
            kind=kind,
            title=title,
            url=url,
            project_id=project.pk if project else None,
            project_key=project.key if project else None,
            event_id=event.pk if event else None,
            notice=NOTICE_KINDS.get(kind),
            permission=TRACKER_READ if readers and project else None,
        )
        for user in users
    ]
    with transaction.atomic(savepoint=False):  # outside a transaction: one of its own
        return _deliver(told)


# --- delivering: the inbox, the mail, the live count ------------------------------------------------


@dataclass
class _Said:
    """One user told of one page in one kind, in this transaction: its rows, and what was said."""

    notice_id: int | None
    mail_id: int | None
    titles: list[str]


@dataclass
class _Batch:
    """What one transaction told, and whom to tell once it commits."""

    hooks: list[Any]  # the connection's on-commit list while it lasts (see :func:`_batch`)
    said: dict[tuple[int, str, str], _Said] = field(default_factory=dict)
    user_ids: set[int] = field(default_factory=set)
    mail_now: bool = False

    def committed(self) -> None:
        if self.user_ids:
            inbox_changed.send_robust(sender=Notice, user_ids=sorted(self.user_ids))
        if self.mail_now:
            mail_send_soon()


_BATCH = "_ballet_notify_batch"


def _batch() -> _Batch:
    """This transaction's batch. Django replaces a connection's list of on-commit hooks once its
    transaction commits or rolls back (a savepoint's rollback too): while the list is the batch's,
    the batch's hook is queued in it, and the rows it counts are this transaction's."""
    connection = transaction.get_connection()
    current: _Batch | None = getattr(connection, _BATCH, None)
    if current is not None and connection.in_atomic_block and current.hooks is connection.run_on_commit:
        return current
    batch = _Batch(hooks=connection.run_on_commit)
    on_commit_robust(batch.committed)
    setattr(connection, _BATCH, batch)
    return batch


def _key(each: Told) -> tuple[int, str, str]:
    return (each.user_id, each.kind, each.url)


def _deliver(told: list[Told]) -> list[Notice]:
    """Store the notices and queue the mails of ``told``, for those who may have them. What this
    transaction told a user of a page already is said again in its rows (a claim moves its
    ticket: the notice says the claim, the mail both)."""
    if not told:
        return []
    batch = _batch()
    allowed, addresses = _allowed(told)
    fresh: dict[tuple[int, str, str], Told] = {}
    before: dict[tuple[int, str, str], list[str]] = {}
    for each in allowed:
        key = _key(each)
        said = batch.said.get(key)
        if said is not None:
            _restate(each, said)
            continue
        if key in fresh:  # twice in one call: the last says it, the mail both
            before.setdefault(key, []).append(fresh[key].title)
        fresh[key] = each
    batch.user_ids.update(each.user_id for each in allowed)
    if not fresh:
        return []
    modes = _modes(
        {each.user_id for each in fresh.values() if addresses.get(each.user_id)},
        {each.kind for each in fresh.values()},
    )
    notices: list[Notice] = []
    for key, each in fresh.items():
        titles = [*before.get(key, []), each.title]
        notice = _notice(each)
        mail = _mail(each, modes, _detail(each, titles)) if addresses.get(each.user_id) else None
        if notice is not None:
            notices.append(notice)
        batch.said[key] = _Said(notice.pk if notice else None, mail.pk if mail else None, titles)
        batch.mail_now = batch.mail_now or (mail is not None and mail.mode == NotifyMode.NOW)
    return notices


def _notice(each: Told) -> Notice | None:
    if each.notice is None:
        return None
    return Notice.objects.create(
        user_id=each.user_id,
        project_id=each.project_id,
        kind=each.notice,
        title=_cut(each.title),
        url=each.url[:MAX_URL],
    )


def _mail(each: Told, modes: dict[tuple[int, str], str], detail: str) -> Mail | None:
    mode = modes.get((each.user_id, each.kind), DEFAULT_MODES[each.kind])
    if mode == NotifyMode.OFF:
        return None
    subject, body = mail_text(title=each.title, url=each.url, project_key=each.project_key, detail=detail)
    return Mail.objects.create(
        user_id=each.user_id,
        project_id=each.project_id,
        event_id=each.event_id,
        kind=each.kind,
        mode=mode,
        subject=subject,
        body=body,
        url=each.url[:MAX_URL],
    )


def _restate(each: Told, said: _Said) -> None:
    """``each`` is the latest of what this transaction tells its user of its page: the notice says
    it, the mail says it and what came before."""
    said.titles.append(each.title)
    if said.notice_id is not None:
        Notice.objects.filter(pk=said.notice_id).update(title=_cut(each.title))
    if said.mail_id is not None:
        detail = _detail(each, said.titles)
        subject, body = mail_text(title=each.title, url=each.url, project_key=each.project_key, detail=detail)
        Mail.objects.filter(pk=said.mail_id).update(subject=subject, body=body, event_id=each.event_id)


def _detail(each: Told, titles: list[str]) -> str:
    """The mail's detail of ``each``, the last of ``titles`` its user is told of its page in this
    transaction: its own, then what came before."""
    earlier = "\n".join(f"Before: {title}" for title in titles[:-1])
    if not earlier:
        return each.detail
    return f"{each.detail}\n\n{earlier}" if each.detail else earlier


def _allowed(told: list[Told]) -> tuple[list[Told], dict[int, str]]:
    """Those of ``told`` whose user may be told: active, no agent, and holding what it asks (reading
    its project, every project it requires, being the one it is private to); and their users'
    e-mail addresses (possibly empty)."""
    people = dict(
        User.objects.filter(
            pk__in={each.user_id for each in told}, is_active=True, agent__isnull=True
        ).values_list("pk", "email")
    )
    with access_scope(within=True):
        access_load(people)
        allowed = [each for each in told if each.user_id in people and _may(each.user_id, each)]
    return allowed, people


def _may(user_id: int, each: Told) -> bool:
    if each.private_to is not None and each.private_to != user_id:
        return False
    if each.permission is not None and each.project_id is not None:
        if not has_permission(user_id, each.project_id, each.permission):
            return False
        if each.permission != TRACKER_READ and not has_permission(user_id, each.project_id, TRACKER_READ):
            return False
    return all(has_permission(user_id, project_id, TRACKER_READ) for project_id in each.requires)


def _modes(user_ids: set[int], kinds: set[str]) -> dict[tuple[int, str], str]:
    rows = NotificationPreference.objects.filter(user_id__in=user_ids, kind__in=kinds)
    return {(user_id, kind): mode for user_id, kind, mode in rows.values_list("user_id", "kind", "mode")}


def _cut(title: str) -> str:
    line = " ".join(title.split())
    return line if len(line) <= MAX_TITLE else line[: MAX_TITLE - 1] + "…"


# --- preferences ------------------------------------------------------------------------------------


def notify_modes(*, user: User) -> dict[str, str]:
    """``user``'s mode for each kind, in NotifyKind's order: their choice, or the default."""
    chosen = dict(NotificationPreference.objects.filter(user=user).values_list("kind", "mode"))
    return {kind: chosen.get(kind, DEFAULT_MODES[kind]) for kind in NotifyKind.values}


@transaction.atomic
def notify_modes_set(*, user: User, modes: dict[str, Any]) -> dict[str, str]:
    """Set ``user``'s mode of each kind named in ``modes`` (ValidationError for an unknown kind
    or mode, nothing changed); mail of a kind turned off that waits to go is dropped. The modes
    now."""
    errors = {
        str(kind)[:40]: [f"Expected one of: {', '.join(NotifyMode.values)}."]
        for kind, mode in modes.items()
        if kind in NotifyKind.values and mode not in NotifyMode.values
    }
    errors |= {str(kind)[:40]: ["Unknown kind."] for kind in modes if kind not in NotifyKind.values}
    if errors:
        raise ValidationError(errors)
    for kind, mode in modes.items():
        NotificationPreference.objects.update_or_create(user=user, kind=kind, defaults={"mode": mode})
    off = [kind for kind, mode in modes.items() if mode == NotifyMode.OFF]
    if off:
        Mail.objects.filter(user=user, kind__in=off, status="pending").delete()
    return notify_modes(user=user)


__all__ = [
    "DEFAULT_MODES",
    "NOTICE_KINDS",
    "Told",
    "notifications_queue",
    "notify_modes",
    "notify_modes_set",
    "notify_users",
]
