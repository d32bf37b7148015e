"""Change notes: activity since the session last looked, as a ``<workspace-changes>`` block.

The session's own actions are left out; changes to what it follows (its
focus: items and knowledge it read or wrote, changesets it proposed) come first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tracker.models import ActivityEvent

MAX_LINES = 40


def _describe(event: ActivityEvent) -> str:
    data: dict[str, Any] = event.data or {}
    who = event.actor
    verb = event.verb
    if verb == "item.updated":
        changes = ", ".join(
            f"{field}: {before!r} → {after!r}" for field, (before, after) in data.get("changes", {}).items()
        )
        return f"{event.target} updated by {who} ({changes}; now version {data.get('version')})"
    if verb == "item.created":
        return (
            f"{event.target} created by {who}: {data.get('kind')} “{data.get('title')}” ({data.get('state')})"
        )
    if verb.startswith("dependency."):
        action = "added" if verb.endswith("added") else "removed"
        return f"dependency {data.get('blocker')} → {data.get('blocked')} {action} by {who}"
    if verb.startswith("changeset."):
        return _changeset(event, data)
    if verb.startswith("knowledge."):
        action = "created" if verb.endswith("created") else f"updated to version {data.get('version')}"
        return f"{event.target} “{data.get('title')}” {action} by {who}"
    return f"{verb} {event.target} by {who}"


def _changeset(event: ActivityEvent, data: dict[str, Any]) -> str:
    status = event.verb.split(".", 1)[1]
    line = f"changeset #{data.get('number')} “{data.get('title')}” {status} by {event.actor}"
    if data.get("note"):
        line += f"; note: {data['note']}"
    if data.get("reason"):
        line += f"; reason: {data['reason']}"
    if data.get("created"):
        line += f"; created {', '.join(f'${ref} = {key}' for ref, key in data['created'].items())}"
    return line


def _in_focus(event: ActivityEvent, focus: set[str], session_label: str) -> bool:
    data = event.data or {}
    return (
        event.target in focus
        or data.get("blocker") in focus
        or data.get("blocked") in focus
        or data.get("planner_session") == session_label.removeprefix("planner:")
    )


def change_notes(
    events: Sequence[ActivityEvent], *, session_label: str, project_id: int, focus: Iterable[str]
) -> str | None:
    """The ``<workspace-changes>`` text for ``events``, or None if none concern the session."""
    focus_set = set(focus)
    relevant = [e for e in events if e.actor != session_label and (e.project_id in (None, project_id))]
    if not relevant:
        return None
    ordered = sorted(relevant, key=lambda e: (not _in_focus(e, focus_set, session_label), e.seq))
    lines = [f"- {_describe(e)}" for e in ordered[:MAX_LINES]]
    if len(ordered) > MAX_LINES:
        lines.append(f"- … and {len(ordered) - MAX_LINES} more changes")
    return (
        "<workspace-changes>\nSince you last looked, others changed the workspace "
        "(what you follow comes first):\n" + "\n".join(lines) + "\n</workspace-changes>"
    )
