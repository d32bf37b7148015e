"""Pydantic's validation errors in the words of a configuration file: one line per bad setting,
``NAME: what is wrong``, naming the variable or ``[table] key`` the user wrote (``ballet.env``)."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError
from pydantic_core import ErrorDetails


def describe(
    exc: ValidationError,
    name_of: Callable[[tuple[str | int, ...]], str],
    table_of: Callable[[tuple[str | int, ...]], tuple[str, tuple[str, ...]]],
) -> str:
    """One line per bad setting, ``NAME: what is wrong``; unknown and missing keys per table."""
    lines: list[str] = []
    unknown: dict[tuple[str | int, ...], list[str]] = {}
    missing: dict[tuple[str | int, ...], list[str]] = {}
    for error in exc.errors():
        loc = error["loc"]
        if error["type"] in {"extra_forbidden", "unexpected_keyword_argument"}:
            unknown.setdefault(loc[:-1], []).append(str(loc[-1]))
        elif error["type"] == "missing":
            missing.setdefault(loc[:-1], []).append(str(loc[-1]))
        else:
            lines.append(f"{name_of(loc)}: {_phrase(error)}")
    for loc, keys in unknown.items():
        table, known = table_of(loc)
        lines.append(f"{table} has unknown keys: {', '.join(keys)} (known: {', '.join(known)})")
    for loc, keys in missing.items():
        lines.append(f"{table_of(loc)[0]} misses {', '.join(keys)}")
    return "\n".join(lines)


# Pydantic's errors in the words of a configuration file; others keep pydantic's own message.
PHRASES = {
    "int_parsing": "expected an integer, got {input!r}",
    "int_type": "expected an integer, got {input!r}",
    "int_from_float": "expected an integer, got {input!r}",
    "float_parsing": "expected a number, got {input!r}",
    "float_type": "expected a number, got {input!r}",
    "decimal_parsing": "expected a number, got {input!r}",
    "decimal_type": "expected a number, got {input!r}",
    "finite_number": "expected a finite number, got {input!r}",
    "bool_parsing": "expected a boolean, got {input!r}",
    "bool_type": "expected a boolean, got {input!r}",
    "string_type": "expected a string, got {input!r}",
    "string_too_short": "must not be empty",
    "tuple_type": "expected a list of names, got {input!r}",
    "list_type": "expected a list, got {input!r}",
    "greater_than": "must be above {gt}, got {input}",
    "greater_than_zero": "must be positive, got {input}",
    "greater_than_equal": "must be at least {ge}, got {input}",
    "greater_than_equal_zero": "must not be negative, got {input}",
    "less_than_equal": "must be at most {le}, got {input}",
}


def _phrase(error: ErrorDetails) -> str:
    context = error.get("ctx", {})
    kind = error["type"] + ("_zero" if 0 in (context.get("gt"), context.get("ge")) else "")
    template = PHRASES.get(kind)
    return template.format(input=error.get("input"), **context) if template else error["msg"]
