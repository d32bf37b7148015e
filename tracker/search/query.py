"""Queries in web-search syntax, and highlighted snippets.

The syntax is PostgreSQL's ``websearch_to_tsquery``: words must all match,
``"a phrase"`` matches in order, ``or`` between two terms accepts either,
``-word`` excludes. Item keys (``DEMO-12``) are noted as identifiers, and
English stop words are dropped as PostgreSQL's ``english`` configuration does,
so that SQLite's FTS5 gets the same question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TERMS = 16
MAX_QUERY = 500
SNIPPET_CHARS = 180
IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9]{1,9}-[0-9]{1,9}$")
TOKEN = re.compile(r'(-?)"([^"]*)"?|(-?)([^\s"]+)')
WORD = re.compile(r"\w+", re.UNICODE)
MARKUP = re.compile(r"[*_`#>|\[\]]+")
SPACE = re.compile(r"\s+")
PUNCTUATION = ".,;:!?()[]{}'"

# PostgreSQL's english.stop (Snowball), so both databases drop the same words.
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her
    hers herself it its itself they them their theirs themselves what which who whom this that these those
    am is are was were be been being have has had having do does did doing a an the and but if or because
    as until while of at by for with about against between into through during before after above below
    to from up down in out on off over under again further then once here there when where why how all
    any both each few more most other some such no nor not only own same so than too very s t can will
    just don should now""".split()  # noqa: SIM905 - a word list reads best as text
)

Term = tuple[str, ...]  # one word, or the words of a phrase


@dataclass(frozen=True)
class ParsedQuery:
    text: str  # the query less the dropped identifiers, for websearch_to_tsquery
    natural: str  # the same without exclusions and operators, for the embedding model
    identifiers: tuple[str, ...]  # item keys, upper-cased
    groups: tuple[tuple[Term, ...], ...]  # every group must match; a group matches if any term does
    excluded: tuple[Term, ...]

    @property
    def words(self) -> tuple[str, ...]:
        """Every word the query asks for, once each, in order."""
        seen = dict.fromkeys(word for group in self.groups for term in group for word in term)
        return tuple(seen)

    @property
    def is_empty(self) -> bool:
        return not self.groups and not self.identifiers


def _words(text: str) -> Term:
    return tuple(w for w in (m.lower() for m in WORD.findall(text)) if w not in STOP_WORDS)


def parse_query(query: str, *, drop: frozenset[str] = frozenset()) -> ParsedQuery:
    """Parse ``query``; identifiers in ``drop`` (keys found as such) are no words to look for."""
    groups: list[list[Term]] = []
    excluded: list[Term] = []
    identifiers: list[str] = []
    kept: list[str] = []
    natural: list[str] = []
    join_next = False
    for match in TOKEN.finditer(query[:MAX_QUERY]):
        negated = bool(match[1] or match[3])
        raw = match[2] if match[2] is not None else match[4]
        bare = raw.strip(PUNCTUATION)
        if match[4] is not None and IDENTIFIER.match(bare):
            identifiers.append(bare.upper())
            if bare.upper() in drop:
                continue
        kept.append(match[0])
        if match[4] is not None and raw.lower() == "or" and not negated:
            join_next = bool(groups)
            continue
        if not negated:
            natural.append(raw)
        term = _words(raw)
        if not term:
            continue
        if negated:
            excluded.append(term)
        elif join_next:
            groups[-1].append(term)
        else:
            groups.append([term])
        join_next = False
    return ParsedQuery(
        text=" ".join(kept),
        natural=" ".join(natural),
        identifiers=tuple(dict.fromkeys(identifiers)),
        groups=tuple(tuple(group) for group in groups[:MAX_TERMS]),
        excluded=tuple(excluded[:MAX_TERMS]),
    )


def stem(word: str) -> str:
    """A crude stem for highlighting: enough that "logins" marks "login" and "logging"."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) - len(suffix) >= 4 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _plain(text: str) -> str:
    return SPACE.sub(" ", MARKUP.sub(" ", text)).strip()


def snippet(text: str, words: tuple[str, ...]) -> str:
    """A window of ``text`` around the first matched word, with matched words in ``**bold**``."""
    plain = _plain(text)
    stems = tuple(stem(w) for w in words)
    matches = [m for m in WORD.finditer(plain) if stems and m[0].lower().startswith(stems)]
    start = 0
    if matches:
        start = max(0, matches[0].start() - SNIPPET_CHARS // 4)
        start = plain.rfind(" ", 0, start) + 1 if start else 0
    end = min(len(plain), start + SNIPPET_CHARS)
    if end < len(plain):
        end = max(plain.rfind(" ", start, end), start + SNIPPET_CHARS // 2)
    window = plain[start:end]
    if stems:
        window = WORD.sub(lambda m: f"**{m[0]}**" if m[0].lower().startswith(stems) else m[0], window)
    return ("…" if start else "") + window + ("…" if end < len(plain) else "")
