"""A session as its pages, its API and the admin read it: the transcript (messages with their
tool calls in words, events, requests, changesets, steering not yet read) and, for a question's
sub-chat, the question it answers (docs/protocol.md#the-transcript)."""

from __future__ import annotations

from typing import Any

from planner.agent.tool_words import tool_label, tool_stage
from planner.domain.knowledge_cards import knowledge_cards_of
from planner.domain.services.changesets import changesets_of
from planner.domain.services.notes import NOTED_EVENT
from planner.models import Message, MessageKind, Question, QuestionStatus, Session, ToolCall


def transcript(*, session: Session) -> dict[str, Any]:
    """The complete transcript, tool calls, events and state of a session."""
    rows = list(session.messages.select_related("author").order_by("seq"))
    records = list(session.tool_calls.select_related("on_behalf_of").order_by("pk"))
    labels = _tool_labels(rows, records)
    events = list(session.events.order_by("pk"))
    summaries = {e.data.get("seq"): e.data.get("summary") for e in events if e.kind == NOTED_EVENT}
    messages = [
        {
            "seq": m.seq,
            "role": m.role,
            "kind": m.kind,
            "turn": m.turn,
            "author": m.author.username if m.author else None,
            "content": m.content,
            "superseded": m.superseded,
            "created_at": m.created_at,
            **({"labels": labels[m.seq]} if m.seq in labels else {}),
            **({"summary": summaries[m.seq]} if m.kind == MessageKind.CHANGES and m.seq in summaries else {}),
            **_as_asked(session, m),
        }
        for m in rows
    ]
    calls = [
        {
            "tool_use_id": c.tool_use_id,
            "turn": c.turn,
            "name": c.name,
            "input": c.input,
            "output": c.output,
            "is_error": c.is_error,
            "label": tool_label(c.name, c.input, stage=tool_stage(is_error=c.is_error), output=c.output),
            "duration_ms": round(c.duration_ms, 3),
            "actor": c.actor,
            "on_behalf_of": c.on_behalf_of.username,
            "created_at": c.created_at,
        }
        for c in records
    ]
    return {
        "messages": messages,
        "tool_calls": calls,
        "events": [
            {"kind": e.kind, "turn": e.turn, "data": e.data, "created_at": e.created_at} for e in events
        ],
        "requests": requests_of(session),
        "changesets": changesets_of(project_id=session.project_id, session_id=session.pk),
        # The cards of its knowledge writes, by tool_use_id (docs/domain.md#knowledge-cards).
        "knowledge": knowledge_cards_of(session=session),
        # Steering its owner sent that the planner has not read yet (it reads it at its next step).
        "queued": [str(item["text"]) for item in session.steering],
    }


def _as_asked(session: Session, message: Message) -> dict[str, Any]:
    """A question's sub-chat opens with the agent's question (docs/protocol.md#the-transcript): its
    first message reads as the question as asked, kind ``question``; how the model is told to
    answer it, sent with it, is Ballet's instruction like the system prompt, not the asker's words."""
    question = session.question if session.question_id is not None else None
    if question is None or message.seq != 1 or message.kind != MessageKind.HUMAN:
        return {}
    return {"kind": "question", "content": [{"type": "text", "text": question.text}]}


def _tool_labels(rows: list[Message], records: list[ToolCall]) -> dict[int, dict[str, str]]:
    """Per assistant message with tool calls (by seq), each call in words as it stands: done or
    failed by its record or its stored result, else still running (or waiting for a human)."""
    recorded = {c.tool_use_id: c for c in records}
    results = {
        block.get("tool_use_id"): bool(block.get("is_error"))
        for m in rows
        if m.kind == MessageKind.TOOL_RESULTS
        for block in _blocks(m, "tool_result")
    }
    labels: dict[int, dict[str, str]] = {}
    for m in rows:
        for use in _blocks(m, "tool_use") if m.role == "assistant" else []:
            use_id, name, args = str(use.get("id")), str(use.get("name", "")), use.get("input")
            record = recorded.get(use_id)
            if record is not None:
                stage = tool_stage(is_error=record.is_error)
                words = tool_label(name, args, stage=stage, output=record.output)
            elif use_id in results:
                words = tool_label(name, args, stage=tool_stage(is_error=results[use_id]))
            else:
                words = tool_label(name, args, stage="running")
            labels.setdefault(m.seq, {})[use_id] = words
    return labels


def _blocks(message: Message, kind: str) -> list[dict[str, Any]]:
    content = message.content if isinstance(message.content, list) else []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def requests_of(session: Session) -> list[dict[str, Any]]:
    """The session's questions and approvals, oldest first, with their answers."""
    return [
        {
            "id": str(r.pk),
            "kind": r.kind,
            "tool_use_id": r.tool_use_id,
            "turn": r.turn,
            "question": r.question,
            "options": r.options,
            "tool": r.tool,
            "input": r.input,
            "preview": r.preview,
            "status": r.status,
            "answer": r.answer,
            "by": r.answered_by.username if r.answered_by else None,
            "created_at": r.created_at,
            "resolved_at": r.resolved_at,
        }
        for r in session.requests.select_related("answered_by").order_by("created_at", "tool_use_id")
    ]


def session_about(*, session: Session) -> dict[str, Any] | None:
    """The question a question's sub-chat was opened for."""
    question = (
        Question.objects.select_related("asker", "item").filter(pk=session.question_id).first()
        if session.question_id is not None
        else None
    )
    if question is None:
        return None
    return {
        "id": question.pk,
        "text": question.text,
        "item": question.item.key if question.item else None,
        "status": question.status,
        "asker": question.asker.username,
        "answer": question.answer,
        "answered_by": question.answered_by,
        "answered_via": question.answered_via,
        "reason": question.reason,
        "joined": questions_joined(question_id=question.pk),
    }


def questions_joined(*, question_id: int) -> int:
    """How many questions, asked while this one was unsettled and meaning the same, joined it and
    are settled with it (not those withdrawn since)."""
    return Question.objects.filter(joined_to_id=question_id).exclude(status=QuestionStatus.WITHDRAWN).count()
