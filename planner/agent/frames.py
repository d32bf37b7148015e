"""The frames a session's watchers receive (docs/protocol.md): one ``TypedDict`` each, and builders.

Every builder returns a JSON-ready dict with a ``type``; ``planner/live/broadcast.py``
sends them between processes, the consumer puts them on the socket with
:func:`wire`, the chat page renders them. A turn's frames also carry an
envelope the runner adds (:func:`numbered`): ``n``, increasing per sending
process, by which watchers drop a frame they already have, and ``origin``,
that process. ``Frame`` is the closed set: a frame type added to it must be
handled by :func:`wire`, or mypy fails.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict, assert_never

from planner.agent.tool_words import tool_label, tool_stage

TurnEndReason = Literal["completed", "max_rounds", "stopped", "failed"]


class _Envelope(TypedDict):
    n: NotRequired[int]
    origin: NotRequired[str]


class StateFrame(_Envelope):
    type: Literal["state"]
    state: str
    last_seq: int
    turn: int


class UserMessageFrame(_Envelope):
    type: Literal["user_message"]
    seq: int
    text: str
    author: str
    kind: str  # human, steer, continue, or question (an agent's question opening its sub-chat)
    at: str  # when it was sent: ISO 8601 in UTC, as the transcript's ``created_at`` (the page shows it)


class TurnStartedFrame(_Envelope):
    type: Literal["turn_started"]
    turn: int
    continued: bool


class TextDeltaFrame(_Envelope):
    type: Literal["text_delta"]
    text: str


class TextResetFrame(_Envelope):
    type: Literal["text_reset"]


class ToolCallFrame(_Envelope):
    type: Literal["tool_call"]
    id: str
    name: str
    input: dict[str, Any]
    label: str  # the call in words, running ("Reading DEMO-4…"): ``planner/agent/tool_words.py``


class ToolResultFrame(_Envelope):
    type: Literal["tool_result"]
    id: str
    name: str
    is_error: bool
    output: Any
    label: str  # the call in words, done or failed ("Read DEMO-4", "Could not read DEMO-4")


class DraftFrame(_Envelope):
    type: Literal["draft"]
    kind: str
    snapshot: dict[str, Any]
    artifact_id: str


class CompactedFrame(_Envelope):
    """The conversation up to ``up_to`` was summarized; ``drafts``: how many knowledge drafts the
    summary's durable parts left for the session's owner (docs/domain.md#drafts)."""

    type: Literal["compacted"]
    up_to: int
    estimated_tokens: int
    drafts: int


class KnowledgeDraftFrame(_Envelope):
    """The owner published or discarded a knowledge draft (docs/domain.md#drafts): every tab's
    compaction notice follows; ``entry`` is the published entry's id and ``url`` its page (None)."""

    type: Literal["knowledge_draft"]
    id: int
    status: str
    entry: int | None
    url: str | None


class TurnEndedFrame(_Envelope):
    type: Literal["turn_ended"]
    reason: TurnEndReason
    error: NotRequired[str]


class FieldPreview(TypedDict):
    """One field of an approval's input: its name and its value as text."""

    kind: Literal["field"]
    label: str
    value: str


class OperationField(TypedDict):
    name: str
    label: str  # the field in words ("Acceptance criteria"), as the card shows it
    current: str
    proposed: str
    changed: bool


class OperationPreview(TypedDict):
    """One changeset operation as the admin's review shows it."""

    kind: Literal["operation"]
    index: int
    op: str
    label: str
    subject: str
    fields: list[OperationField]
    blocker: str
    blocked: str
    warning: str
    errors: list[str]
    raw: str


class KnowledgePreview(TypedDict):
    """A knowledge write waiting for approval (docs/domain.md#knowledge-cards): the entry it would
    be and its diff against the entry as it stands (``previous``; None: a new entry, or ``hidden``:
    linked beyond this project); ``stale``: the model read an older version."""

    kind: Literal["knowledge"]
    id: int | None
    op: Literal["create", "update"]
    entry_kind: str
    title: str
    previous: dict[str, Any] | None
    diff: list[dict[str, str]]
    stale: bool
    hidden: bool


# The rows of an approval's ``preview``; ``planner/domain/services/previews.py`` builds them.
PreviewRow = FieldPreview | OperationPreview | KnowledgePreview


class RequestFrame(_Envelope):
    """A question or an approval the turn waits for (docs/domain.md): ``question`` and ``options`` for a
    question, ``tool`` and ``input`` for an approval."""

    type: Literal["request"]
    id: str
    kind: Literal["question", "approval", "subchat"]
    tool_use_id: str  # the call that waits: the page shows its fold waiting
    question: NotRequired[str]
    options: NotRequired[list[str]]
    tool: NotRequired[str]
    input: NotRequired[dict[str, Any]]
    preview: NotRequired[list[PreviewRow]]  # the input, readable (``planner/domain/services/previews.py``)
    session: NotRequired[str]  # a sub-chat's (start_subchat): the chat it runs in
    title: NotRequired[str]
    brief: NotRequired[str]


class RequestResolvedFrame(_Envelope):
    """A request was answered, approved, declined or cancelled, ``by`` whom (empty: nobody)."""

    type: Literal["request_resolved"]
    id: str
    outcome: str
    by: str
    answer: NotRequired[str]  # the answer, or why it was declined


class ChangesetFrame(_Envelope):
    """A changeset the session proposed was applied, rejected or conflicts, wherever that happened:
    ``decided_by`` (a username), the reviewer's ``note`` or, when it conflicts, the ``reason``."""

    type: Literal["changeset"]
    number: int
    status: str
    decided_by: str
    decided_at: str | None
    note: str
    reason: str


class SteerRetractedFrame(_Envelope):
    """The owner took back a steering message before the planner read it: every page drops its
    queued bubble, and the page that asked puts ``text`` back in the composer."""

    type: Literal["steer_retracted"]
    text: str


class SupersededFrame(_Envelope):
    """Messages of the transcript the model is no longer sent (kept for the audit trail): the
    human message its owner ``edited`` and sent again, or the unfinished answer a retry
    replaces (``retried``); the frames of the new turn follow."""

    type: Literal["superseded"]
    seqs: list[int]
    reason: Literal["edited", "retried"]


class TitleFrame(_Envelope):
    """The planner named the chat (after its first turn, unless a human named it)."""

    type: Literal["title"]
    title: str


class ErrorFrame(_Envelope):
    """A bad frame or a refused action; the connection stays open."""

    type: Literal["error"]
    code: str
    message: str


Frame: TypeAlias = (
    StateFrame
    | UserMessageFrame
    | TurnStartedFrame
    | TextDeltaFrame
    | TextResetFrame
    | ToolCallFrame
    | ToolResultFrame
    | DraftFrame
    | CompactedFrame
    | TurnEndedFrame
    | RequestFrame
    | RequestResolvedFrame
    | ChangesetFrame
    | KnowledgeDraftFrame
    | SteerRetractedFrame
    | SupersededFrame
    | TitleFrame
    | ErrorFrame
)


def state(*, session_state: str, last_seq: int, turn: int) -> StateFrame:
    return {"type": "state", "state": session_state, "last_seq": last_seq, "turn": turn}


def user_message(
    *, seq: int, text: str, author: str, kind: str, at: datetime | None = None
) -> UserMessageFrame:
    """A human's message, stored ``at`` (now, the moment it is stored, unless given)."""
    when = (at or datetime.now(UTC)).astimezone(UTC)
    return {
        "type": "user_message",
        "seq": seq,
        "text": text,
        "author": author,
        "kind": kind,
        "at": when.isoformat(timespec="microseconds").replace("+00:00", "Z"),
    }


def turn_started(*, turn: int, continued: bool) -> TurnStartedFrame:
    return {"type": "turn_started", "turn": turn, "continued": continued}


def text_delta(text: str) -> TextDeltaFrame:
    return {"type": "text_delta", "text": text}


def text_reset() -> TextResetFrame:
    """The model call streaming text broke off and is retried: drop the partial text."""
    return {"type": "text_reset"}


def tool_call(*, id: str, name: str, input: dict[str, Any]) -> ToolCallFrame:
    label = tool_label(name, input, stage="running")
    return {"type": "tool_call", "id": id, "name": name, "input": input, "label": label}


def tool_result(*, id: str, name: str, input: dict[str, Any], is_error: bool, output: Any) -> ToolResultFrame:
    """The call's result; its ``input`` only words the ``label`` (the frame does not repeat it)."""
    label = tool_label(name, input, stage=tool_stage(is_error=is_error), output=output)
    return {
        "type": "tool_result",
        "id": id,
        "name": name,
        "is_error": is_error,
        "output": output,
        "label": label,
    }


def draft(*, kind: str, snapshot: dict[str, Any], artifact_id: str) -> DraftFrame:
    return {"type": "draft", "kind": kind, "snapshot": snapshot, "artifact_id": artifact_id}


def compacted(*, up_to: int, estimated_tokens: int, drafts: int = 0) -> CompactedFrame:
    return {"type": "compacted", "up_to": up_to, "estimated_tokens": estimated_tokens, "drafts": drafts}


def knowledge_draft(*, id: int, status: str, entry: int | None, url: str | None) -> KnowledgeDraftFrame:
    return {"type": "knowledge_draft", "id": id, "status": status, "entry": entry, "url": url}


def turn_ended(*, reason: TurnEndReason, error: str | None = None) -> TurnEndedFrame:
    frame: TurnEndedFrame = {"type": "turn_ended", "reason": reason}
    if error:
        frame["error"] = error
    return frame


def request_question(*, id: str, tool_use_id: str, question: str, options: list[str]) -> RequestFrame:
    return {
        "type": "request",
        "id": id,
        "kind": "question",
        "tool_use_id": tool_use_id,
        "question": question,
        "options": options,
    }


def request_approval(
    *, id: str, tool_use_id: str, tool: str, input: dict[str, Any], preview: list[PreviewRow]
) -> RequestFrame:
    return {
        "type": "request",
        "id": id,
        "kind": "approval",
        "tool_use_id": tool_use_id,
        "tool": tool,
        "input": input,
        "preview": preview,
    }


def request_subchat(*, id: str, tool_use_id: str, session: str, title: str, brief: str) -> RequestFrame:
    """A sub-chat the turn waits for (start_subchat): its end answers the request."""
    return {
        "type": "request",
        "id": id,
        "kind": "subchat",
        "tool_use_id": tool_use_id,
        "session": session,
        "title": title,
        "brief": brief,
    }


def request_resolved(*, id: str, outcome: str, by: str, answer: str = "") -> RequestResolvedFrame:
    frame: RequestResolvedFrame = {"type": "request_resolved", "id": id, "outcome": outcome, "by": by}
    if answer:
        frame["answer"] = answer
    return frame


def changeset(
    *, number: int, status: str, decided_by: str, decided_at: str | None, note: str, reason: str
) -> ChangesetFrame:
    return {
        "type": "changeset",
        "number": number,
        "status": status,
        "decided_by": decided_by,
        "decided_at": decided_at,
        "note": note,
        "reason": reason,
    }


def steer_retracted(*, text: str) -> SteerRetractedFrame:
    return {"type": "steer_retracted", "text": text}


def superseded(*, seqs: list[int], reason: Literal["edited", "retried"]) -> SupersededFrame:
    return {"type": "superseded", "seqs": seqs, "reason": reason}


def title(*, title: str) -> TitleFrame:
    return {"type": "title", "title": title}


def error(*, code: str, message: str) -> ErrorFrame:
    return {"type": "error", "code": code, "message": message}


def numbered(frame: Frame, *, n: int, origin: str) -> Frame:
    """A copy of ``frame`` in its envelope: number ``n`` from the process ``origin``."""
    out = frame.copy()
    out["n"] = n
    out["origin"] = origin
    return out


def coalesced(batch: list[Frame]) -> list[Frame]:
    """``batch`` with each run of consecutive ``text_delta`` frames joined into one (the run's
    text, the last frame's other keys): a watcher that fell behind catches up in fewer frames.
    The frames in ``batch`` are left as they are."""
    out: list[Frame] = []
    for frame in batch:
        add_coalesced(out, frame)
    return out


def add_coalesced(out: list[Frame], frame: Frame) -> None:
    """``frame`` added to the end of ``out``: joined into its last frame, as a copy of ``frame``
    with the two texts, when both are text deltas, else appended. ``frame`` is left as it is."""
    last = out[-1] if out else None
    if frame["type"] == "text_delta" and last is not None and last["type"] == "text_delta":
        joined = frame.copy()
        joined["text"] = last["text"] + frame["text"]
        out[-1] = joined
    else:
        out.append(frame)


def wire(frame: Frame) -> str:
    """``frame`` as the JSON text a watcher's socket sends.

    A turn's frames keep their number (the page drops one it already has, after a
    reconnect or a replay) but not their ``origin``, which is no business of the
    browser's; a socket's own frames (``state`` on connect, ``error``) never carry an
    envelope. A new frame type must say which it is here.
    """
    match frame["type"]:
        case "state" | "error":
            body: dict[str, Any] = {k: v for k, v in frame.items() if k not in ("n", "origin")}
        case (
            "user_message"
            | "turn_started"
            | "text_delta"
            | "text_reset"
            | "tool_call"
            | "tool_result"
            | "draft"
            | "compacted"
            | "turn_ended"
            | "request"
            | "request_resolved"
            | "changeset"
            | "knowledge_draft"
            | "steer_retracted"
            | "superseded"
            | "title"
        ):
            body = {k: v for k, v in frame.items() if k != "origin"}
        case unknown:
            assert_never(unknown)
    return json.dumps(body)
