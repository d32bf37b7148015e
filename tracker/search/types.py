"""The vocabulary of search: what a caller gets back, what a search covers, what the index holds and
where its documents come from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Mode = Literal["hybrid", "lexical", "semantic"]
ITEM, SKILL, KNOWLEDGE = "item", "skill", "knowledge"
KINDS = (ITEM, SKILL, KNOWLEDGE)


@dataclass(frozen=True)
class SearchHit:
    kind: str  # "item", "skill" or "knowledge"
    key: str  # item key, skill name or knowledge id
    title: str
    snippet: str  # a window of the text with the matched words in **bold**
    score: float  # 1.0 for an exact key; else reciprocal rank fusion, 1.0 = first in every ranking
    state: str | None = None  # items' state; knowledge entries' kind (what the planner has always seen)
    subkind: str | None = None  # milestone, epic or ticket; document, decision, note or debt
    related: bool = False  # not a match: near the query, shown apart after the matches


@dataclass(frozen=True)
class SearchScope:
    """What a search may return: one organization, some kinds, one project's documents.

    Organization-wide documents (organization skills, knowledge) are in scope
    whatever the project; the interface that builds the scope has checked that
    the caller may read each kind it names.
    """

    organization_id: int
    kinds: frozenset[str]
    project_id: int | None = None
    subkinds: frozenset[str] = frozenset()  # item or knowledge kinds; skills have none and pass
    states: frozenset[str] = frozenset()  # only items have a state: a state filter keeps only items
    # Keys of knowledge entries the caller may not read: their links reach a project beyond the caller's.
    hidden_knowledge: frozenset[str] = frozenset()


@dataclass(frozen=True)
class DocumentSpec:
    """A source object as the index stores it."""

    kind: str
    object_id: int
    organization_id: int
    project_id: int | None
    key: str
    title: str
    body: str
    subkind: str = ""
    state: str = ""
    source_version: int = 0

    @property
    def embedding_text(self) -> str:
        return f"{self.title}\n\n{self.body}".strip()


@dataclass(frozen=True)
class SearchSource:
    """Where the documents of one kind come from; ``settings.SEARCH_SOURCES`` names each app's."""

    kind: str
    load: Callable[[list[int]], list[DocumentSpec]]  # the documents of the ids that exist
    ids_of_organization: Callable[[int], list[int]]  # every id of the kind in an organization
