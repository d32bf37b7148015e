"""Changesets: propose, apply (all or nothing), reject.

A changeset is the only way an agent changes the plan. Apply re-validates
against the current plan inside one transaction; a stale ``base_version`` or
any other failure turns the changeset ``conflicted`` with its reason, and
nothing of it stays applied. A trial (:func:`changeset_trial`) runs the same
operations and rolls them back, to show what applying would change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from tracker.commit_hooks import on_commit_robust
from tracker.db.locks import locked as row_locked
from tracker.errors import (
    BalletError,
    ConflictError,
    InvalidStateError,
    PermissionDeniedError,
    ValidationError,
)
from tracker.inputs import refuse_nul
from tracker.models import Changeset, ChangesetStatus, Item, Project, Watch
from tracker.selectors import project_planner_config
from tracker.services.activity import Actor, activity_record
from tracker.services.changeset_validation import (
    MAX_RATIONALE,
    MAX_TITLE,
    Node,
    ResolvedOperation,
    changeset_validate,
)
from tracker.services.events import events_gathered, runnable_deferred
from tracker.services.items import dependency_add, dependency_remove, item_create, item_update
from tracker.signals import changeset_decided
from tracker.trust.permissions import (
    CHANGESET_APPLY,
    POLICY_SET,
    TRACKER_WRITE,
    AnyUser,
    has_permission,
    require,
)

MAX_NOTE = 5_000
# A database constraint caught what the checks before each write did not (a concurrent writer).
CONSTRAINT_REASON = (
    "The plan changed while this changeset was applied: an item or dependency it writes already "
    "exists. Review it against the current plan and propose it again."
)

logger = logging.getLogger(__name__)
T = TypeVar("T")


class ApplyConflictError(ConflictError):
    """An operation could not be applied to the current plan."""


def _can_set_policy(actor: Actor, project: Project) -> bool:
    """Only a human with ``policy.set`` sets policy; the planner never does, whoever it acts for."""
    return not actor.is_planner and has_permission(actor.user, project, POLICY_SET)


def proposer_can_set_policy(changeset: Changeset) -> bool:
    """The policy rule as it applied to the proposer: Apply (and the review page) judge by it."""
    proposer = Actor(user=changeset.proposed_by, planner_session=changeset.planner_session)
    return _can_set_policy(proposer, changeset.project)


def _check_text(errors: dict[str, list[str]], name: str, value: Any, limit: int, required: bool) -> None:
    if not isinstance(value, str) or (required and not value.strip()):
        errors[name] = ["Expected a non-empty string." if required else "Expected a string."]
    elif len(value) > limit:
        errors[name] = [f"At most {limit} characters."]


def changeset_propose(
    *,
    actor: Actor,
    project: Project,
    title: Any,
    rationale: Any = "",
    operations: Any,
) -> Changeset:
    """Validate and store a proposed changeset (needs ``tracker.write``)."""
    require(actor.user, project, TRACKER_WRITE)
    refuse_nul(title=title, rationale=rationale, operations=operations)
    errors: dict[str, list[str]] = {}
    _check_text(errors, "title", title, MAX_TITLE, required=True)
    _check_text(errors, "rationale", rationale, MAX_RATIONALE, required=False)
    try:
        changeset_validate(
            project=project,
            operations=operations,
            can_set_policy=_can_set_policy(actor, project),
        )
    except ValidationError as exc:
        errors.update(exc.errors)
    if errors:
        raise ValidationError(errors, "The changeset is invalid.")
    return _store(actor=actor, project=project, title=title, rationale=rationale, operations=operations)


@transaction.atomic
def _store(*, actor: Actor, project: Project, title: str, rationale: str, operations: list[Any]) -> Changeset:
    Project.objects.filter(pk=project.pk).update(next_changeset_number=F("next_changeset_number") + 1)
    number = Project.objects.values_list("next_changeset_number", flat=True).get(pk=project.pk) - 1
    changeset = Changeset.objects.create(
        project=project,
        number=number,
        title=title.strip(),
        rationale=rationale,
        operations=operations,
        proposed_by=actor.user,
        planner_session=actor.planner_session,
    )
    activity_record(
        actor=actor,
        organization_id=project.organization_id,
        project=project,
        verb="changeset.proposed",
        target=f"changeset:{number}",
        data={"number": number, "title": changeset.title, "operations": len(operations)},
    )
    return changeset


def _lock_proposed(changeset: Changeset) -> Changeset:
    locked = row_locked(Changeset.objects.select_related("project", "proposed_by")).get(pk=changeset.pk)
    if locked.status != ChangesetStatus.PROPOSED:
        raise InvalidStateError(
            f"Changeset #{locked.number} is {locked.status}; only a proposed changeset can be decided."
        )
    return locked


FOUR_EYES_REASON = "This project requires four eyes: someone other than the proposer must apply it."


def four_eyes_forbids(*, user: AnyUser, changeset: Changeset) -> bool:
    """Whether four eyes (docs/trust.md) keeps ``user`` from applying ``changeset``: they proposed it."""
    return changeset.proposed_by_id == user.pk and project_planner_config(changeset.project).four_eyes


def _authorize_decision(actor: Actor, changeset: Changeset, *, applying: bool) -> None:
    if actor.is_planner:
        raise PermissionDeniedError("The planner cannot apply or reject a changeset; a human decides.")
    require(actor.user, changeset.project, CHANGESET_APPLY)
    if applying and four_eyes_forbids(user=actor.user, changeset=changeset):
        raise PermissionDeniedError(FOUR_EYES_REASON)


def _check_note(note: Any) -> str:
    """A decision's note, stripped; a ValidationError unless a string of at most MAX_NOTE without NUL."""
    if not isinstance(note, str) or len(note) > MAX_NOTE:
        raise ValidationError({"note": [f"Expected a string of at most {MAX_NOTE} characters."]})
    refuse_nul(note=note)
    return note.strip()


def changeset_apply(*, actor: Actor, changeset: Changeset, note: Any = "") -> Changeset:
    """Apply every operation or none; a failure makes the changeset ``conflicted``. ``note``, the
    decider's word on it, is kept with the decision either way."""
    return _apply(
        actor, changeset, _check_note(note), lambda locked: _authorize_decision(actor, locked, applying=True)
    )


def _authorize_own(actor: Actor, changeset: Changeset) -> None:
    if actor.is_planner or changeset.proposed_by_id != actor.user.pk:
        raise PermissionDeniedError("Only the human who made a direct edit applies it at once.")
    require(actor.user, changeset.project, TRACKER_WRITE)
    if project_planner_config(changeset.project).four_eyes:
        raise PermissionDeniedError(FOUR_EYES_REASON)


def changeset_apply_own(*, actor: Actor, changeset: Changeset) -> Changeset:
    """Apply a direct edit (``tracker.services.item_edits``) at once, by its own author: tracker.write
    suffices where the project's ``direct_edits`` allows the edit, which the caller decided; four
    eyes forbids it always. The same validation, versions and activity as :func:`changeset_apply`."""
    return _apply(actor, changeset, "", lambda locked: _authorize_own(actor, locked))


def _apply(
    actor: Actor, changeset: Changeset, note: str, authorize: Callable[[Changeset], None]
) -> Changeset:
    with transaction.atomic():
        locked = _lock_proposed(changeset)
        authorize(locked)
        row_locked(Project.objects.filter(pk=locked.project_id)).first()  # held past a conflict too
        try:
            with (
                transaction.atomic(),
                runnable_deferred(actor=actor.label, on_behalf_of=actor.user),
                events_gathered(),
            ):
                created = _execute(actor, locked)
        except ApplyConflictError as exc:
            return _decide(actor, locked, ChangesetStatus.CONFLICTED, note=note, reason=exc.message)
        except IntegrityError:
            # The raw message names tables and columns: log it, show the human a sentence.
            logger.warning(
                "changeset #%s of %s hit a constraint", locked.number, locked.project_id, exc_info=True
            )
            return _decide(actor, locked, ChangesetStatus.CONFLICTED, note=note, reason=CONSTRAINT_REASON)
        _proposer_watches(locked, created.values())
        locked.created_items = _keys(created)
        return _decide(actor, locked, ChangesetStatus.APPLIED, note=note)


def _proposer_watches(changeset: Changeset, items: Collection[Item]) -> None:
    """The human who proposed ``changeset`` watches the ``items`` it created, and so is told when a
    ticket they proposed moves (docs/events.md#people); an agent watches nothing."""
    if not items or not User.objects.filter(pk=changeset.proposed_by_id, agent__isnull=True).exists():
        return
    Watch.objects.bulk_create(
        [Watch(item=item, user_id=changeset.proposed_by_id) for item in items], ignore_conflicts=True
    )


class _TrialRolledBackError(Exception):
    """Ends a trial: what it wrote goes with the transaction this leaves."""


def changeset_trial(*, changeset: Changeset, observe: Callable[[], T]) -> tuple[T, T, dict[str, str]]:
    """``observe()`` of the plan now and as it would be with ``changeset`` applied, and the keys its
    creates take in the trial (``{ref, or "#" + operation index: key}``); nothing of it stays.

    The operations run as Apply runs them (the same validation and writes), in a transaction (a
    savepoint inside an outer one) that is then rolled back: the rows, activity events and counters
    written, the row locks taken and the on-commit work queued (search indexing) go with it; no
    decision is recorded, so nobody is told. Raises InvalidStateError for a decided changeset and
    ApplyConflictError, with the reason Apply would give, when it no longer applies.
    """
    if changeset.status != ChangesetStatus.PROPOSED:
        raise InvalidStateError(
            f"Changeset #{changeset.number} is {changeset.status}; only a proposed changeset has an impact."
        )
    actor = Actor(user=changeset.proposed_by, system="trial")
    seen: list[T] = []
    created: dict[str, str] = {}
    try:
        with transaction.atomic():
            seen.append(observe())
            try:
                created = _keys(_execute(actor, changeset))
            except IntegrityError as exc:
                raise ApplyConflictError(CONSTRAINT_REASON) from exc
            seen.append(observe())
            raise _TrialRolledBackError
    except _TrialRolledBackError:
        pass
    return seen[0], seen[1], created


def _conflict_reason(errors: dict[str, list[str]]) -> str:
    return "; ".join(f"{path}: {' '.join(messages)}" for path, messages in errors.items())


def _keys(created: dict[str, Item]) -> dict[str, str]:
    """``{ref, or "#" + operation index: key}`` of the items a changeset created."""
    return {ref: item.key for ref, item in created.items()}


def _execute(actor: Actor, changeset: Changeset) -> dict[str, Item]:
    """Validate under the project's row lock and write every operation; the items it created, by
    ref (or "#" + operation index). The items it updates are locked first, by id, before anything
    is written (docs/architecture.md#row-locks): each write appends to the activity log under the
    organization's row lock, which comes last."""
    row_locked(Project.objects.filter(pk=changeset.project_id)).first()
    try:
        operations = changeset_validate(
            project=changeset.project,
            operations=changeset.operations,
            can_set_policy=proposer_can_set_policy(changeset),
        )
    except ValidationError as exc:
        raise ApplyConflictError(_conflict_reason(exc.errors)) from exc
    updated = sorted({op.item for op in operations if op.op == "update" and isinstance(op.item, int)})
    list(row_locked(Item.objects.filter(pk__in=updated)).order_by("pk").values_list("pk", flat=True))
    created: dict[Node, Item] = {}
    for operation in operations:
        try:
            _execute_one(actor, changeset.project, operation, created)
        except BalletError as exc:
            raise ApplyConflictError(f"operations[{operation.index}]: {exc.message}") from exc
    return {str(ref).lstrip("$"): item for ref, item in created.items()}


def _item(node: Node, created: dict[Node, Item]) -> Item:
    if isinstance(node, str):
        return created[node]
    return Item.objects.select_related("project").get(pk=node)


def _item_fields(fields: dict[str, Any], created: dict[Node, Item]) -> dict[str, Any]:
    resolved = dict(fields)
    for parent in ("epic", "milestone"):
        if resolved.get(parent) is not None:
            resolved[parent] = _item(resolved[parent], created)
    return resolved


def _execute_one(actor: Actor, project: Project, op: ResolvedOperation, created: dict[Node, Item]) -> None:
    if op.op == "create":
        assert op.kind is not None
        item = item_create(
            actor=actor, project=project, kind=op.kind, fields=_item_fields(op.fields, created)
        )
        created[f"${op.ref}" if op.ref else f"$#{op.index}"] = item
    elif op.op == "update":
        assert op.item is not None
        item_update(
            actor=actor,
            item=_item(op.item, created),
            fields=_item_fields(op.fields, created),
            base_version=op.base_version,
        )
    elif op.op == "add_dependency":
        assert op.blocker is not None
        assert op.blocked is not None
        dependency_add(actor=actor, blocker=_item(op.blocker, created), blocked=_item(op.blocked, created))
    else:
        assert op.blocker is not None
        assert op.blocked is not None
        dependency_remove(actor=actor, blocker=_item(op.blocker, created), blocked=_item(op.blocked, created))


def _decide(
    actor: Actor, changeset: Changeset, status: str, *, note: str = "", reason: str = ""
) -> Changeset:
    changeset.status = status
    changeset.decided_by = actor.user
    changeset.decided_at = timezone.now()
    changeset.decision_note = note
    changeset.conflict_reason = reason
    changeset.save(
        update_fields=[
            "status",
            "decided_by",
            "decided_at",
            "decision_note",
            "conflict_reason",
            "created_items",
        ]
    )
    data: dict[str, Any] = {"number": changeset.number, "title": changeset.title, "status": status}
    if changeset.planner_session:
        data["planner_session"] = str(changeset.planner_session)
    if note:
        data["note"] = note
    if reason:
        data["reason"] = reason
    if changeset.created_items:
        data["created"] = changeset.created_items
    activity_record(
        actor=actor,
        organization_id=changeset.project.organization_id,
        project=changeset.project,
        verb=f"changeset.{status}",
        target=f"changeset:{changeset.number}",
        data=data,
    )
    on_commit_robust(changeset_decided.send_robust, sender=Changeset, changeset=changeset)
    return changeset


@transaction.atomic
def changeset_reject(*, actor: Actor, changeset: Changeset, note: Any = "") -> Changeset:
    """Reject a proposed changeset with a note for the proposer."""
    note = _check_note(note)
    locked = _lock_proposed(changeset)
    _authorize_decision(actor, locked, applying=False)
    return _decide(actor, locked, ChangesetStatus.REJECTED, note=note)
