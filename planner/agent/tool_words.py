"""A tool call in words, for the chat's folds and REST clients (docs/protocol.md#tool-words).

"Looked up runnable tickets", "Read DEMO-4", "Searched the project for “export”",
"Proposed changeset #7": one phrase per tool and per stage of the call — running
("Reading DEMO-4…"), done, failed ("Could not read DEMO-4"). Pure: built from the
tool's name, its input and, once done, its output. The input is the model's and
may be anything (a failed call's often is not what the schema says): only values
of the expected type are used, text is shortened and quoted, and the browser shows
the phrase as text, never as markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

ToolStage = Literal["running", "done", "failed"]

MAX_QUOTED = 60  # characters of a query or a name in a phrase


@dataclass(frozen=True)
class Phrase:
    """A call's words: ``doing`` (running) and ``did`` (done) lead, ``do`` follows "Could not"."""

    doing: str
    did: str
    do: str
    what: str
    what_done: str | None = None  # what it did, when the output names it ("changeset #7")

    def at(self, stage: ToolStage) -> str:
        match stage:
            case "running":
                return f"{self.doing} {self.what}…"
            case "done":
                return f"{self.did} {self.what_done or self.what}"
            case "failed":
                return f"Could not {self.do} {self.what}"


def quoted(value: Any) -> str | None:
    """``value`` on one line, at most ``MAX_QUOTED`` characters, in quotes; None if it is no text."""
    if not isinstance(value, str) or not value.strip():
        return None
    line = " ".join(value.split())
    if len(line) > MAX_QUOTED:
        line = line[: MAX_QUOTED - 1].rstrip() + "…"
    return f"“{line}”"


def _key(value: Any, fallback: str) -> str:
    """An item key as the model gave it (short text only)."""
    return value.strip() if isinstance(value, str) and 0 < len(value.strip()) <= 30 else fallback


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _words(value: Any) -> str | None:
    """A state or status value ("in_progress") as words ("in progress")."""
    return value.replace("_", " ") if isinstance(value, str) and value.isidentifier() else None


def _list_items(args: dict[str, Any], output: Any) -> Phrase:
    kinds = {"milestone": "milestones", "epic": "epics", "ticket": "tickets"}
    kind = args.get("kind")
    what = kinds.get(kind, "items") if isinstance(kind, str) else "items"
    if state := _words(args.get("state")):
        what = f"{state} {what}"
    if isinstance(args.get("epic"), str):
        what += f" of {_key(args['epic'], 'an epic')}"
    if isinstance(args.get("milestone"), str):
        what += f" in {_key(args['milestone'], 'a milestone')}"
    return Phrase("Listing", "Listed", "list", what)


def _list_changesets(args: dict[str, Any], output: Any) -> Phrase:
    status = _words(args.get("status"))
    return Phrase("Listing", "Listed", "list", f"{status} changesets" if status else "changesets")


def _searched(where: str) -> Callable[[dict[str, Any], Any], Phrase]:
    def phrase(args: dict[str, Any], output: Any) -> Phrase:
        query = quoted(args.get("query"))
        return Phrase("Searching", "Searched", "search", f"{where} for {query}" if query else where)

    return phrase


def _propose_changeset(args: dict[str, Any], output: Any) -> Phrase:
    changeset = output.get("changeset") if isinstance(output, dict) else None
    number = _number(changeset.get("number")) if isinstance(changeset, dict) else None
    return Phrase(
        "Proposing", "Proposed", "propose", "a changeset", f"changeset #{number}" if number else None
    )


def _knowledge(doing: str, did: str, do: str) -> Callable[[dict[str, Any], Any], Phrase]:
    def phrase(args: dict[str, Any], output: Any) -> Phrase:
        entry = _number(args.get("id"))
        return Phrase(doing, did, do, f"knowledge #{entry}" if entry else "a knowledge entry")

    return phrase


def _create_knowledge(args: dict[str, Any], output: Any) -> Phrase:
    entry = _number(output.get("id")) if isinstance(output, dict) else None
    return Phrase("Writing", "Wrote", "write", "a knowledge entry", f"knowledge #{entry}" if entry else None)


def _read_skill(args: dict[str, Any], output: Any) -> Phrase:
    name = quoted(args.get("name"))
    return Phrase("Reading", "Read", "read", f"the skill {name}" if name else "a skill")


def _in_repository(what: str, args: dict[str, Any]) -> str:
    repository = quoted(args.get("repository"))
    return f"{what} in {repository}" if repository else what


def _repo_tree(args: dict[str, Any], output: Any) -> Phrase:
    path = quoted(args.get("path"))
    what = f"the files in {path}" if path else "the repository's files"
    return Phrase("Listing", "Listed", "list", _in_repository(what, args))


def _repo_read(args: dict[str, Any], output: Any) -> Phrase:
    return Phrase("Reading", "Read", "read", _in_repository(quoted(args.get("path")) or "a file", args))


def _repo_search(args: dict[str, Any], output: Any) -> Phrase:
    pattern = quoted(args.get("pattern"))
    return Phrase("Searching", "Searched", "search", f"the code for {pattern}" if pattern else "the code")


def _repo_log(args: dict[str, Any], output: Any) -> Phrase:
    path = quoted(args.get("path"))
    what = f"the history of {path}" if path else "the commit history"
    return Phrase("Reading", "Read", "read", _in_repository(what, args))


def _fixed(doing: str, did: str, do: str, what: str) -> Callable[[dict[str, Any], Any], Phrase]:
    return lambda args, output: Phrase(doing, did, do, what)


# Every tool of planner/domain/tools/ (a test checks that none is missing).
PHRASES: dict[str, Callable[[dict[str, Any], Any], Phrase]] = {
    "list_items": _list_items,
    "get_item": lambda args, output: Phrase("Reading", "Read", "read", _key(args.get("key"), "an item")),
    "list_runnable": _fixed("Looking up", "Looked up", "look up", "runnable tickets"),
    "search_project": _searched("the project"),
    "list_changesets": _list_changesets,
    "propose_changeset": _propose_changeset,
    "list_skills": _fixed("Listing", "Listed", "list", "the skills"),
    "read_skill": _read_skill,
    "search_knowledge": _searched("knowledge"),
    "get_knowledge": _knowledge("Reading", "Read", "read"),
    "create_knowledge": _create_knowledge,
    "update_knowledge": _knowledge("Updating", "Updated", "update"),
    "repo_tree": _repo_tree,
    "repo_read": _repo_read,
    "repo_search": _repo_search,
    "repo_log": _repo_log,
    "start_subchat": _fixed("Starting", "Started", "start", "a sub-chat"),
    "ask_human": _fixed("Asking", "Asked", "ask", "a question"),
    "answer_question": _fixed("Answering", "Answered", "answer", "the question"),
}


def tool_label(name: str, input: Any, *, stage: ToolStage, output: Any = None) -> str:
    """The words of a call of the tool ``name`` with ``input`` at ``stage`` (``output``: once done)."""
    args = input if isinstance(input, dict) else {}
    phrase = PHRASES.get(name)
    if phrase is None:
        tool = quoted(name) or "a tool"
        return Phrase("Using", "Used", "use", f"the tool {tool}").at(stage)
    return phrase(args, output).at(stage)


def tool_stage(*, is_error: bool) -> ToolStage:
    return "failed" if is_error else "done"
