"""Activity events in words for the pages: "demo claimed DEMO-11", "demo applied changeset #3".

The change notes the planner reads (``planner/domain/services/notes.py``) quote every
value as JSON for the model; a page shows the same events as a sentence whose
parts the template escapes, with the item, changeset or entry it names as a
link. The words here are plain text, never markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tracker.inputs import one_line
from tracker.models import ActivityEvent
from tracker.page_links import changeset_url, item_url

MAX_QUOTE = 120  # a title, reason or summary quoted in a line is cut to this many characters


@dataclass(frozen=True)
class ActivityLine:
    """One event as a sentence: ``who`` ``words`` ``target`` (a link to ``url`` if any) ``tail``,
    and a second item ``then`` (linked to ``then_url``) where the event names two."""

    event: ActivityEvent
    who: str
    words: str
    target: str = ""
    url: str = ""
    tail: str = ""
    then: str = ""
    then_url: str = ""


def actor_name(event: ActivityEvent) -> str:
    """Who acted, in words: a user's name, "the planner for NAME", or "Ballet" (a lease ran out)."""
    kind, _, name = event.actor.partition(":")
    if kind == "user":
        return name
    if kind == "planner":
        return f"the planner for {event.on_behalf_of.get_username()}"
    return "Ballet"


def _item_url(project_key: str, key: str) -> str:
    return item_url(project_key, key) if key.startswith(f"{project_key}-") else ""


def _quoted(text: Any) -> str:
    return f"“{one_line(str(text), MAX_QUOTE)}”" if text else ""


def _item(event: ActivityEvent, data: dict[str, Any], key: str) -> ActivityLine:
    action = event.verb.split(".", 1)[1]
    if action == "created":
        tail = f" ({data.get('kind', 'item')}) {_quoted(data.get('title'))}"
        return _line(event, key, "created", event.target, tail)
    fields = ", ".join(sorted(data.get("changes", {})))
    state = data.get("changes", {}).get("state")
    tail = f": {fields}" if fields else ""
    if isinstance(state, list) and len(state) == 2:  # [before, after]
        tail += f" (now {str(state[1]).replace('_', ' ')})"
    return _line(event, key, "updated", event.target, tail)


def _dependency(event: ActivityEvent, data: dict[str, Any], key: str) -> ActivityLine:
    blocker, blocked = str(data.get("blocker", "")), str(data.get("blocked", ""))
    who = actor_name(event)
    if event.verb.endswith("added"):
        first, words, tail, then = blocker, "made", " block", blocked
    else:
        first, words, tail, then = blocked, "removed the dependency of", " on", blocker
    return ActivityLine(event, who, words, first, _item_url(key, first), tail, then, _item_url(key, then))


def _changeset(event: ActivityEvent, data: dict[str, Any], key: str) -> ActivityLine:
    status = event.verb.split(".", 1)[1]
    number = data.get("number")
    url = changeset_url(key, number) if isinstance(number, int) and number > 0 else ""
    words = {"proposed": "proposed", "applied": "applied", "rejected": "rejected"}.get(status)
    tail = f" {_quoted(data.get('title'))}"
    if words is None:  # conflicted: nobody acted, the plan had moved
        return ActivityLine(event, "", "", f"Changeset #{number}", url, f"{tail} conflicted with the plan")
    return ActivityLine(event, actor_name(event), words, f"changeset #{number}", url, tail)


def _claim(event: ActivityEvent, data: dict[str, Any], key: str) -> ActivityLine:
    action = event.verb.split(".", 1)[1]
    ticket = event.target
    if action == "taken":
        return _line(event, key, "claimed", ticket)
    if action == "released":
        return _line(event, key, f"released the claim of {data.get('holder', 'someone')} on", ticket)
    return ActivityLine(event, "", "The claim on", ticket, _item_url(key, ticket), " expired")


def _report(event: ActivityEvent, data: dict[str, Any], key: str) -> ActivityLine:
    kind = str(data.get("kind", ""))
    return _line(event, key, f"reported {kind} on", event.target, f": {_quoted(data.get('summary'))}")


def _comment(event: ActivityEvent, data: dict[str, Any], key: str) -> ActivityLine:
    """A comment, its first words quoted; the link leads to the comment itself."""
    line = _line(event, key, "commented on", event.target, f": {_quoted(data.get('excerpt'))}")
    comment = data.get("comment")
    if line.url and isinstance(comment, int) and comment > 0:
        return replace(line, url=f"{line.url}#comment-{comment}")
    return line


def _question(event: ActivityEvent, data: dict[str, Any], key: str) -> ActivityLine:
    action = event.verb.split(".", 1)[1]
    about = str(data.get("item") or "")
    words = {
        "asked": "asked a question",
        "answered": "answered a question",
        "withdrawn": "withdrew a question",
        "joined": "asked a question already in flight",  # joined to it: settled with it
    }
    if action == "needs_human":
        return ActivityLine(event, "", "A question", about, _item_url(key, about), " needs a human")
    return _line(event, key, words.get(action, f"{action} a question") + (" about" if about else ""), about)


def _knowledge(event: ActivityEvent, data: dict[str, Any], key: str) -> ActivityLine:
    entry = event.target.removeprefix("knowledge:")
    url = f"/knowledge/{entry}/" if entry.isdecimal() else ""
    action = "created" if event.verb.endswith("created") else "updated"
    title = _quoted(data.get("title")) or f"entry {entry}"
    return ActivityLine(event, actor_name(event), f"{action} knowledge", title, url)


def _line(event: ActivityEvent, key: str, words: str, target: str, tail: str = "") -> ActivityLine:
    return ActivityLine(event, actor_name(event), words, target, _item_url(key, target), tail)


_BY_PREFIX: dict[str, Callable[[ActivityEvent, dict[str, Any], str], ActivityLine]] = {
    "item": _item,
    "dependency": _dependency,
    "changeset": _changeset,
    "claim": _claim,
    "report": _report,
    "comment": _comment,
    "question": _question,
    "knowledge": _knowledge,
}


def activity_line(event: ActivityEvent, *, project_key: str) -> ActivityLine:
    """``event`` (of the project ``project_key``) in words, its item or changeset as a link."""
    data = event.data if isinstance(event.data, dict) else {}
    describe = _BY_PREFIX.get(event.verb.split(".", 1)[0])
    if describe is not None:
        return describe(event, data, project_key)
    words = event.verb.replace(".", " ").replace("_", " ")
    return ActivityLine(event, actor_name(event), words, event.target)
