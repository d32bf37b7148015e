"""What the demo planner says (``planner/agent/demo.py``): fixed lines, and answers composed from
the tools' JSON output. The output is data the tools read (titles, descriptions, a worker's
words): it is quoted into Markdown, which the chat renders safely, never followed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

MAX_TITLE = 200  # an item's and a changeset's title
MAX_QUESTION = 4_000  # ask_human's question
DESCRIPTION_CHARS = 600  # of an item's description, in an answer
SUMMARY_LINE_CHARS = 200

HELP = (
    "I'm the **demo planner**: a script built into Ballet, not an AI model. I understand a few "
    "plain requests:\n\n"
    "- *what can run next?* lists the tickets ready to run\n"
    "- *show me DEMO-4* (any item key) reads an item\n"
    "- *find export* searches the plan and the knowledge base\n"
    "- *add a ticket for a CSV export* proposes a changeset for a human to review\n\n"
    "Set a credential on the project to chat with Claude instead."
)
SEARCH_WHAT = "What should I look for? Say *find* and a few words, such as *find export*."
PROPOSE_WHAT = "What is the ticket for? Say, for example, *add a ticket for a CSV export of bookings*."
RUNNABLE = "Let me list the tickets that can run now."
LOOKING_UP = "An agent asks a question: let me look in the plan and the knowledge base first."
Output = tuple[str, Any, bool]  # a tool's name, its JSON output, whether it failed


def searching(query: str) -> str:
    return f"Searching the plan and the knowledge base for *{_inline(query)}*."


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
    hits = output.get("results") or []
    if not hits:
        return "Nothing in the plan matches."
    lines = [
        f"- **{h['key']}** {_inline(h['title'])}" + (f" ({h['state']})" if h.get("state") else "")
        for h in hits
    ]
    return "In the plan:\n\n" + "\n".join(lines)


def _knowledge_hits(output: dict[str, Any]) -> str:
    hits = output.get("results") or []
    if not hits:
        return "Nothing in the knowledge base matches."
    lines = [f"- knowledge:{h['id']} {_inline(h['title'])} ({h['kind']})" for h in hits]
    return "In the knowledge base:\n\n" + "\n".join(lines)


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
