"""What a search may call a match (docs/search.md#matches-and-related): the evidence for each hit.

Reciprocal rank fusion ranks whatever either ranking brings, so a query with
one good answer still fills its list with the semantic ranking's next-nearest
documents, however far they are: "export" on the demo brought the launch
milestone and the sign-in epic after the export ticket. A hit is therefore
judged on its own evidence, not on its place in the fused list:

- **a match** when the query named it (an exact key); or, when the query named
  no item, when the full-text search found every word of the query and either
  the query has two words or more (each found: no chance mention), one of them
  is in its title, or the model agrees (:data:`LEXICAL_SUPPORT`); or
  when the model alone finds it close (:data:`SEMANTIC_MATCH`) and about as
  close as the best hit (:data:`BEHIND_BEST`);
- **related** when the full-text search found it, or the model finds it near
  (:data:`SEMANTIC_RELATED`): shown apart, after the matches. A query that
  names an item (``status of DEMO-18``) matches that item only: its other
  words are rarely a search of their own;
- otherwise **cut**.

The similarities are all-MiniLM-L6-v2's cosines. The bars were chosen on the
tuned relevance set (``tests/search/relevance.py``) and measured on the
held-out one (``tests/search/relevance_heldout.py``); ``bench/search.py``
prints both, and docs/benchmarks.md has the figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tracker.search.query import WORD, stem

SEMANTIC_MATCH = 0.30  # the least cosine of a match the model alone finds
BEHIND_BEST = 0.05  # ... which is at most this far below the best hit's cosine
LEXICAL_SUPPORT = 0.30  # the model's part in a full-text hit whose title lacks the query's words
SEMANTIC_RELATED = 0.25  # below it, and without the query's words, a hit is no hit at all


class Standing(Enum):
    MATCH = "match"
    RELATED = "related"
    CUT = "cut"


@dataclass(frozen=True)
class Evidence:
    exact: bool  # the query named the item's key
    lexical: bool  # the full-text search found it
    in_title: bool  # a word of the query is in its title (stemmed)
    similarity: float | None  # the model's cosine with the query; None without the model (lexical mode)


def title_has(title: str, words: tuple[str, ...]) -> bool:
    """Does ``title`` hold one of the query's ``words``: a word that starts with its stem, as the
    snippet marks them ("booking" in "bookings", "exporting" in "Export")?"""
    stems = tuple(stem(word) for word in words)
    return bool(stems) and any(word.lower().startswith(stems) for word in WORD.findall(title))


def standing(evidence: Evidence, *, best_similarity: float | None, named: bool, words: int) -> Standing:
    """Where ``evidence`` puts a hit, given the best cosine among the search's hits, whether the
    query ``named`` an item by its key, and how many ``words`` it looks for."""
    if evidence.exact or (not named and _matches(evidence, best_similarity, words)):
        return Standing.MATCH
    near = evidence.similarity is not None and evidence.similarity >= SEMANTIC_RELATED
    return Standing.RELATED if evidence.lexical or near else Standing.CUT


def _matches(evidence: Evidence, best_similarity: float | None, words: int) -> bool:
    similarity = evidence.similarity
    supported = evidence.in_title or words > 1 or similarity is None or similarity >= LEXICAL_SUPPORT
    if evidence.lexical and supported:
        return True
    if similarity is None:
        return False
    best = best_similarity if best_similarity is not None else similarity
    return similarity >= SEMANTIC_MATCH and similarity >= best - BEHIND_BEST
