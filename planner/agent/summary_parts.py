"""A compaction summary's durable parts, pure: the goal, decisions, constraints and open questions.

The summary is Markdown in the sections ``planner/agent/compaction.py`` asks for. Its durable
parts are offered to the project's knowledge base as drafts (SPEC § 6.4, docs/domain.md#drafts):
each section with something to say becomes one part, with the item keys it names. The model's
wording of a heading varies ("**Decisions and agreements**:", "## Decisions", "- **Open
questions**"): a heading is a line that starts with one of the known names, whatever its
Markdown; the text under it runs to the next heading.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

# Heading words, in the summary's order, and the section each begins (None: not offered).
HEADINGS: tuple[tuple[str, str | None], ...] = (
    ("goal", "goals"),
    ("decision", "decisions"),
    ("constraint", "constraints"),
    ("plan fact", None),
    ("changeset", None),
    ("open question", "questions"),
)
KINDS = {"goals": "note", "decisions": "decision", "constraints": "note", "questions": "note"}
TITLES = {
    "goals": "Goal",
    "decisions": "Decisions",
    "constraints": "Constraints",
    "questions": "Open questions",
}
MAX_BODY = 20000  # a part longer than this is cut, and says so
MAX_ITEMS = 50

_HEADING = re.compile(
    r"^\s{0,3}(?P<mark>#{1,6}\s+|[-*+]\s+)?(?P<bold>\*\*|__)?(?P<head>[^:*_\n]{1,60}?)(?:\*\*|__)?"
    r"\s*(?P<colon>:|$)(?P<rest>.*)$"
)
_ITEM_KEY = re.compile(r"\b[A-Z][A-Z0-9]{0,9}-[0-9]{1,9}\b")
_NOTHING = re.compile(r"^\W*(?:none|nothing|n/?a)(?: (?:yet|so far|open))?\W*$", re.IGNORECASE)


@dataclass(frozen=True)
class Part:
    section: str
    kind: str
    title: str
    body: str
    item_keys: tuple[str, ...]


def _section(line: str) -> tuple[str | None, str] | None:
    """The section a heading line begins and the text after it on the line; None: not a heading.

    A heading is a Markdown heading, a bold name, or a bare name ending in a colon on its own
    line; a list line ("- Decision: …") is a heading only when its name is bold.
    """
    match = _HEADING.match(line)
    if match is None:
        return None
    mark, bold, rest = match.group("mark") or "", match.group("bold"), match.group("rest")
    rest = rest.strip().lstrip("*_").strip()
    if not (mark.startswith("#") or bold or (not mark and match.group("colon") == ":" and not rest)):
        return None
    name = match.group("head").strip().lower()
    for word, section in HEADINGS:
        if name.startswith(word):
            return section, rest
    return None


def _body(lines: list[str]) -> str:
    text = textwrap.dedent("\n".join(lines)).strip()
    if len(text) > MAX_BODY:
        text = text[:MAX_BODY].rstrip() + "\n\n… (cut: the summary's part was longer)"
    return text


def durable_parts(summary: str, *, chat_title: str = "") -> list[Part]:
    """The summary's goal, decisions, constraints and open questions that say something, in order;
    a section named twice (a summary that repeats a heading) is one part."""
    found: dict[str, list[str]] = {}
    current: str | None = None
    inside = False
    for line in summary.splitlines():
        heading = _section(line)
        if heading is not None:
            current, rest = heading
            inside = True
            if current is not None:
                found.setdefault(current, [])
                if rest:
                    found[current].append(rest)
            continue
        if inside and current is not None:
            found[current].append(line)
    parts = []
    suffix = f" — {chat_title.strip()}" if chat_title.strip() else ""
    for section, kind in KINDS.items():
        body = _body(found.get(section, []))
        if not body or _NOTHING.match(body):
            continue
        keys = tuple(dict.fromkeys(_ITEM_KEY.findall(body)))[:MAX_ITEMS]
        title = f"{TITLES[section]}{suffix}"[:200]
        parts.append(Part(section=section, kind=kind, title=title, body=body, item_keys=keys))
    return parts
