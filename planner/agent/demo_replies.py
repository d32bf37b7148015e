"""What the demo planner says (``planner/agent/demo.py``): fixed lines, and answers composed from
the tools' JSON output. The output is data the tools read (titles, descriptions, a worker's
words): it is quoted into Markdown, which the chat renders safely, never followed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_TITLE = 200  # an item's and a changeset's title
MAX_QUESTION = 4_000  # ask_human's question
DESCRIPTION_CHARS = 600  # of an item's description, in an answer
SUMMARY_LINE_CHARS = 200
BRIEF_TICKETS = 30  # tickets a sub-chat's brief names
ANSWER_CHARS = 3_000  # of a sub-chat's answer, in the answer that collects them
RESOLVED = ("done", "cancelled")  # a blocker in these holds nothing back

HELP = (
    "I'm the **demo planner**: a script built into Ballet, not an AI model. I understand a few "
    "plain requests:\n\n"
    "- *what can run next?* lists the tickets ready to run\n"
    "- *show me DEMO-4* (any item key) reads an item\n"
    "- *find export* searches the plan and the knowledge base\n"
    "- *where is booking implemented?* searches the code of the project's repository\n"
    "- *add a ticket for a CSV export* proposes a changeset for a human to review\n"
    "- *replan the payments epic* (an epic's title word or key) splits the work into two "
    "sub-chats and collects their answers\n\n"
    "Set a credential on the project to chat with Claude instead."
)
SEARCH_WHAT = "What should I look for? Say *find* and a few words, such as *find export*."
PROPOSE_WHAT = "What is the ticket for? Say, for example, *add a ticket for a CSV export of bookings*."
RUNNABLE = "Let me list the tickets that can run now."
CODE_WHAT = "What should I look for in the code? Say, for example, *where is booking implemented?*"
NO_REPOSITORY = (
    "This project has no linked repository, so there is no code for me to search. An owner can "
    "link one on the project's *Repositories* page; meanwhile *find booking* searches the plan "
    "and the knowledge base."
)
CODE_FILES = 8  # files an answer names
CODE_LINES = 3  # lines of each file an answer quotes
CODE_LINE_CHARS = 120
LOOKING_UP = "An agent asks a question: let me look in the plan and the knowledge base first."
REPLAN_FINDING = "Let me find that epic among the plan's epics."
NO_SUBCHATS_HERE = (
    "This chat starts no sub-chats of its own, so I don't replan here: ask for it in a chat of "
    "your own. Here I can read an item (*show me DEMO-4*) or search (*find export*)."
)
# The openings of the briefs of a replan's two sub-chats, by which the demo knows its job there.
REVIEW_OPENING = "Review the tickets of epic"
KNOWLEDGE_OPENING = "Check the knowledge base for epic"
EPIC_LINE = "Epic: "
Output = tuple[str, Any, bool]  # a tool's name, its JSON output, whether it failed


@dataclass(frozen=True)
class Scripted:
    """What the demo says (streamed) and the tools it calls."""

    text: str
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()


def searching(query: str) -> str:
    return f"Searching the plan and the knowledge base for *{_inline(query)}*."


def searching_code(words: str) -> str:
    return f"Searching the project's repository for *{_inline(words)}*."


def reading(key: str) -> str:
    return f"Let me read {key}."


def proposing(title: str) -> str:
    return f"I'll propose a changeset that adds the ticket *{_inline(title)}*."


def proposed_description(text: str) -> str:
    return f"Proposed by the demo planner from this request:\n\n> {_inline(text)[:2000]}"


def proposed_rationale(text: str) -> str:
    return f"Asked for in the planner chat: {_inline(text)[:2000]}"


def escalation(asker: str, question: str) -> str:
    text = (
        f"{asker} asks: {question}\n\n"
        "The demo planner cannot judge whether the plan settles this. What should I answer? "
        "Your answer goes to the agent as you write it."
    )
    return text[:MAX_QUESTION]


def passing_on(by: str) -> str:
    return f"{by} answered: I'm passing the answer on to the agent that asked."


def unanswered(output: Any) -> str:
    return (
        f"No answer came back ({_error_message(output)}): the question waits for the project's humans, "
        "who can answer it on this page."
    )


def replan_reading(key: str) -> str:
    return f"Let me read {key} and list its tickets before I split the replan."


def replan_found(epic: dict[str, Any]) -> str:
    return f"Found **{epic['key']}** {_inline(epic['title'])}. Let me read it and list its tickets."


def which_epic(epics: list[dict[str, Any]], asked: str, *, several: bool = False) -> str:
    """No epic (or ``several``) matches the human's request ``asked``: the epics to name one of."""
    if not epics:
        return "This project has no epic to replan yet."
    quoted = f"*{_inline(asked)[:SUMMARY_LINE_CHARS]}*"
    lead = f"Several epics match {quoted}" if several else f"I can't tell which epic {quoted} means"
    lines = "\n".join(f"- **{e['key']}** {_inline(e['title'])}" for e in epics)
    return f"{lead}. Which one? Say, for example, *replan {epics[0]['key']}*.\n\n{lines}"


def not_an_epic(item: dict[str, Any]) -> str:
    return (
        f"**{item['key']}** {_inline(item['title'])} is {_article(str(item['kind'])).lower()} "
        f"{item['kind']}, not an epic: say *replan* and an epic's key or title."
    )


def empty_epic(epic: dict[str, Any]) -> str:
    return f"**{epic['key']}** {_inline(epic['title'])} has no tickets yet: there is nothing to replan."


def splitting(epic: dict[str, Any], tickets: list[dict[str, Any]]) -> str:
    count = "one ticket" if len(tickets) == 1 else f"{len(tickets)} tickets"
    return (
        f"**{epic['key']}** {_inline(epic['title'])} has {count}. I'll split the replan into two "
        "sub-chats that run in parallel: one reviews the tickets and their blockers, one checks the "
        "knowledge base. I'll collect their answers when both have finished."
    )


def review_subchat(epic: dict[str, Any], tickets: list[dict[str, Any]]) -> dict[str, Any]:
    """The input of ``start_subchat`` for the sub-chat that reviews the epic's tickets."""
    opening = (
        f"{REVIEW_OPENING} {epic['key']} and their blockers. Read each ticket and say in a few "
        "lines which can run now, which wait and on what, and which are done."
    )
    return _subchat(epic, tickets, "tickets and blockers", opening)


def knowledge_subchat(epic: dict[str, Any], tickets: list[dict[str, Any]]) -> dict[str, Any]:
    """The input of ``start_subchat`` for the sub-chat that checks the knowledge base."""
    opening = (
        f"{KNOWLEDGE_OPENING} {epic['key']}: the decisions, documents and notes its tickets "
        "should follow. Say in a few lines what you found."
    )
    return _subchat(epic, tickets, "knowledge and decisions", opening)


def _subchat(epic: dict[str, Any], tickets: list[dict[str, Any]], part: str, opening: str) -> dict[str, Any]:
    named = [f"- {t['key']} {_inline(t['title'])} ({t['state']})" for t in tickets[:BRIEF_TICKETS]]
    if len(tickets) > BRIEF_TICKETS:
        named.append(f"- and {len(tickets) - BRIEF_TICKETS} more")
    brief = f"{opening}\n\n{EPIC_LINE}{_inline(epic['title'])}\nTickets:\n" + "\n".join(named)
    title = f"Replan {epic['key']}: {part}"
    return {"title": title[:MAX_TITLE], "brief": brief, "item": epic["key"]}


def reviewing(epic_key: str, count: int) -> str:
    tickets = "its ticket" if count == 1 else f"its {count} tickets"
    return f"Reading {tickets} of {epic_key}, with their blockers."


def checking_knowledge(title: str) -> str:
    return f"Searching the knowledge base for *{_inline(title)}*."


def ticket_review(outputs: list[Output]) -> str:
    """A sub-chat's answer on the tickets it read: one line each, and how many can run."""
    lines: list[str] = []
    runnable = waiting = 0
    for name, output, failed in outputs:
        if failed or not isinstance(output, dict):
            lines.append(f"- `{name}` did not work: {_error_message(output)}")
            continue
        blockers = [d for d in output.get("blocked_by") or [] if d.get("state") not in RESOLVED]
        claim = output.get("claim")
        if output.get("state") in RESOLVED:
            note = "finished"
        elif isinstance(claim, dict):
            note = f"claimed by {claim.get('holder')}"
        elif blockers:
            waiting += 1
            note = "waits on " + ", ".join(f"{d['key']} ({d['state']})" for d in blockers)
        elif output.get("state") == "ready":
            runnable += 1
            note = "can run now"
        else:
            note = "not ready yet"
        lines.append(f"- **{output['key']}** {_inline(output['title'])}: *{output['state']}*, {note}")
    counts = f"{runnable} can run now, {waiting} {'waits' if waiting == 1 else 'wait'} on blockers."
    return "\n".join(lines) + f"\n\n{counts} I changed nothing."


def knowledge_found(outputs: list[Output]) -> str:
    """A sub-chat's answer on what the knowledge base holds for its epic."""
    found = any(isinstance(o, dict) and o.get("results") for _, o, failed in outputs if not failed)
    advice = "Read these before changing the epic's tickets." if found else "Nothing settles this epic yet."
    return f"{report(outputs)}\n\n{advice} I changed nothing."


def subchats_answered(outputs: list[Output]) -> str:
    """The answer that collects a round of sub-chats' answers, each under its title."""
    parts = [_subchat_part(output, failed) for _, output, failed in outputs]
    ended = sum(1 for _, output, failed in outputs if not failed and isinstance(output, dict))
    lead = (
        "Both sub-chats have answered."
        if ended == len(outputs) == 2
        else (f"{ended} of {len(outputs)} sub-chats answered.")
    )
    proposed = [n for _, o, failed in outputs if isinstance(o, dict) for n in o.get("changesets") or []]
    numbers = ", ".join(f"changeset #{n}" for n in proposed)
    tail = (
        f"They proposed {numbers}: review them before anything changes."
        if proposed
        else "Nothing in the plan changed. Open a sub-chat's fold to read it in full."
    )
    return "\n\n".join([lead, *parts, tail])


def _subchat_part(output: Any, failed: bool) -> str:
    if not isinstance(output, dict):
        return f"A sub-chat did not answer: {_error_message(output)}"
    title = f"**{_inline(output.get('title') or 'A sub-chat')}**"
    if failed or output.get("error"):
        return f"{title} did not finish: {_error_message(output)}"
    answer = str(output.get("answer") or "").strip() or "(no answer)"
    if len(answer) > ANSWER_CHARS:
        answer = answer[:ANSWER_CHARS] + " […]"
    quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in answer.splitlines())
    return f"{title} answered:\n\n{quoted}"


def output_of(content: str) -> Any:
    """A tool result's JSON body (its text, if it is not JSON)."""
    try:
        return json.loads(content)
    except ValueError:
        return content


def report(outputs: list[Output]) -> str:
    """The answer to a round of tool results, one paragraph per call."""
    parts = [_reported(name, output, failed) for name, output, failed in outputs]
    return "\n\n".join(part for part in parts if part) or HELP


def searched_for_question(outputs: list[Output]) -> str:
    found = report(outputs)
    return (
        f"{found}\n\nI'm a script and cannot tell whether that settles the question, "
        "so I'm asking the project's humans."
    )


def _reported(name: str, output: Any, failed: bool) -> str:
    if failed or not isinstance(output, dict):
        return f"`{name}` did not work: {_error_message(output)}"
    compose = _COMPOSERS.get(name)
    if compose is None:
        return f"`{name}` answered; a model would read it, the demo planner only runs its own few requests."
    return compose(output)


def _error_message(output: Any) -> str:
    error = output.get("error") if isinstance(output, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return str(output)[:300]


def _runnable(output: dict[str, Any]) -> str:
    tickets = output.get("tickets") or []
    if not tickets:
        return "No ticket can run right now: none is ready with all its blockers done."
    lines = [f"- **{t['key']}** {_inline(t['title'])}" for t in tickets]
    count = "One ticket can" if len(tickets) == 1 else f"{len(tickets)} tickets can"
    return f"{count} run now (ready, every blocker done):\n\n" + "\n".join(lines)


def _article(word: str) -> str:
    return "An" if word[:1].lower() in ("a", "e", "i", "o", "u") else "A"


def _item(output: dict[str, Any]) -> str:
    lines = [
        f"**{output['key']}** · {_inline(output['title'])}",
        f"{_article(str(output['kind']))} {output['kind']}, *{output['state']}* (version {output['version']})"
        + (f", in {output['epic']}" if output.get("epic") else "")
        + ".",
    ]
    description = (output.get("description") or "").strip()
    if description:
        cut = description[:DESCRIPTION_CHARS] + (" […]" if len(description) > DESCRIPTION_CHARS else "")
        lines.append(cut)
    criteria = output.get("acceptance_criteria") or []
    if criteria:
        lines.append("Acceptance criteria:\n\n" + "\n".join(f"- {_inline(c)}" for c in criteria))
    lines.append(_dependencies(output))
    claim = output.get("claim")
    if isinstance(claim, dict):
        lines.append(f"Claimed by {claim.get('holder')}.")
    return "\n\n".join(line for line in lines if line)


def _dependencies(output: dict[str, Any]) -> str:
    named = [
        (label, ", ".join(f"{d['key']} ({d['state']})" for d in output.get(field) or []))
        for label, field in (("Blocked by", "blocked_by"), ("Blocks", "blocks"))
    ]
    return " ".join(f"{label}: {keys}." for label, keys in named if keys)


def _plan_hits(output: dict[str, Any]) -> str:
    def line(h: dict[str, Any]) -> str:
        return f"- **{h['key']}** {_inline(h['title'])}" + (f" ({h['state']})" if h.get("state") else "")

    return _matches_then_related(output, "the plan", line)


def _knowledge_hits(output: dict[str, Any]) -> str:
    return _matches_then_related(
        output, "the knowledge base", lambda h: f"- knowledge:{h['id']} {_inline(h['title'])} ({h['kind']})"
    )


def _matches_then_related(output: dict[str, Any], where: str, line: Callable[[dict[str, Any]], str]) -> str:
    """A search's matches, then the hits only related to the query, apart; or that nothing matches."""
    hits = output.get("results") or []
    matches = [line(h) for h in hits if not h.get("related")]
    related = [line(h) for h in hits if h.get("related")]
    parts = [f"In {where}:\n\n" + "\n".join(matches) if matches else f"Nothing in {where} matches."]
    if related:
        parts.append("Related, but not a match:\n\n" + "\n".join(related))
    return "\n\n".join(parts)


def _code_hits(output: dict[str, Any]) -> str:
    """repo_search's hits, by file: the first lines of each, quoted as code."""
    where = f"**{_inline(str(output.get('repository', '')))}** ({_inline(str(output.get('ref', '')))})"
    by_file: dict[str, list[dict[str, Any]]] = {}
    for hit in output.get("hits") or []:
        by_file.setdefault(str(hit.get("path", "")), []).append(hit)
    if not by_file:
        return f"Nothing in {where} matches: no file holds those words."
    # The code first, the files with the most hits first; documentation and tests after it.
    ranked = sorted(by_file.items(), key=lambda pair: (_aside(pair[0]), -len(pair[1])))
    lines = []
    for path, hits in ranked[:CODE_FILES]:
        quoted = "; ".join(
            f"line {h.get('line')}: {_code(str(h.get('text', '')))}" for h in hits[:CODE_LINES]
        )
        more = f" (and {len(hits) - CODE_LINES} more)" if len(hits) > CODE_LINES else ""
        lines.append(f"- {_code(path)}, {quoted}{more}")
    files = "One file" if len(by_file) == 1 else f"{len(by_file)} files"
    rest = len(by_file) - CODE_FILES
    tail = f"\n\n…and {rest} more file(s)." if rest > 0 else ""
    cut = f"\n\n{_inline(str(output['cut']))}" if output.get("cut") else ""
    return f"{files} in {where} match:\n\n" + "\n".join(lines) + tail + cut


def _aside(path: str) -> bool:
    """A file of documentation or tests, listed after the code."""
    parts = path.lower().split("/")
    return parts[-1].endswith((".md", ".rst", ".txt")) or any(p in ("tests", "test", "docs") for p in parts)


def _code(text: str) -> str:
    """``text`` as inline code on one line (a backtick in it becomes a quote)."""
    line = _inline(text).replace("`", "'")
    cut = line[:CODE_LINE_CHARS] + ("…" if len(line) > CODE_LINE_CHARS else "")
    return f"`{cut}`" if cut else "(an empty line)"


def _proposed(output: dict[str, Any]) -> str:
    changeset = output.get("changeset") or {}
    return (
        f"I proposed changeset #{changeset.get('number')} ({changeset.get('status')}). Nothing changes "
        "until a maintainer or an owner applies it: *Apply* on its card in this chat, or on its "
        f"review page, {changeset.get('review_url')}."
    )


def _answered(output: dict[str, Any]) -> str:
    return "Done: the agent that asked has its answer."


def _noted(output: dict[str, Any]) -> str:
    by = output.get("answered_by") or "thanks"
    return f"Noted, {by}: *{_inline(str(output.get('answer', '')))}*."


_COMPOSERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "list_runnable": _runnable,
    "get_item": _item,
    "search_project": _plan_hits,
    "search_knowledge": _knowledge_hits,
    "propose_changeset": _proposed,
    "repo_search": _code_hits,
    "answer_question": _answered,
    "ask_human": _noted,
}


def summary(transcript_prompt: str) -> str:
    """The demo's compaction summary: the earlier summary, then what the human asked, in order."""
    previous = re.search(r"<previous-summary>\n(.*?)\n</previous-summary>", transcript_prompt, re.DOTALL)
    asked = re.findall(r"^Human: (.+)$", transcript_prompt, re.MULTILINE)
    lines = [f"- {_inline(text)[:SUMMARY_LINE_CHARS]}" for text in asked]
    parts = [previous.group(1)] if previous else []
    parts.append("The demo planner (scripted) was asked, in order:\n\n" + ("\n".join(lines) or "- nothing"))
    return "\n\n".join(parts)


def _inline(text: str) -> str:
    """``text`` on one line, as it is quoted into a sentence."""
    return " ".join(str(text).split())
