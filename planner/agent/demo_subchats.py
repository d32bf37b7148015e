"""The demo planner's replan over sub-chats (SPEC § 13.6, docs/architecture.md#the-demo-planner).

"Replan the payments epic" (an epic's title word or its key) runs in rounds of real tool calls,
each read back from the request alone, as :mod:`planner.agent.demo` reads everything: find the
epic among the plan's epics (``list_items``) unless its key was given; read it and list its
tickets (``get_item``, ``list_items``); start two sub-chats (``start_subchat``), one reviewing the
tickets and their blockers, one checking the knowledge base, each with a brief that names the
epic and its tickets. The turn pauses until both have answered; their answers, collected under
each sub-chat's title, are the demo's answer.

In a sub-chat (its system prompt holds :data:`SUBCHAT_MARK`) the demo does the brief's small job
(reads the tickets, or searches the knowledge base) and answers in a few lines; it never starts
a sub-chat there.
"""

from __future__ import annotations

import re
from typing import Any

from planner.agent import demo_replies as replies
from planner.agent.demo_replies import Output, Scripted
from planner.agent.messages import ToolUseBlock

# The heading of the sub-chat part of the system prompt (planner/domain/prompt.py SUBCHAT_PROMPT).
SUBCHAT_MARK = "## This chat is a sub-chat"
ITEM_KEY = re.compile(r"\b([A-Za-z][A-Za-z0-9]*-[0-9]+)\b")
REPLAN = re.compile(r"\bre-?plan(?:ning)?\b", re.IGNORECASE)
MAX_REVIEWED = 12  # tickets a sub-chat reads, one get_item each
MAX_QUERY = 500  # search_project's and search_knowledge's limit
SEARCH_LIMIT = 5  # hits of a search, items a brief of another kind has read
# Words of a request that name no epic ("replan the payments epic, please").
_FILLER = frozenset(
    (
        *("the", "a", "an", "and", "or", "of", "for", "to", "in", "on", "at", "with", "epic", "epics"),
        *("please", "now", "again", "it", "its", "this", "that", "our", "my", "whole", "all", "plan"),
        *("can", "could", "would", "you", "me", "us", "replan", "replanning", "need", "needs"),
    )
)
_BRIEF_TICKET = re.compile(r"^- ([A-Za-z][A-Za-z0-9]*-[0-9]+) ", re.MULTILINE)
_BRIEF_EPIC = re.compile(rf"^{re.escape(replies.EPIC_LINE)}(.+)$", re.MULTILINE)


def replan_start(asked: str) -> Scripted:
    """The human asked for a replan (``asked``): read the epic it keys, else list the epics to find
    the one it names."""
    if (key := ITEM_KEY.search(asked)) is not None:
        epic_key = key.group(1).upper()
        return Scripted(replies.replan_reading(epic_key), _epic_reads(epic_key))
    return Scripted(replies.REPLAN_FINDING, (("list_items", {"kind": "epic"}),))


def _epic_reads(key: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    return (("get_item", {"key": key}), ("list_items", {"epic": key, "kind": "ticket"}))


def replan_step(asked: str, uses: list[ToolUseBlock | None], outputs: list[Output]) -> Scripted | None:
    """The next step of a replan on the results of its last round (``uses``, in the order of
    ``outputs``); None if that round was none of a replan's. ``asked``: the human's last words."""
    names = [use.name if use is not None else "" for use in uses]
    if names and all(name == "start_subchat" for name in names):
        return Scripted(replies.subchats_answered(outputs))
    if names == ["list_items"] and uses[0] is not None and uses[0].input.get("kind") == "epic":
        return _choose_epic(outputs[0], asked if REPLAN.search(asked) else "")
    listed = [use for use in uses if use is not None and use.name == "list_items" and "epic" in use.input]
    if sorted(names) == ["get_item", "list_items"] and listed:
        return _split(dict(zip(names, outputs, strict=True)))
    return None


def _choose_epic(listing: Output, asked: str) -> Scripted:
    """The epic whose title shares the most words with ``asked``, or which epics there are."""
    _, output, failed = listing
    if failed or not isinstance(output, dict):
        return Scripted(replies.report([listing]))
    epics = [e for e in output.get("items") or [] if isinstance(e, dict)]
    wanted = _words(asked)
    scored = [(len(wanted & _words(str(e.get("title", "")))), e) for e in epics]
    best = max((score for score, _ in scored), default=0)
    if best == 0:
        return Scripted(replies.which_epic(epics, asked))
    matches = [e for score, e in scored if score == best]
    if len(matches) > 1:
        return Scripted(replies.which_epic(matches, asked, several=True))
    return Scripted(replies.replan_found(matches[0]), _epic_reads(str(matches[0]["key"])))


def _words(text: str) -> set[str]:
    """The words of ``text`` that can name an epic, lower case, a plural's ``s`` cut."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words if len(w) > 2 and w not in _FILLER}


def _split(by_name: dict[str, Output]) -> Scripted:
    """Two sub-chats on the epic ``get_item`` read, each briefed with the tickets ``list_items`` found."""
    read, listed = by_name["get_item"], by_name["list_items"]
    epic = read[1]
    if not read[2] and isinstance(epic, dict) and epic.get("kind") != "epic":
        return Scripted(replies.not_an_epic(epic))  # its ticket listing failed, saying the same
    for result in (read, listed):
        if result[2] or not isinstance(result[1], dict):
            return Scripted(replies.report([result]))
    tickets = [t for t in listed[1].get("items") or [] if isinstance(t, dict)]
    if not tickets:
        return Scripted(replies.empty_epic(epic))
    calls = (
        ("start_subchat", replies.review_subchat(epic, tickets)),
        ("start_subchat", replies.knowledge_subchat(epic, tickets)),
    )
    return Scripted(replies.splitting(epic, tickets), calls)


def brief_work(brief: str) -> Scripted:
    """A sub-chat opens on ``brief``: the small job it asks, with the tools (never start_subchat)."""
    keys = list(dict.fromkeys(k.upper() for k in ITEM_KEY.findall(brief)))
    if brief.startswith(replies.REVIEW_OPENING) and keys:
        named = dict.fromkeys(k.upper() for k in _BRIEF_TICKET.findall(brief))
        tickets = list(named)[:MAX_REVIEWED] or keys[:1]
        calls = tuple(("get_item", {"key": key}) for key in tickets)
        return Scripted(replies.reviewing(keys[0], len(tickets)), calls)
    if brief.startswith(replies.KNOWLEDGE_OPENING) and (epic := _BRIEF_EPIC.search(brief)) is not None:
        title = epic.group(1).strip()[:MAX_QUERY]
        calls = (("search_knowledge", {"query": title, "limit": SEARCH_LIMIT}),)
        return Scripted(replies.checking_knowledge(title), calls)
    if keys:  # a brief of another kind: read the items it names
        calls = tuple(("get_item", {"key": key}) for key in keys[:SEARCH_LIMIT])
        return Scripted(replies.reading(", ".join(keys[:SEARCH_LIMIT])), calls)
    query = " ".join(brief.split())[:MAX_QUERY]
    return Scripted(replies.searching(query), searches(query))


def searches(query: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    """Search the plan and the knowledge base for ``query``."""
    return (
        ("search_project", {"query": query, "limit": SEARCH_LIMIT}),
        ("search_knowledge", {"query": query, "limit": SEARCH_LIMIT}),
    )


def brief_answer(outputs: list[Output]) -> Scripted:
    """A sub-chat's answer, in a few lines, on the results of its brief's job."""
    names = {name for name, _, _ in outputs}
    if names == {"get_item"}:
        return Scripted(replies.ticket_review(outputs))
    if names == {"search_knowledge"}:
        return Scripted(replies.knowledge_found(outputs))
    return Scripted(replies.report(outputs))
