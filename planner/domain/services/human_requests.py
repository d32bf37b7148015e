"""A turn paused on humans (docs/domain.md): its requests, their answers, its resumption.

When the model calls ``ask_human``, or a tool the project lists in
``approve_tools``, the round's answer is stored, the round's other calls run,
and the turn pauses on a stored :class:`HumanRequest` per such call
(:func:`turn_pause`): the session is ``paused``, no process owns it, so a
restart loses nothing and recovery leaves it alone. Each answer (a click, a
reply, ``answers/`` over REST, the ``answer`` frame) resolves one request
(:func:`request_reply`); a plain message from the owner resolves them all
(:func:`requests_reply_all`): it answers the questions and declines the approvals
with the message as the reason. Once none is pending, the round's results are
written (recorded outputs, answers, approved calls run now as the owner,
declines as errors) and the turn continues (``sessions.turn_continue``).
Stopping a paused turn cancels its requests (:func:`requests_cancel`). A ``start_subchat`` call
waits the same way on a ``subchat`` request, answered by its sub-chat's end, never by a human
(:func:`subchat_ended`, docs/domain.md#sub-chats).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from planner.agent import frames
from planner.agent.frames import Frame, RequestFrame
from planner.agent.loop import STOPPED_RESULT
from planner.agent.messages import ChatMessage, ToolResultBlock, ToolUseBlock, block_from_wire
from planner.domain.selectors import session_reader
from planner.domain.services import sessions, subchats
from planner.domain.services.agent_questions import questions_waiting_on
from planner.domain.services.previews import request_preview
from planner.domain.services.sessions import Begin, StepRecords, ToolRecord
from planner.domain.tools import TOOLS, ToolContext
from planner.models import (
    Event,
    HumanRequest,
    Message,
    MessageKind,
    RequestKind,
    RequestStatus,
    Session,
    SessionState,
    ToolCall,
)
from tracker.db.locks import locked as row_locked
from tracker.errors import (
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from tracker.inputs import refuse_nul
from tracker.models import Project
from tracker.services.events import event_record
from tracker.trust.permissions import PLANNER_CHAT, has_permission, require

MAX_REASON = 2_000


def human_kind(call: ToolUseBlock, approve_tools: tuple[str, ...]) -> RequestKind | None:
    """Whether ``call`` waits for a human, and as what: ask_human, or a tool that needs approval."""
    spec = TOOLS.get(call.name)
    if spec is None:
        return None
    if spec.asks_human:
        return RequestKind.QUESTION
    if spec.starts_subchat:
        return RequestKind.SUBCHAT
    return RequestKind.APPROVAL if call.name in approve_tools else None


def request_frame(request: HumanRequest) -> RequestFrame:
    if request.kind == RequestKind.SUBCHAT:
        return frames.request_subchat(
            id=str(request.pk),
            tool_use_id=request.tool_use_id,
            session=str(request.input.get("session", "")),
            title=str(request.input.get("title", "")),
            brief=str(request.input.get("brief", "")),
        )
    if request.kind == RequestKind.QUESTION:
        return frames.request_question(
            id=str(request.pk),
            tool_use_id=request.tool_use_id,
            question=request.question,
            options=request.options,
        )
    return frames.request_approval(
        id=str(request.pk),
        tool_use_id=request.tool_use_id,
        tool=request.tool,
        input=request.input,
        preview=request.preview,
    )


def resolved_frame(request: HumanRequest) -> Frame:
    by = request.answered_by.get_username() if request.answered_by is not None else ""
    return frames.request_resolved(id=str(request.pk), outcome=request.status, by=by, answer=request.answer)


# ---------------------------------------------------------------------- pausing


def _waiting_events(session_id: uuid.UUID, requests: list[HumanRequest], project: Project) -> None:
    """A ``request.waiting`` event per request (docs/events.md), readable by the chat's human alone."""
    user = Session.objects.select_related("user").get(pk=session_id).user
    for request in requests:
        if request.kind == RequestKind.SUBCHAT:  # its sub-chat answers it, no human
            continue
        event_record(
            project=project,
            type="request.waiting",
            actor=f"planner:{session_id}",
            on_behalf_of=user,
            target=f"request:{request.pk}",
            data={
                "kind": request.kind,
                "session": str(session_id),
                "tool": request.tool,
                "question": request.question[:200],
            },
            private_to=user,
        )


@transaction.atomic
def turn_pause(
    *,
    session_id: uuid.UUID,
    turn: int,
    after_seq: int,
    asks: list[tuple[ToolUseBlock, RequestKind]],
    records: StepRecords,
    focus: list[str],
    project: Project,
) -> list[HumanRequest]:
    """Pause the session's running ``turn`` on a request per call of ``asks``; the calls of the
    round that ran are recorded (``records``) so that their results are written on resumption."""
    sessions.advance(
        session_id,
        turn,
        after_seq,
        {"focus": focus, "state": SessionState.PAUSED, "turn_owner": "", "heartbeat_at": None},
    )
    records.write(session_id, turn)
    parent = Session.objects.select_related("user", "project").get(pk=session_id)
    opened = {
        call.id: subchats.subchat_open(parent=parent, call=call)
        for call, kind in asks
        if kind == RequestKind.SUBCHAT
    }
    created = HumanRequest.objects.bulk_create(
        [
            HumanRequest(
                session_id=session_id,
                turn=turn,
                tool_use_id=call.id,
                kind=kind,
                question=call.input.get("question", "") if kind == RequestKind.QUESTION else "",
                options=call.input.get("options", []) if kind == RequestKind.QUESTION else [],
                tool=call.name if kind == RequestKind.APPROVAL else "",
                input=call.input if kind == RequestKind.APPROVAL else opened.get(call.id, {}),
                preview=(
                    request_preview(tool=call.name, input=call.input, project=project)
                    if kind == RequestKind.APPROVAL
                    else []
                ),
            )
            for call, kind in asks
        ]
    )
    _waiting_events(session_id, created, project)
    Event.objects.create(
        session_id=session_id,
        kind="turn_paused",
        turn=turn,
        data={"requests": [{"id": str(r.pk), "kind": r.kind, "tool_use_id": r.tool_use_id} for r in created]},
    )
    return created


def pending_requests(*, session_id: uuid.UUID) -> list[HumanRequest]:
    return list(
        HumanRequest.objects.filter(session_id=session_id, status=RequestStatus.PENDING).order_by(
            "created_at", "tool_use_id"
        )
    )


# ---------------------------------------------------------------------- answering


@dataclass(frozen=True)
class Resolution:
    frames: list[Frame]  # request_resolved, then the results of approved calls that ran
    begin: Begin | None = None  # the turn resumed: where it continues from
    # Every request is answered but the running-turn limits keep the turn from resuming yet.
    held: sessions.TurnsFullError | None = None

    @property
    def waiting(self) -> str | None:
        """Why the answered turn waits (None: it resumed, or a request is still pending)."""
        return None if self.held is None else self.held.message + RESUMES_LATER


def _answer_body(kind: str, text: Any, approve: Any, reason: Any) -> tuple[RequestStatus, str]:
    """The request's new status and its answer (or why it was declined), or a ValidationError."""
    if kind == RequestKind.QUESTION:
        if approve is not None:
            raise ValidationError({"approve": ["This request is a question: answer it with a text."]})
        return RequestStatus.ANSWERED, sessions.check_text(text)
    if text is not None:
        raise ValidationError({"text": ["This request is an approval: send approve true or false."]})
    if not isinstance(approve, bool):
        raise ValidationError({"approve": ["Expected true or false."]})
    if reason is None:
        reason = ""
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise ValidationError({"reason": [f"Expected a string of at most {MAX_REASON} characters."]})
    refuse_nul(reason=reason)
    return (RequestStatus.APPROVED, "") if approve else (RequestStatus.DECLINED, reason.strip())


def _locked(session_id: uuid.UUID, user: User) -> Session:
    session = (
        row_locked(Session.objects.select_related("project__organization", "user"))
        .filter(pk=session_id)
        .first()
    )
    if session is None or not (session.user_id == user.pk or session.question_id is not None):
        raise NotFoundError("Session not found.")
    require(user, session.project, PLANNER_CHAT)  # a viewer may not answer; a stranger gets 404
    return session


@transaction.atomic
def request_reply(
    *,
    session_id: uuid.UUID,
    user: User,
    request_id: Any,
    text: Any = None,
    approve: Any = None,
    reason: Any = None,
) -> Resolution:
    """Resolve one pending request of the session; the turn resumes once none is pending.

    The owner answers any request; in a question's sub-chat, every member with
    ``planner.chat`` may answer its questions (under their own name), and its approvals
    are for the project's humans (:func:`may_decide`).
    """
    session = _locked(session_id, user)
    request = _request(session, request_id)
    if request.kind != RequestKind.QUESTION and not may_decide(session, request.tool, user):
        raise PermissionDeniedError(_NOT_YOURS if session.question_id is None else _NOT_THE_ASKERS)
    if request.status != RequestStatus.PENDING:
        raise ConflictError(f"This request was already {request.status}.")
    if request.kind == RequestKind.SUBCHAT:
        raise ConflictError(WAITS_FOR_SUBCHATS)
    status, answer = _answer_body(request.kind, text, approve, reason)
    _resolve(request, status, answer, user)
    resolved = [resolved_frame(request)]
    if HumanRequest.objects.filter(session=session, status=RequestStatus.PENDING).exists():
        return Resolution(resolved)
    resumed = _resume(session)
    return replace(resumed, frames=resolved + resumed.frames)


WAITS_FOR_SUBCHATS = (
    "The planner waits for its sub-chats: each one's end answers it. Stop the chat to stop them."
)
RESUMES_LATER = " The answer is kept: the planner resumes as soon as a turn frees up."


def _resume(session: Session) -> Resolution:
    """Resume the session's turn paused on requests now that none is pending, if the running-turn
    limits allow (they count a resumed turn as a started one); else it waits, answers kept. The
    caller holds the session's row lock."""
    try:
        sessions.check_running_turns(session)
    except sessions.TurnsFullError as exc:
        if not session.resume_waiting:
            session.resume_waiting = True
            session.save(update_fields=["resume_waiting", "updated_at"])
        return Resolution([], held=exc)
    results, ran = _results(session)
    return Resolution(ran, sessions.turn_continue(session, results))


@transaction.atomic
def turn_resume(*, session_id: uuid.UUID) -> Resolution | None:
    """Resume a turn whose answers waited for a free turn; None if it no longer waits (resumed
    elsewhere, stopped, or a request is pending again)."""
    session = (
        row_locked(Session.objects.select_related("project__organization", "user"))
        .filter(pk=session_id, state=SessionState.PAUSED, resume_waiting=True)
        .first()
    )
    if session is None or HumanRequest.objects.filter(session=session, status=RequestStatus.PENDING).exists():
        return None
    return _resume(session)


@transaction.atomic
def subchat_ended(
    *, session_id: uuid.UUID, failed: str | None = None, resume: bool = True
) -> Resolution | None:
    """A sub-chat's turn ended (``failed``: it could not start, or its process died, and why):
    answer the request of its parent's paused turn with what it answered
    (``subchats.subchat_result``); the parent resumes once none is pending, if the running-turn
    limits allow; without ``resume`` (no event loop to run it: the sweep) it waits for a pass over
    the work waiting (``resume_waiting``). None if nothing waits for it (its parent was stopped)
    or it has not ended (it waits for a human)."""
    child = Session.objects.filter(pk=session_id).first()
    if child is None or child.parent_id is None:
        return None
    parent = (
        row_locked(Session.objects.select_related("project__organization", "user"))
        .filter(pk=child.parent_id, state=SessionState.PAUSED)
        .first()
    )
    request = subchats.subchat_request(child) if parent is not None else None
    body = subchats.subchat_result(child, failed=failed) if request is not None else None
    if parent is None or request is None or body is None:
        return None
    _resolve(request, RequestStatus.ANSWERED, json.dumps(body, ensure_ascii=False), None)
    resolved = [resolved_frame(request)]
    if HumanRequest.objects.filter(session=parent, status=RequestStatus.PENDING).exists():
        return Resolution(resolved)
    if not resume:
        parent.resume_waiting = True
        parent.save(update_fields=["resume_waiting", "updated_at"])
        return Resolution(resolved)
    resumed = _resume(parent)
    return replace(resumed, frames=resolved + resumed.frames)


def sessions_resume_waiting(*, limit: int = 100) -> list[tuple[uuid.UUID, int, int]]:
    """Sessions whose answered turn waits for a free turn, longest waiting first: (id, owner,
    project)."""
    waiting = Session.objects.filter(state=SessionState.PAUSED, resume_waiting=True).order_by("updated_at")
    return list(waiting.values_list("pk", "user_id", "project_id")[:limit])


_NOT_YOURS = "Only the session's owner approves or declines its tool calls."
_NOT_THE_ASKERS = (
    "In a question's sub-chat, the project's members approve or decline the planner's tool calls "
    "(propose_changeset: those with changeset.apply), not the agent that asked."
)


def may_decide(session: Session, tool: str, user: User) -> bool:
    """May ``user`` approve or decline a call of ``tool`` in ``session``? In an ordinary chat its
    owner alone; in a question's sub-chat a member of the project (not its asker, who cannot click)
    holding the tool's approver permission."""
    if session.question_id is None:
        return session.user_id == user.pk
    spec = TOOLS.get(tool)
    return (
        spec is not None
        and session.user_id != user.pk
        and has_permission(user, session.project, spec.approver)
    )


def _request(session: Session, request_id: Any) -> HumanRequest:
    try:
        pk = uuid.UUID(str(request_id))
    except ValueError:
        raise NotFoundError("Request not found.") from None
    found = HumanRequest.objects.filter(pk=pk, session=session).select_related("answered_by").first()
    if found is None:
        raise NotFoundError("Request not found.")
    return found


def _resolve(request: HumanRequest, status: RequestStatus, answer: str, user: User | None) -> None:
    request.status = status
    request.answer = answer
    request.answered_by = user
    request.resolved_at = timezone.now()
    request.save(update_fields=["status", "answer", "answered_by", "resolved_at"])


def requests_reply_all(session: Session, user: User, text: str) -> Begin | None:
    """A plain message from the owner to a turn paused on requests (docs/architecture.md): it answers every
    pending question and declines every pending approval with the message as the reason, and
    the turn continues. None when no request is pending. The caller holds the session's lock."""
    pending = list(HumanRequest.objects.filter(session=session, status=RequestStatus.PENDING))
    if not pending:
        return None
    if any(request.kind == RequestKind.SUBCHAT for request in pending):
        raise ConflictError(WAITS_FOR_SUBCHATS)
    resolved: list[Frame] = []
    for request in pending:
        status = RequestStatus.ANSWERED if request.kind == RequestKind.QUESTION else RequestStatus.DECLINED
        _resolve(request, status, text.strip(), user)
        resolved.append(resolved_frame(request))
    results, ran = _results(session)
    return replace(sessions.turn_continue(session, results), frames=(*resolved, *ran))


@transaction.atomic
def requests_cancel(*, session_id: uuid.UUID, user: User) -> list[Frame] | None:
    """Stop a turn paused on requests (its owner, or a withdrawn question's): cancel them, write
    the round's results, end the turn ``stopped``. The frames that tell the watchers, or None if
    the session is not paused on requests."""
    session = _locked(session_id, user)
    if session.user_id != user.pk:
        raise NotFoundError("Session not found.")
    return _cancel(session)


@transaction.atomic
def requests_cancel_unwaited(*, session_id: uuid.UUID) -> list[Frame] | None:
    """Stop a question's sub-chat paused on requests once no question waits on it any more (its
    own and those joined to it withdrawn or settled): as :func:`requests_cancel`, for whoever
    withdrew the last of them. None if it is not paused on requests, or a question still waits."""
    session = (
        row_locked(Session.objects.select_related("project__organization", "user"))
        .filter(pk=session_id, question__isnull=False)
        .first()
    )
    if session is None or questions_waiting_on(session):
        return None
    return _cancel(session)


def _cancel(session: Session) -> list[Frame] | None:
    pending = list(HumanRequest.objects.filter(session=session, status=RequestStatus.PENDING))
    if session.state != SessionState.PAUSED or not (pending or session.resume_waiting):
        return None
    out: list[Frame] = []
    for request in pending:
        _resolve(request, RequestStatus.CANCELLED, "", None)
        out.append(resolved_frame(request))
    results, ran = _results(session)
    sessions.turn_close(session, results, reason="stopped")
    return [*out, *ran, frames.turn_ended(reason="stopped")]


# ---------------------------------------------------------------------- the round's results


def _results(session: Session) -> tuple[ChatMessage, list[Frame]]:
    """The results message of the paused round, in the order of its calls: what ran then, the
    answers, approved calls run now (as the session's owner), declines and cancels as errors.
    Also the frames of the calls run now."""
    paused = Message.objects.filter(session=session).order_by("-seq").first()
    calls = [block_from_wire(b) for b in (paused.content if paused is not None else [])]
    uses = [c for c in calls if isinstance(c, ToolUseBlock)]
    ids = [u.id for u in uses]
    asked = {r.tool_use_id: r for r in HumanRequest.objects.filter(session=session, tool_use_id__in=ids)}
    ran = {c.tool_use_id: c for c in ToolCall.objects.filter(session=session, tool_use_id__in=ids)}
    records = StepRecords(project_id=session.project_id)
    blocks: list[ToolResultBlock] = []
    out: list[Frame] = []
    for use in uses:
        request = asked.get(use.id)
        if request is not None and request.status == RequestStatus.APPROVED:
            block, emitted = _run_approved(session, use, records)
            out += emitted
        elif request is not None:
            block = _answered_block(use, request)
            out.append(
                frames.tool_result(
                    id=use.id,
                    name=use.name,
                    input=use.input,
                    is_error=block.is_error,
                    output=json.loads(block.content),
                )
            )
        elif (call := ran.get(use.id)) is not None:
            block = ToolResultBlock(
                use.id, json.dumps(call.output, ensure_ascii=False, default=str), is_error=call.is_error
            )
        else:
            block = ToolResultBlock(use.id, sessions.INTERRUPTED_RESULT, is_error=True)
        blocks.append(block)
    records.write(session.pk, session.turn_count)
    return ChatMessage(role="user", content=tuple(blocks), kind=MessageKind.TOOL_RESULTS), out


def _answered_block(use: ToolUseBlock, request: HumanRequest) -> ToolResultBlock:
    if request.kind == RequestKind.SUBCHAT and request.status == RequestStatus.ANSWERED:
        return ToolResultBlock(use.id, request.answer, is_error="error" in json.loads(request.answer))
    by = request.answered_by.get_username() if request.answered_by is not None else ""
    match request.status:
        case RequestStatus.ANSWERED:
            body: dict[str, Any] = {"answer": request.answer, "answered_by": by}
            return ToolResultBlock(use.id, json.dumps(body, ensure_ascii=False), is_error=False)
        case RequestStatus.DECLINED:
            reason = request.answer or "no reason given"
            body = {"error": {"code": "declined", "message": f"declined by the human: {reason}"}}
            return ToolResultBlock(use.id, json.dumps(body, ensure_ascii=False), is_error=True)
        case _:
            return ToolResultBlock(use.id, STOPPED_RESULT, is_error=True)


def _run_approved(
    session: Session, use: ToolUseBlock, records: StepRecords
) -> tuple[ToolResultBlock, list[Frame]]:
    """Run an approved call now, as the session's owner, with their access as it is now (in a
    question's sub-chat, with what its asker and those who decided its requests share)."""
    context = ToolContext(
        user=session.user,
        project=session.project,
        session_id=session.pk,
        focus=set(session.focus),
        question_id=session.question_id,
        shared=session_reader(session=session),
    )
    record: ToolRecord = sessions.tool_run(context=context, call=use)
    records.tools.append(record)
    outcome = record.outcome
    emitted: list[Frame] = [
        frames.tool_result(
            id=use.id, name=use.name, input=use.input, is_error=outcome.is_error, output=outcome.output
        )
    ]
    emitted += [
        frames.draft(kind=d.kind, snapshot=d.snapshot, artifact_id=d.artifact_id) for d in context.drafts
    ]
    if context.focus != set(session.focus):
        session.focus = sorted(context.focus)
    return ToolResultBlock(use.id, outcome.content, is_error=outcome.is_error), emitted
