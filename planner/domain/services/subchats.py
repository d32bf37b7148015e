"""Sub-chats the planner drives (docs/domain.md#sub-chats): ``start_subchat`` opens a chat whose
``parent`` is the calling session, in its project, owned by its human; the calling turn pauses on
a ``subchat`` request per call (``human_requests.turn_pause``), and each sub-chat's end answers its
request (``human_requests.subchat_ended``) with what :func:`subchat_result` reads of it.

Apart from ``human_requests.py``, which imports these: the opening and the reading of a sub-chat,
and its first turn. Each runs on the database threads and returns plain data
(docs/architecture.md#one-bridge).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q

from planner.agent.messages import ToolUseBlock
from planner.domain.services import sessions
from planner.domain.services.sessions import Begin
from planner.models import (
    Event,
    HumanRequest,
    Message,
    RequestKind,
    RequestStatus,
    Session,
    SessionState,
    TitleSource,
)
from tracker.db.locks import locked as row_locked
from tracker.errors import ConflictError
from tracker.models import Changeset, Item, Project
from tracker.selectors import item_number, project_planner_config

IN_A_SUBCHAT = (
    "A sub-chat starts no sub-chats of its own: do this part of the work here, or say in your "
    "answer what is left to do."
)
IN_A_QUESTION = "start_subchat works in a human's own chat, not in a question's sub-chat."


class SubchatNotWaitingError(ConflictError):
    """The sub-chat's request was settled (its parent stopped) before its turn started."""


@dataclass(frozen=True)
class SubchatStart:
    """A sub-chat whose first turn is to start: its parent, itself, its owner, its first message."""

    parent_id: uuid.UUID
    session_id: uuid.UUID
    owner_id: int
    owner: str
    text: str


def _running(parent: Session) -> int:
    """The sub-chats of ``parent`` that have not ended: a turn running, or waiting for a human."""
    waiting = Q(state=SessionState.PAUSED, requests__status=RequestStatus.PENDING)
    children = Session.objects.filter(parent=parent).filter(Q(state=SessionState.RUNNING) | waiting)
    return children.distinct().count()


def subchat_refusals(*, session_id: uuid.UUID, calls: list[ToolUseBlock]) -> dict[str, tuple[str, str]]:
    """Of a round's ``start_subchat`` calls (valid inputs), those refused before they wait, by call
    id, with the error's code and words: any in a sub-chat or a question's sub-chat, an unknown
    item, and those past ``[planner] max_subchats`` running at once in the chat."""
    session = Session.objects.select_related("project").get(pk=session_id)
    if session.parent_id is not None or session.question_id is not None:
        why = ("invalid_state", IN_A_SUBCHAT if session.parent_id is not None else IN_A_QUESTION)
        return {call.id: why for call in calls}
    limit = project_planner_config(session.project).max_subchats
    room = limit - _running(session)
    turn_room = limit - _started_this_turn(session)
    refused: dict[str, tuple[str, str]] = {}
    for call in calls:
        item = call.input.get("item")
        if item is not None and not _item_exists(session.project, item):
            refused[call.id] = ("not_found", f"There is no item {item} in {session.project.key}.")
        elif turn_room <= 0:
            refused[call.id] = (
                "too_many_subchats",
                f"At most {limit} sub-chats start in one turn of a chat ([planner] max_subchats): this "
                "one was not started. Do the rest yourself, or say what is left and let the human ask "
                "again.",
            )
        elif room <= 0:
            refused[call.id] = (
                "too_many_subchats",
                f"At most {limit} sub-chats run at once in a chat ([planner] max_subchats): this one "
                "was not started. Start it once the others have answered, or do it yourself.",
            )
        else:
            room -= 1
            turn_room -= 1
    return refused


def _started_this_turn(parent: Session) -> int:
    """The sub-chats ``parent`` started in its current turn, over all its rounds: a split that
    runs away round after round is refused too, not only one that asks too many at once."""
    return HumanRequest.objects.filter(
        session=parent, turn=parent.turn_count, kind=RequestKind.SUBCHAT
    ).count()


def _item_exists(project: Project, key: str) -> bool:
    number = item_number(project, key)
    return number is not None and Item.objects.filter(project=project, number=number).exists()


def subchat_open(*, parent: Session, call: ToolUseBlock) -> dict[str, Any]:
    """Open the sub-chat of a ``start_subchat`` call of ``parent`` (its owner's, in its project);
    what its request stores: the call's input and the sub-chat's id."""
    title = str(call.input.get("title", "")).strip()
    child = sessions.session_create(user=parent.user, project=parent.project, title=title, parent=parent)
    item = call.input.get("item")
    changed = []
    if title:
        child.title_source = TitleSource.PLANNER
        changed.append("title_source")
    if item:
        child.focus = [item]
        changed.append("focus")
    if changed:
        child.save(update_fields=[*changed, "updated_at"])
    return {**call.input, "session": str(child.pk)}


def first_message(asked: dict[str, Any]) -> str:
    """The sub-chat's first message: the brief (and the item it is about)."""
    brief = str(asked.get("brief", "")).strip()
    item = asked.get("item")
    return f"{brief}\n\n(This sub-chat works on {item}.)" if item else brief


def _pending(parent_id: uuid.UUID) -> list[HumanRequest]:
    return list(
        HumanRequest.objects.filter(
            session_id=parent_id, kind=RequestKind.SUBCHAT, status=RequestStatus.PENDING
        ).order_by("created_at", "tool_use_id")
    )


def subchats_to_start(*, parent_id: uuid.UUID) -> list[SubchatStart]:
    """The sub-chats ``parent_id``'s paused turn waits for whose first turn has not started."""
    asked = {r.input.get("session"): r for r in _pending(parent_id)}
    fresh = Session.objects.filter(
        parent_id=parent_id, pk__in=[k for k in asked if k], turn_count=0, state=SessionState.IDLE
    ).select_related("user")
    return [
        SubchatStart(
            parent_id=parent_id,
            session_id=child.pk,
            owner_id=child.user_id,
            owner=child.user.get_username(),
            text=first_message(asked[str(child.pk)].input),
        )
        for child in sorted(fresh, key=lambda c: asked[str(c.pk)].created_at)
    ]


def subchat_waiting_start(*, session_id: uuid.UUID) -> SubchatStart | None:
    """The start of sub-chat ``session_id`` if its parent still waits for it and its first turn
    has not started (it waited for a free turn); None else."""
    child = Session.objects.select_related("user").filter(pk=session_id).first()
    if child is None or child.turn_count != 0 or child.state != SessionState.IDLE:
        return None
    request = subchat_request(child)
    if request is None or child.parent_id is None:
        return None
    return SubchatStart(
        parent_id=child.parent_id,
        session_id=child.pk,
        owner_id=child.user_id,
        owner=child.user.get_username(),
        text=first_message(request.input),
    )


def subchat_request(child: Session) -> HumanRequest | None:
    """The parent's pending request that waits for ``child``, if any."""
    if child.parent_id is None:
        return None
    return next((r for r in _pending(child.parent_id) if r.input.get("session") == str(child.pk)), None)


@transaction.atomic
def subchat_turn_begin(*, session_id: uuid.UUID) -> Begin:
    """Send the sub-chat's brief as its first message, as its owner: its first turn, within the
    running-turn limits like any turn (not counted against the human's message rate). Once only:
    a sub-chat that waited for a free turn may be started by a pass in any process."""
    child = row_locked(Session.objects.select_related("user").filter(pk=session_id)).get()
    request = subchat_request(child)
    if request is None:
        raise SubchatNotWaitingError("This sub-chat's chat no longer waits for it.")
    if child.turn_count != 0 or child.state != SessionState.IDLE:
        raise SubchatNotWaitingError("This sub-chat has started already.")
    text = sessions.check_text(first_message(request.input))
    return sessions.session_begin(session_id=child.pk, user=child.user, text=text, planner=True)


def subchats_running(*, parent_id: uuid.UUID) -> list[uuid.UUID]:
    """The sub-chats of ``parent_id`` whose turn runs or waits: what stopping the parent stops."""
    children = Session.objects.filter(
        parent_id=parent_id, state__in=[SessionState.RUNNING, SessionState.PAUSED]
    )
    return list(children.values_list("pk", flat=True))


def subchat_parent(*, session_id: uuid.UUID) -> uuid.UUID | None:
    return Session.objects.filter(pk=session_id).values_list("parent_id", flat=True).first()


def subchat_result(child: Session, *, failed: str | None = None) -> dict[str, Any] | None:
    """What the sub-chat's end tells its parent's call: its final answer and the numbers of the
    changesets it proposed; an error body where it failed (``failed``: it could not start) or was
    stopped. None while it has not ended (its turn runs, or waits for a human)."""
    if failed is None and child.state == SessionState.RUNNING:
        return None
    if failed is None and HumanRequest.objects.filter(session=child, status=RequestStatus.PENDING).exists():
        return None
    ended = Event.objects.filter(session=child, kind="turn_ended").order_by("-pk").first()
    reason = "failed" if failed is not None else (ended.data.get("reason", "failed") if ended else "failed")
    error = failed if failed is not None else (ended.data.get("error") if ended else None)
    proposed = Changeset.objects.filter(planner_session=child.pk)
    body: dict[str, Any] = {
        "session": str(child.pk),
        "title": child.title,
        "outcome": reason,
        "answer": _final_text(child),
        "changesets": list(proposed.order_by("number").values_list("number", flat=True)),
    }
    if reason == "failed":
        body["error"] = {"code": "subchat_failed", "message": f"The sub-chat failed: {error or 'no reason'}"}
    elif reason == "stopped":
        body["error"] = {"code": "subchat_stopped", "message": "The sub-chat was stopped before it finished."}
    elif reason == "max_rounds":
        body["note"] = "The sub-chat used all its rounds of tool calls before it finished."
    return body


def _final_text(child: Session) -> str:
    """The text of the sub-chat's last answer."""
    last = Message.objects.filter(session=child, role="assistant", superseded=False).order_by("-seq").first()
    if last is None:
        return ""
    return "\n\n".join(
        str(block.get("text", ""))
        for block in last.content
        if isinstance(block, dict) and block.get("type") == "text"
    ).strip()
