"""Work on the plan (docs/domain.md#work): a worker claims a runnable ticket for a lease, renews it
with heartbeats and progress reports, and ends it with a done, blocked or failed report; or lets it
go (release), or its lease runs out (expiry).

Every function checks the caller's permissions itself: REST and the MCP tools call these alike.
A claim's ticket row is locked before the claim's row, always in that order and those rows only
(``tracker/db/locks.py``), so that a claim, a report, a release and the expiry sweep meeting on one
ticket wait for one another instead of deadlocking; and each re-reads what it decides on under
those locks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, Final

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.utils import timezone

from tracker.db.locks import locked as row_locked
from tracker.errors import (
    ConflictError,
    InvalidStateError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from tracker.inputs import NUL_MESSAGE, nul_paths, refuse_nul
from tracker.inputs import idempotency_key as checked_key
from tracker.models import Claim, ClaimStatus, Item, ItemKind, Project, Report, ReportKind, Sweep
from tracker.selectors import (
    lapsed,
    lease_ran_out,
    project_work_config,
    unresolved_blockers,
    utc_minute,
    with_article,
)
from tracker.services.activity import Actor, activity_record
from tracker.services.events import events_gathered
from tracker.services.items import item_update
from tracker.trust.permissions import TRACKER_READ, TRACKER_WRITE, require
from tracker.work_selectors import LEASE_SWEEP

MAX_SUMMARY_BYTES: Final = 20_000  # a report's Markdown summary, UTF-8
MAX_DETAILS_BYTES: Final = 20_000  # a report's details, as JSON
MAX_LINKS: Final = 20
MAX_LINK: Final = 2000
MAX_REASON: Final = 2000  # a release's reason
EVENT_SUMMARY: Final = 500  # how much of a summary an activity event carries
MAX_END_REASON: Final = 500
LEASE_SYSTEM: Final = "lease"  # the actor of an expiry: ballet:lease, on behalf of the holder
RUNNABLE_RULE: Final = "only ready tickets whose blockers are done can be claimed"

_url = URLValidator(schemes=["http", "https"])


def _lease(project: Project) -> timedelta:
    return timedelta(minutes=max(1, project_work_config(project).claim_minutes))


def _first_line(text: str, limit: int = MAX_END_REASON) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def _claimed_message(claim: Claim, key: str) -> str:
    return f"{key} is claimed by {claim.holder.get_username()} until {utc_minute(claim.expires_at)}."


def _claimed_error(claim: Claim, key: str) -> ConflictError:
    return ConflictError(
        _claimed_message(claim, key),
        current={
            "claim": claim.pk,
            "holder": claim.holder.get_username(),
            "expires_at": claim.expires_at.isoformat(),
        },
    )


def _locked(claim: Claim) -> tuple[Item, Claim]:
    """The claim's ticket and the claim, locked in that order and read afresh."""
    item = row_locked(Item.objects.select_related("project__organization")).get(pk=claim.item_id)
    locked = row_locked(Claim.objects.select_related("holder", "project__organization")).get(pk=claim.pk)
    locked.item = item
    return item, locked


def _ended_error(claim: Claim) -> InvalidStateError:
    return InvalidStateError(
        f"Claim {claim.pk} on {claim.item.key} has ended ({claim.status}"
        + (f": {claim.end_reason}" if claim.end_reason else "")
        + ")."
    )


def _require_holder(actor: Actor, claim: Claim, does: str) -> None:
    if actor.user.pk != claim.holder_id:
        raise PermissionDeniedError(f"Only the claim's holder, {claim.holder.get_username()}, {does}.")


def _require_runnable(item: Item) -> None:
    """InvalidStateError saying why ``item`` cannot be claimed: not a ticket, not ready, blocked."""
    if item.kind != ItemKind.TICKET:
        raise InvalidStateError(f"{item.key} is {with_article(item.kind)}; {RUNNABLE_RULE}.")
    if item.state != "ready":
        raise InvalidStateError(f"{item.key} is {item.state}; {RUNNABLE_RULE}.")
    open_blockers = (
        unresolved_blockers(blocked=item.pk).select_related("blocker__project").order_by("blocker__number")
    )
    named = [f"{d.blocker.key} ({d.blocker.state})" for d in open_blockers]
    if named:
        raise InvalidStateError(f"{item.key} is blocked by {', '.join(named)}; {RUNNABLE_RULE}.")


def _ticket_back(actor: Actor, item: Item) -> Item:
    """The ticket back to ``ready`` if the claim still had it in progress (a human may have moved it)."""
    if item.state == "in_progress":
        return item_update(actor=actor, item=item, fields={"state": "ready"})
    return item


def _end(claim: Claim, status: str, reason: str, now: datetime) -> None:
    claim.status = status
    claim.ended_at = now
    claim.end_reason = reason
    claim.save(update_fields=["status", "ended_at", "end_reason"])


def _expire(claim: Claim, item: Item) -> Item:
    """End ``claim`` (locked, active, its lease run out) as expired when its lease ran out, as every
    read showed it meanwhile (``claim_as_read``); the ticket goes back to ready."""
    reason = lease_ran_out(claim)
    _end(claim, ClaimStatus.EXPIRED, reason, claim.expires_at)
    lease = Actor(user=claim.holder, system=LEASE_SYSTEM)
    item = _ticket_back(lease, item)
    _record(
        lease,
        item,
        "claim.expired",
        {"claim": claim.pk, "holder": claim.holder.get_username(), "reason": reason},
    )
    return item


def _record(actor: Actor, ticket: Item, verb: str, data: dict[str, Any]) -> None:
    """An event of the work on ``ticket`` (docs/domain.md#work): the ticket is its target."""
    activity_record(
        actor=actor,
        organization_id=ticket.project.organization_id,
        project=ticket.project,
        verb=verb,
        target=ticket.key,
        data=data,
    )


# --- claim ----------------------------------------------------------------------------------------


@transaction.atomic
@events_gathered()
def claim_take(*, actor: Actor, project: Project, item: Item) -> Claim:
    """Claim the runnable ticket ``item`` for ``actor`` for the project's lease; it goes in_progress.

    A claim whose lease ran out and that the sweep has not ended yet is expired first. Of workers
    racing for one ticket exactly one wins; the others get a ConflictError naming the holder.
    """
    require(actor.user, project, TRACKER_WRITE)
    if item.project_id != project.pk:
        raise NotFoundError(f"Item {item.key} not found in project {project.key}.")
    locked = row_locked(Item.objects.select_related("project__organization")).get(pk=item.pk)
    now = timezone.now()
    current = (
        row_locked(Claim.objects.select_related("holder"))
        .filter(item_id=locked.pk, status=ClaimStatus.ACTIVE)
        .first()
    )
    if current is not None:
        if current.expires_at > now and current.holder_id == actor.user.pk:
            return _retaken(current, locked, now)
        if current.expires_at > now:
            raise _claimed_error(current, locked.key)
        locked = _expire(current, locked)
    _require_runnable(locked)
    try:
        with transaction.atomic():  # a savepoint: a lost race leaves the outer transaction usable
            claim = Claim.objects.create(
                project=project,
                item=locked,
                holder=actor.user,
                renewed_at=now,
                expires_at=now + _lease(project),
            )
    except IntegrityError as exc:  # another process won without our lock (no row lock on SQLite reads)
        winner = (
            Claim.objects.select_related("holder")
            .filter(item_id=locked.pk, status=ClaimStatus.ACTIVE)
            .first()
        )
        if winner is None:
            raise ConflictError(f"{locked.key} was claimed by someone else just now.") from exc
        raise _claimed_error(winner, locked.key) from exc
    locked = item_update(actor=actor, item=locked, fields={"state": "in_progress"})
    claim.item = locked
    _record(
        actor,
        locked,
        "claim.taken",
        {
            "claim": claim.pk,
            "holder": actor.user.get_username(),
            "expires_at": claim.expires_at.isoformat(),
        },
    )
    return claim


def _retaken(claim: Claim, item: Item, now: datetime) -> Claim:
    """The locked ``claim`` its holder claimed again (a retry after a lost answer, a restarted
    worker): the same claim, its lease renewed from now; no activity."""
    claim.renewed_at = now
    claim.expires_at = now + _lease(item.project)
    claim.save(update_fields=["renewed_at", "expires_at"])
    claim.item = item
    claim.retaken = True
    return claim


def _open(claim: Claim, item: Item, now: datetime) -> bool:
    """Whether the locked ``claim`` is still held: an ended one is an InvalidStateError; one whose
    lease ran out is expired here (False), and the caller refuses once that is committed."""
    if claim.status != ClaimStatus.ACTIVE:
        raise _ended_error(claim)
    if claim.expires_at <= now:
        _expire(claim, item)
        return False
    return True


def claim_renew(*, actor: Actor, claim: Claim) -> Claim:
    """The holder's heartbeat: the lease starts again from now. Not an activity event."""
    require(actor.user, claim.project, TRACKER_WRITE)
    _require_holder(actor, claim, "renews it")
    with transaction.atomic():
        item, locked = _locked(claim)
        now = timezone.now()
        held = _open(locked, item, now)
        if held:
            locked.renewed_at = now
            locked.expires_at = now + _lease(item.project)
            locked.save(update_fields=["renewed_at", "expires_at"])
    if not held:
        raise _ended_error(locked)
    return locked


# --- reports --------------------------------------------------------------------------------------


def _link_errors(links: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(links, list):
        yield "links", "Expected a list of URLs."
        return
    if len(links) > MAX_LINKS:
        yield "links", f"At most {MAX_LINKS} links."
        return
    for index, link in enumerate(links):
        where = f"links.{index}"
        if not isinstance(link, str):
            yield where, "Expected a string."
        elif len(link) > MAX_LINK:
            yield where, f"At most {MAX_LINK} characters."
        else:
            try:
                _url(link)
            except DjangoValidationError:
                yield where, "Expected an absolute http(s) URL."


def _dotted(path: str) -> str:
    """``links[2]`` as this input's field errors name it: ``links.2``."""
    return re.sub(r"\[(\d+)\]", r".\1", path)


def _summary_errors(summary: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(summary, str):
        yield "summary", "Expected a string of Markdown."
    elif not summary.strip():
        yield "summary", "This field may not be blank."
    elif len(summary.encode("utf-8", "surrogatepass")) > MAX_SUMMARY_BYTES:
        yield "summary", f"At most {MAX_SUMMARY_BYTES} bytes (UTF-8)."


def _details_errors(details: Any) -> Iterator[tuple[str, str]]:
    if not isinstance(details, dict):
        yield "details", "Expected a JSON object."
        return
    try:
        size = len(json.dumps(details, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError):
        yield "details", "Expected a JSON object."
        return
    if size > MAX_DETAILS_BYTES:
        yield "details", f"At most {MAX_DETAILS_BYTES} bytes as JSON."


def _report_input(
    kind: Any, summary: Any, links: Any, details: Any
) -> tuple[str, str, list[str], dict[str, Any]]:
    """The report's fields, checked; one ValidationError naming every bad field."""
    links = [] if links is None else links
    details = {} if details is None else details
    errors: dict[str, list[str]] = {}
    found = [
        *(
            [("kind", f"Expected one of {', '.join(ReportKind.values)}.")]
            if kind not in ReportKind.values
            else []
        ),
        *_summary_errors(summary),
        *_link_errors(links),
        *_details_errors(details),
        *(
            (_dotted(path), NUL_MESSAGE)
            for path in nul_paths({"summary": summary, "links": links, "details": details})
        ),
    ]
    for field, message in found:
        errors.setdefault(field, []).append(message)
    if errors:
        raise ValidationError(errors)
    return str(kind), summary, links, details


def _review_skipped(item: Item) -> bool:
    return isinstance(item.policy, dict) and item.policy.get("review") == "none"


# A report's outcome: the claim's status, and the ticket state it moves an in-progress ticket to.
_DONE_STATE = "in_review"


def _outcome(kind: str, item: Item) -> tuple[str | None, str | None]:
    """(the claim's new status or None if it holds, the ticket's new state or None)."""
    if kind == ReportKind.PROGRESS:
        return None, None
    if kind == ReportKind.DONE:
        return ClaimStatus.DONE, "done" if _review_skipped(item) else _DONE_STATE
    return (ClaimStatus.BLOCKED if kind == ReportKind.BLOCKED else ClaimStatus.FAILED), "ready"


def report_add(
    *,
    actor: Actor,
    claim: Claim,
    kind: Any,
    summary: Any,
    links: Any = None,
    details: Any = None,
    idempotency_key: Any = None,
) -> Report:
    """The holder reports on its claim: ``progress`` renews the lease; ``done`` ends the claim and
    sends the ticket to review (or to done, under the policy ``{"review": "none"}``); ``blocked`` and
    ``failed`` end it and put the ticket back to ready. All of it or nothing. Reported again with
    its ``idempotency_key`` (a retry after a lost answer), the first report is returned
    (``replayed``), even once the claim has ended; the same key for another report is a 409."""
    require(actor.user, claim.project, TRACKER_WRITE)
    _require_holder(actor, claim, "reports on it")
    kind, summary, links, details = _report_input(kind, summary, links, details)
    key = checked_key(idempotency_key)
    with transaction.atomic(), events_gathered():
        item, locked = _locked(claim)
        earlier = Report.objects.filter(claim=locked, idempotency_key=key).first() if key else None
        if earlier is not None:
            return _replayed(earlier, locked, item, kind=kind, summary=summary)
        now = timezone.now()
        held = _open(locked, item, now)
        if held:
            report = _report_apply(
                actor, locked, item, now, kind=kind, summary=summary, links=links, details=details, key=key
            )
    if not held:
        raise _ended_error(locked)
    return report


def _report_apply(
    actor: Actor,
    claim: Claim,
    item: Item,
    now: datetime,
    *,
    kind: str,
    summary: str,
    links: list[str],
    details: dict[str, Any],
    key: str,
) -> Report:
    report = Report.objects.create(
        claim=claim,
        item=item,
        author=actor.user,
        kind=kind,
        summary=summary,
        links=links,
        details=details,
        idempotency_key=key,
    )
    status, state = _outcome(kind, item)
    new_state: str | None = None
    if status is None:
        claim.renewed_at = now
        claim.expires_at = now + _lease(item.project)
        claim.save(update_fields=["renewed_at", "expires_at"])
    else:
        _end(claim, status, _first_line(summary), now)
        if state is not None and item.state == "in_progress":
            item = item_update(actor=actor, item=item, fields={"state": state})
            new_state = item.state
    claim.item = item
    report.claim, report.item = claim, item
    _record(
        actor,
        item,
        "report.added",
        {
            "claim": claim.pk,
            "kind": kind,
            "summary": summary[:EVENT_SUMMARY],
            "links": links,
            "state": new_state,
        },
    )
    return report


def _replayed(report: Report, claim: Claim, item: Item, *, kind: str, summary: str) -> Report:
    """The report first made with this idempotency key, as the claim and ticket stand now; a key
    used for another report is refused, naming what it was used for."""
    if (report.kind, report.summary) != (kind, summary):
        raise ConflictError(
            f"The idempotency key was used for another report on claim {claim.pk} (report {report.pk}, "
            f"{report.kind}); send a new key with a new report."
        )
    report.claim, report.item = claim, item
    report.replayed = True
    return report


# --- release and expiry ---------------------------------------------------------------------------


def claim_release(*, actor: Actor, claim: Claim, reason: Any = "", by_key: bool = False) -> Claim:
    """Let ``claim`` go; the ticket goes back to ready. Its holder may; anyone else needs
    tracker.write and must not come with an API key (``by_key``): an agent releases only its own."""
    require(actor.user, claim.project, TRACKER_READ)
    if actor.user.pk != claim.holder_id and by_key:
        raise PermissionDeniedError(
            f"Only the claim's holder, {claim.holder.get_username()}, releases it with an API key; "
            "sign in to release someone else's claim."
        )
    require(actor.user, claim.project, TRACKER_WRITE)
    reason = "" if reason is None else reason
    if not isinstance(reason, str):
        raise ValidationError({"reason": ["Expected a string."]})
    if len(reason) > MAX_REASON:
        raise ValidationError({"reason": [f"At most {MAX_REASON} characters."]})
    refuse_nul(reason=reason)
    reason = reason.strip()
    with transaction.atomic(), events_gathered():
        item, locked = _locked(claim)
        held = _open(locked, item, timezone.now())
        if held:
            _release(actor, locked, item, reason)
    if not held:  # its lease had run out: now expired, and refused as any ended claim is
        raise _ended_error(locked)
    return locked


def _release(actor: Actor, claim: Claim, item: Item, reason: str) -> None:
    """End the locked, held ``claim`` as released by ``actor``; the ticket goes back to ready."""
    by = actor.user.get_username()
    who = "its holder" if actor.user.pk == claim.holder_id else by
    why = f"released by {who}" + (f": {reason}" if reason else "")
    _end(claim, ClaimStatus.RELEASED, why, timezone.now())
    claim.item = _ticket_back(actor, item)
    _record(
        actor,
        claim.item,
        "claim.released",
        {"claim": claim.pk, "holder": claim.holder.get_username(), "by": by, "reason": reason},
    )


def _due_claim_ids(now: datetime) -> list[int]:
    """Active claims whose lease ran out by ``now``, oldest deadline first."""
    return list(Claim.objects.filter(lapsed(now)).order_by("expires_at", "pk").values_list("pk", flat=True))


def _expire_one(claim_id: int, now: datetime) -> bool:
    """Expire the claim if, under its locks, it is still active and its lease still ran out."""
    with transaction.atomic(), events_gathered():
        claim = Claim.objects.filter(pk=claim_id).only("pk", "item_id").first()
        if claim is None:
            return False
        item, locked = _locked(claim)
        if locked.status != ClaimStatus.ACTIVE or locked.expires_at > now:
            return False  # reported on, released or renewed since the sweep listed it
        _expire(locked, item)
        return True


def claims_expire(*, now: datetime | None = None) -> int:
    """End every active claim whose lease ran out by ``now`` (default: now) as expired, each in its
    own transaction; the tickets go back to ready. How many it ended. Once all are ended, when
    it finished is recorded for /metrics and /healthz (``lease_sweep_finished_at``)."""
    now = now or timezone.now()
    ended = sum(_expire_one(claim_id, now) for claim_id in _due_claim_ids(now))
    Sweep.objects.update_or_create(name=LEASE_SWEEP, defaults={"finished_at": timezone.now()})
    return ended
