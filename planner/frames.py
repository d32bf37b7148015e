"""The frames of SPEC § 8 that a session's watchers receive, as typed builders.

Every builder returns a plain JSON-ready dict with a ``type``; ``events.py``
sends them, the consumer forwards them, the chat page renders them.
"""

from __future__ import annotations

from typing import Any

Frame = dict[str, Any]


def state(*, session_state: str, last_seq: int, turn: int) -> Frame:
    return {"type": "state", "state": session_state, "last_seq": last_seq, "turn": turn}


def user_message(*, seq: int, text: str, author: str, kind: str) -> Frame:
    return {"type": "user_message", "seq": seq, "text": text, "author": author, "kind": kind}


def turn_started(*, turn: int, continued: bool) -> Frame:
    return {"type": "turn_started", "turn": turn, "continued": continued}


def text_delta(text: str) -> Frame:
    return {"type": "text_delta", "text": text}


def coalesced(batch: list[Frame]) -> list[Frame]:
    """``batch`` with each run of consecutive ``text_delta`` frames joined into one (the run's
    text, the last frame's other keys): a watcher that fell behind catches up in fewer frames.
    The frames in ``batch`` are left as they are."""
    out: list[Frame] = []
    for frame in batch:
        last = out[-1] if out else None
        if frame["type"] == "text_delta" and last is not None and last["type"] == "text_delta":
            out[-1] = {**frame, "text": last["text"] + frame["text"]}
        else:
            out.append(frame)
    return out


def text_reset() -> Frame:
    """The model call streaming text broke off and is retried: drop the partial text."""
    return {"type": "text_reset"}


def tool_call(*, id: str, name: str, input: dict[str, Any]) -> Frame:
    return {"type": "tool_call", "id": id, "name": name, "input": input}


def tool_result(*, id: str, name: str, is_error: bool, output: Any) -> Frame:
    return {"type": "tool_result", "id": id, "name": name, "is_error": is_error, "output": output}


def draft(*, kind: str, snapshot: dict[str, Any], artifact_id: str) -> Frame:
    return {"type": "draft", "kind": kind, "snapshot": snapshot, "artifact_id": artifact_id}


def compacted(*, up_to: int, estimated_tokens: int) -> Frame:
    return {"type": "compacted", "up_to": up_to, "estimated_tokens": estimated_tokens}


def turn_ended(*, reason: str, error: str | None = None) -> Frame:
    frame: Frame = {"type": "turn_ended", "reason": reason}
    if error:
        frame["error"] = error
    return frame


def error(*, code: str, message: str) -> Frame:
    return {"type": "error", "code": code, "message": message}
