"""E-mail to people (docs/events.md#e-mail): what a mail says, sending the outbox, the daily digest
and the signed one-click unsubscribe.

A mail is a ``Mail`` row queued in the transaction of what it tells
(``tracker/services/notifications.py``): its subject and plain text are written then, with the
absolute address of the page. Sending takes a batch of rows in a short transaction (``SELECT …
FOR UPDATE SKIP LOCKED``) and leases them (``next_attempt_at``), sends them through Django's mail
backend outside any transaction, and marks each one sent. A sender that dies between sending and
marking leaves its rows to the next one once the lease ends: a mail may go twice, never lost.

Every mail carries a link that stops the mail of its kind (the digest's stops the digest) in one
click, signed with ``django.core.signing``: the signature is the authority, no sign-in needed
(``List-Unsubscribe`` and ``List-Unsubscribe-Post``, RFC 8058).

Production sends with Celery (``tracker.send_mail`` after each commit that queued a mail to send
now, and every 10 s from beat; ``tracker.send_digests``). The embedded server runs
:class:`MailSender` on its event loop instead (``ballet/lifespan.py``): its database work goes
through the bridge it is given, the talk with the mail server through a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import smtplib
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.html import urlize

from tracker.inputs import one_line
from tracker.models import Mail, MailStatus, NotifyKind, NotifyMode, Sweep
from tracker.trust.permissions import TRACKER_READ, access_load, access_scope, has_permission

logger = logging.getLogger(__name__)
R = TypeVar("R")

MAX_SUBJECT: Final = 300  # Mail.subject's length
BATCH: Final = 20  # mails taken at once: at most EMAIL_TIMEOUT each, well within the lease
LEASE: Final = timedelta(minutes=10)  # a taken mail is not taken again before then
SEND_BUDGET_SECONDS: Final = 240.0  # a batch stops sending past this; what is left is let go
RETRY_AFTER: Final = (timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30), timedelta(hours=2))
MAX_ATTEMPTS: Final = 5  # then the mail is failed
MAX_BATCHES: Final = 50  # batches one run sends at most (the next run goes on)
DIGEST_BATCH: Final = 1000  # digest rows taken at once
DIGEST_HOUR: Final = 7  # the digest goes once a day, at or after this hour (UTC)
DIGEST_SWEEP: Final = "mail_digest"  # the Sweep row of the last digest
UNSUBSCRIBE_SALT: Final = "tracker.mail.unsubscribe"
DIGEST: Final = "digest"  # an unsubscribe token's kind for the digest: every kind it sends, off
# What says the mail server cannot be reached (refused, timed out, no such host, hung up).
UNREACHABLE: Final = (
    ConnectionError,
    TimeoutError,
    socket.gaierror,
    smtplib.SMTPConnectError,
    smtplib.SMTPServerDisconnected,
)

# A kind's mail, in words: "e-mail about …".
KIND_WORDS: Final[dict[str, str]] = {
    NotifyKind.QUESTION: "questions from agents that need a human",
    NotifyKind.APPROVAL: "the planner's requests and approvals waiting for you",
    NotifyKind.CHANGESET: "changesets waiting for your decision",
    NotifyKind.TICKET: "tickets you claimed or watch",
    NotifyKind.MENTION: "mentions of you",
    NotifyKind.CLAIM: "your claims that expired",
    NotifyKind.WEBHOOK: "your webhooks that were disabled",
    NotifyKind.INVITATION: "invitations to a project",
    DIGEST: "everything in your daily digest",
}


# --- addresses and the signed unsubscribe ---------------------------------------------------------


def absolute(path: str) -> str:
    """``path`` of this site as a link from outside it (``[email] base_url``)."""
    return f"{settings.BALLET_BASE_URL}{path}"


def unsubscribe_token(*, user_id: int, kind: str) -> str:
    """A token that stops ``user_id``'s mail of ``kind`` (a NotifyKind, or DIGEST)."""
    return signing.dumps({"u": user_id, "k": kind}, salt=UNSUBSCRIBE_SALT)


@dataclass(frozen=True)
class Unsubscribe:
    user_id: int
    kind: str  # a NotifyKind, or DIGEST


def unsubscribe_read(token: str) -> Unsubscribe | None:
    """What ``token`` stops, if this server signed it; None for anything else."""
    try:
        value = signing.loads(token, salt=UNSUBSCRIBE_SALT)
    except signing.BadSignature:
        return None
    if not isinstance(value, dict):
        return None
    user_id, kind = value.get("u"), value.get("k")
    if not isinstance(user_id, int) or isinstance(user_id, bool) or kind not in KIND_WORDS:
        return None
    return Unsubscribe(user_id=user_id, kind=kind)


def unsubscribe_url(*, user_id: int, kind: str) -> str:
    return absolute(reverse("notify-unsubscribe", args=[unsubscribe_token(user_id=user_id, kind=kind)]))


# --- what a mail says -------------------------------------------------------------------------------


def mail_text(*, title: str, url: str, project_key: str | None, detail: str = "") -> tuple[str, str]:
    """A notification's subject and plain text (``title`` and ``detail`` are plain text, ``url`` a
    path here), written when it is queued."""
    subject = one_line(f"[{project_key}] {title}" if project_key else title, MAX_SUBJECT)
    parts = [title]
    if detail:
        parts.append(detail)
    parts.append(f"Open it: {absolute(url)}")
    return subject, "\n\n".join(parts) + "\n"


def _footer(user_id: int, kinds: list[str], digest: bool) -> tuple[str, str]:
    """The end of a mail: why it came, and a link per kind that stops it (and, in a digest, one
    that stops the digest); and the ``List-Unsubscribe`` address (the digest's, or the kind's)."""
    lines = [
        "",
        "-- ",
        f"You get this because of your e-mail settings: {absolute(reverse('notify-settings'))}",
    ]
    for kind in [*kinds, DIGEST] if digest else kinds:
        lines.append(
            f"No more e-mail about {KIND_WORDS[kind]}: {unsubscribe_url(user_id=user_id, kind=kind)}"
        )
    one_click = unsubscribe_url(user_id=user_id, kind=DIGEST if digest else kinds[0])
    return "\n".join(lines) + "\n", one_click


@dataclass(frozen=True)
class Outgoing:
    """One message to send, in plain data (it crosses to a worker thread): the rows it sends."""

    mail_ids: tuple[int, ...]
    to: str
    subject: str
    text: str
    unsubscribe: str  # the one-click address

    def message(self) -> EmailMultiAlternatives:
        headers = {
            "List-Unsubscribe": f"<{self.unsubscribe}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            "Auto-Submitted": "auto-generated",
        }
        message = EmailMultiAlternatives(self.subject, self.text, to=[self.to], headers=headers)
        # The same words with their links live: every part escaped, nothing of the text is markup.
        html = f'<div style="white-space: pre-wrap">{urlize(self.text, autoescape=True)}</div>'
        message.attach_alternative(html, "text/html")
        return message


def _one(mail: Mail, to: str) -> Outgoing:
    footer, one_click = _footer(mail.user_id, [mail.kind], digest=False)
    return Outgoing((mail.pk,), to, mail.subject, mail.body + footer, one_click)


def _digest(user_id: int, to: str, mails: list[Mail]) -> Outgoing:
    """Each of ``mails`` (one user's, oldest first) as a section of one message, by kind."""
    kinds = [kind for kind in NotifyKind.values if any(mail.kind == kind for mail in mails)]
    parts = []
    for kind in kinds:
        of_kind = [mail for mail in mails if mail.kind == kind]
        parts.append(f"{KIND_WORDS[kind][0].upper()}{KIND_WORDS[kind][1:]} ({len(of_kind)})")
        parts.extend(f"- {mail.subject}\n  {absolute(mail.url)}" for mail in of_kind)
        parts.append("")
    footer, one_click = _footer(user_id, kinds, digest=True)
    count = len(mails)
    subject = f"Ballet: your daily digest, {count} notification{'s' if count != 1 else ''}"
    text = "What happened since your last digest:\n\n" + "\n".join(parts) + footer
    return Outgoing(tuple(mail.pk for mail in mails), to, subject, text, one_click)


# --- taking, sending, settling ----------------------------------------------------------------------


def _take(pending: Q, limit: int, now: datetime) -> list[Mail]:
    """Up to ``limit`` rows of ``pending`` no other sender holds, leased for LEASE; those whose
    user can no longer get them (no address, gone, or no longer reading the project) failed."""
    due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now)
    rows = list(
        Mail.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(pending, due, status=MailStatus.PENDING)
        .select_related("user")
        .order_by("user_id", "id")[:limit]
    )
    with access_scope(within=True):
        access_load({mail.user_id for mail in rows})
        kept = [mail for mail in rows if _deliverable(mail)]
    gone = [mail.pk for mail in rows if mail not in kept]
    if gone:
        Mail.objects.filter(pk__in=gone).update(status=MailStatus.FAILED)
    Mail.objects.filter(pk__in=[mail.pk for mail in kept]).update(
        next_attempt_at=now + LEASE, attempts=F("attempts") + 1
    )
    return kept


def _deliverable(mail: Mail) -> bool:
    user: User = mail.user
    if not user.email or not user.is_active:
        return False
    if mail.project_id is None or mail.kind == NotifyKind.INVITATION:  # invited: not a reader yet
        return True
    return has_permission(user.pk, mail.project_id, TRACKER_READ)


def mail_take_now(*, now: datetime | None = None, limit: int = BATCH) -> list[Outgoing]:
    """The next mails to send at once, taken (see the module's docstring)."""
    with transaction.atomic():
        taken = _take(Q(mode=NotifyMode.NOW), limit, now or timezone.now())
    return [_one(mail, mail.user.email) for mail in taken]


def mail_take_digests(*, now: datetime | None = None, limit: int = DIGEST_BATCH) -> list[Outgoing]:
    """The next users' digests: each one's pending digest mails gathered into one message."""
    with transaction.atomic():
        taken = _take(Q(mode=NotifyMode.DIGEST), limit, now or timezone.now())
    by_user: dict[int, list[Mail]] = {}
    for mail in taken:
        by_user.setdefault(mail.user_id, []).append(mail)
    return [_digest(user_id, mails[0].user.email, mails) for user_id, mails in by_user.items()]


@dataclass(frozen=True)
class Sent:
    """What became of one message: sent, failed (``error``), or not tried (the batch ran late)."""

    mail_ids: tuple[int, ...]
    ok: bool
    tried: bool = True
    error: str = ""


def mail_deliver(outgoing: list[Outgoing]) -> list[Sent]:
    """Send ``outgoing`` through the configured backend, each message on its own (the ``file``
    backend writes one file per mail); no database here (a worker thread may run it). Once the
    mail server cannot be reached, or the batch ran past SEND_BUDGET_SECONDS, the rest is left
    for the next pass, not counted as an attempt."""
    started = time.monotonic()
    connection = get_connection(fail_silently=False)
    results: list[Sent] = []
    unreachable = False
    for item in outgoing:
        if unreachable or time.monotonic() - started > SEND_BUDGET_SECONDS:
            results.append(Sent(item.mail_ids, ok=False, tried=False))
            continue
        try:
            connection.send_messages([item.message()])
        except UNREACHABLE as exc:  # the server, not this mail: the rest would meet it too
            logger.warning("could not reach the mail server: %s", exc)
            results.append(Sent(item.mail_ids, ok=False, error=str(exc)))
            unreachable = True
        except Exception as exc:
            logger.warning("mail %s could not be sent: %s", item.mail_ids[0], exc)
            results.append(Sent(item.mail_ids, ok=False, error=str(exc)))
        else:
            results.append(Sent(item.mail_ids, ok=True))
    return results


@transaction.atomic
def mail_settle(results: list[Sent], *, now: datetime | None = None) -> int:
    """Mark what :func:`mail_deliver` did: sent, to try again later, or failed for good (after
    MAX_ATTEMPTS); how many messages were sent."""
    now = now or timezone.now()
    pending = Mail.objects.filter(status=MailStatus.PENDING)
    sent = [pk for result in results if result.ok for pk in result.mail_ids]
    pending.filter(pk__in=sent).update(status=MailStatus.SENT, sent_at=now, next_attempt_at=None)
    untried = [pk for result in results if not result.tried for pk in result.mail_ids]
    pending.filter(pk__in=untried).update(next_attempt_at=None, attempts=F("attempts") - 1)
    failed = [pk for result in results if result.tried and not result.ok for pk in result.mail_ids]
    pending.filter(pk__in=failed, attempts__gte=MAX_ATTEMPTS).update(status=MailStatus.FAILED)
    for attempts, wait in enumerate(RETRY_AFTER, start=1):
        pending.filter(pk__in=failed, attempts=attempts).update(next_attempt_at=now + wait)
    return sum(1 for result in results if result.ok)


def mail_send_pending() -> int:
    """Send every mail waiting to go at once (``tracker.send_mail``); how many were sent."""
    total = 0
    for _ in range(MAX_BATCHES):
        taken = mail_take_now()
        if not taken:
            break
        sent = mail_settle(mail_deliver(taken))
        total += sent
        if not sent:  # the mail server refuses: the next run tries again
            break
    return total


# --- the daily digest -------------------------------------------------------------------------------


def digest_due(*, now: datetime | None = None) -> bool:
    """Whether today's digest is to go now (at or after DIGEST_HOUR, not yet sent today): the day
    is claimed by whoever asks first, so that one run sends it."""
    now = now or timezone.now()
    mark = now.replace(hour=DIGEST_HOUR, minute=0, second=0, microsecond=0)
    if now < mark:
        return False
    claimed = Sweep.objects.filter(name=DIGEST_SWEEP, finished_at__lt=mark).update(finished_at=now)
    if claimed:
        return True
    try:
        with transaction.atomic():
            _, created = Sweep.objects.get_or_create(name=DIGEST_SWEEP, defaults={"finished_at": now})
    except IntegrityError:  # another run created it just now: theirs
        return False
    return created


def mail_send_digests(*, now: datetime | None = None) -> int:
    """Send each user's daily digest if it is due (``tracker.send_digests``); how many went."""
    if not digest_due(now=now):
        return 0
    total = 0
    for _ in range(MAX_BATCHES):
        taken = mail_take_digests(now=now)
        if not taken:
            break
        sent = mail_settle(mail_deliver(taken))
        total += sent
        if not sent:  # the mail server refuses: the next run tries again
            break
    return total


# --- the embedded server's sender -------------------------------------------------------------------

Bridge = Callable[[Callable[..., R]], Callable[..., Awaitable[R]]]


class MailSender:
    """The embedded server's sender: woken after each commit that queued a mail to send now
    (:meth:`wake`, from any thread), and every ``interval`` seconds for retries and the digest.
    What Celery does in production; a pass that fails is logged and the next one runs."""

    def __init__(self, interval: float = 30.0) -> None:
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken: asyncio.Event | None = None
        self._run: Bridge[Any] | None = None
        self._stopping = False

    @property
    def started(self) -> bool:
        return self._task is not None

    async def start(self, *, run: Bridge[Any]) -> None:
        """Run on this event loop; ``run`` takes a function to the database threads."""
        if self._task is not None:
            return
        self._run, self._loop, self._woken = run, asyncio.get_running_loop(), asyncio.Event()
        self._stopping = False
        context = contextvars.Context()  # it outlives whatever request started the server
        self._task = self._loop.create_task(self._forever(), context=context)

    async def stop(self, within: float = 5.0) -> None:
        """Let the pass on its way end (its database work is never cut in the middle), within
        ``within`` seconds; then it is cancelled."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        self.wake()
        done, _ = await asyncio.wait({task}, timeout=within)
        if not done:
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=within)
        if not done:
            logger.warning("the mail sender did not stop within %ss; left behind", within)
        self._loop = self._woken = None

    def wake(self) -> None:
        """A mail waits to be sent now: send it soon. Safe from any thread."""
        loop, woken = self._loop, self._woken
        if loop is None or woken is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(woken.set)

    async def send(self) -> int:
        """One pass: what waits to go now, and the digest if it is due; how many messages went."""
        run = self._run
        assert run is not None, "start the sender first"
        total = await self._batches(mail_take_now)
        if await run(digest_due)():
            total += await self._batches(mail_take_digests)
        return total

    async def _batches(self, take: Callable[[], list[Outgoing]]) -> int:
        run = self._run
        assert run is not None
        total = 0
        for _ in range(MAX_BATCHES):
            if self._stopping:
                break
            taken = await run(take)()
            if not taken:
                break
            results = await asyncio.to_thread(mail_deliver, taken)  # the mail server's time, off the loop
            sent = await run(mail_settle)(results)
            total += sent
            if not sent:  # the mail server refuses: the next pass tries again
                break
        return total

    async def _forever(self) -> None:
        woken = self._woken
        assert woken is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), timeout=self.interval)
            woken.clear()
            if self._stopping:
                return
            try:
                await self.send()
            except Exception:
                logger.exception("sending mail failed; the next pass runs in %ss", self.interval)


mail_sender = MailSender()
