"""Untrusted text made safe to use: numbers of ASCII digits within a column's range, and no NUL.

Python's ``str.isdigit`` and ``int`` accept any Unicode digit (``"²".isdigit()``
is true and ``int("٣")`` is 3), and PostgreSQL stores no NUL in text nor
``\\u0000`` in jsonb. Every number parsed from what a user or the model wrote,
and every check for NUL, goes through here, as does the naming of a place in
a JSON input (``operations[2].fields.state``) that an error points at.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tracker.errors import ValidationError

MAX_INT = 2**31 - 1  # the largest value of the database's integer columns
MAX_BIG_ID = 2**63 - 1  # the largest id of a BigAutoField
MAX_IDEMPOTENCY_KEY = 200  # a client's own key for a write it may retry (a question, a report)
NUL_MESSAGE = "NUL characters are not allowed."


def ascii_number(text: str, *, maximum: int = MAX_INT) -> int | None:
    """The number ``text`` spells in ASCII digits if it is in 1..``maximum``, else None."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(maximum)):
        return None
    number = int(text)
    return number if 0 < number <= maximum else None


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace collapsed), cut to ``limit`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def json_path(parts: Iterable[str | int]) -> str:
    """A path into a JSON value as field errors name it: ``["operations", 2, "fields"]`` →
    ``operations[2].fields``."""
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def nul_paths(value: Any, path: str = "") -> list[str]:
    """The paths (``operations[0].fields.title``) of the strings in ``value`` that hold a NUL."""
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(value, path)]  # no recursion: the value may nest deep
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                found.append(where)
        elif isinstance(node, dict):
            for key, child in node.items():
                name = str(key).replace("\x00", "\\u0000")
                child_path = f"{where}.{name}" if where else name
                if "\x00" in str(key):
                    found.append(child_path)
                stack.append((child, child_path))
        elif isinstance(node, list | tuple):
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(node))
    return sorted(set(found))


def refuse_nul(**values: Any) -> None:
    """A ValidationError naming every field of ``values`` that holds a NUL anywhere inside."""
    errors = {where: [NUL_MESSAGE] for name, value in values.items() for where in nul_paths(value, name)}
    if errors:
        raise ValidationError(errors)


def without_nul(value: Any) -> Any:
    """``value`` with every NUL in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {without_nul(key): without_nul(child) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(child) for child in value]
    return value


class NulFreeJSONEncoder(json.JSONEncoder):
    """For JSON columns holding what the model wrote (nothing refused it first): NUL stored as U+FFFD."""

    def encode(self, o: Any) -> str:
        # JSON writes a NUL as \u0000: without that in the text there is none to replace (a walk
        # through a large tool result cost more than encoding it).
        text = super().encode(o)
        return super().encode(without_nul(o)) if "\\u0000" in text and nul_paths(o) else text


def idempotency_key(key: Any) -> str:
    """A client's key for a write it may send again (``""``: none), else a ValidationError naming
    the ``idempotency_key`` field."""
    if key in (None, ""):
        return ""
    printable = isinstance(key, str) and key.isascii() and key.isprintable()
    if not printable or len(key) > MAX_IDEMPOTENCY_KEY:
        raise ValidationError(
            {"idempotency_key": [f"Expected printable ASCII of at most {MAX_IDEMPOTENCY_KEY} characters."]}
        )
    return key


# How every list pages, over REST and MCP alike (docs/agents.md#one-shape): ``limit`` rows from
# ``offset``.
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_OFFSET = 1_000_000


def paging(limit: Any, offset: Any) -> tuple[int, int]:
    """``limit`` and ``offset`` as given in a query (strings, or None when absent), checked: a
    readable ValidationError names each bad one."""
    errors: dict[str, list[str]] = {}
    checked = []
    for name, value, default, low, high in (
        ("limit", limit, DEFAULT_LIMIT, 1, MAX_LIMIT),
        ("offset", offset, 0, 0, MAX_OFFSET),
    ):
        if value is None or value == "":
            checked.append(default)
            continue
        text = str(value).strip()
        if (
            not (text.isascii() and text.isdigit())
            or len(text) > len(str(high))
            or not low <= int(text) <= high
        ):
            errors[name] = [f"A whole number from {low} to {high:,}."]
            continue
        checked.append(int(text))
    if errors:
        raise ValidationError(errors, "Bad paging.")
    return checked[0], checked[1]
