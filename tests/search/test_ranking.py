"""Ranking on a small fixed corpus with the real embedding model: key, meaning, words."""

from __future__ import annotations

import pytest

from knowledge.search import knowledge_search
from tests.search import corpus
from tracker.search import ITEM, KNOWLEDGE, SKILL, Mode, SearchScope, project_search, search
from tracker.search.query import WORD, _words


@pytest.fixture
def items(real_model, project, owner, indexed):
    with indexed():
        return corpus.build(project, owner)


def _scope(project) -> SearchScope:
    return SearchScope(
        organization_id=project.organization_id,
        kinds=frozenset({ITEM, SKILL, KNOWLEDGE}),
        project_id=project.pk,
    )


def _keys(project, query: str, mode: Mode = "hybrid") -> list[str]:
    return [hit.key for hit in search(scope=_scope(project), query=query, mode=mode)]


def test_an_exact_key_comes_first(project, items):
    rate_limit = items["rate"].key
    assert _keys(project, rate_limit)[0] == rate_limit
    hits = project_search(project=project, query=f"what blocks {rate_limit.lower()} and the dark theme")
    assert (hits[0].key, hits[0].score) == (rate_limit, 1.0)
    assert hits[1].key == items["dark"].key


def test_a_paraphrase_sharing_no_word_is_found_semantically(project, items):
    query = "customers locked out because the recovery mail does not show up"
    answer = items["password"]
    assert not set(_words(query)) & {w.lower() for w in WORD.findall(f"{answer.title} {answer.description}")}
    assert answer.key not in _keys(project, query, mode="lexical")
    assert _keys(project, query, mode="semantic")[0] == answer.key
    assert _keys(project, query)[0] == answer.key


def test_a_word_the_model_does_not_know_is_found_lexically(project, items):
    assert _keys(project, "zyxvorp", mode="lexical") == [items["upgrade"].key]
    assert _keys(project, "zyxvorp")[0] == items["upgrade"].key


def test_skills_and_knowledge_rank_by_meaning_too(project, items):
    assert _keys(project, "steps before we ship")[0] == corpus.SKILL[0]
    hits = knowledge_search(
        organization_id=project.organization_id, query="which database do we deploy", hidden=()
    )
    assert hits[0].title == corpus.KNOWLEDGE[0]


def test_hits_carry_kind_key_title_highlighted_snippet_and_score(project, items):
    hit = project_search(project=project, query="invoices spreadsheet")[0]
    assert (hit.kind, hit.key, hit.title, hit.state, hit.subkind) == (
        ITEM,
        items["export"].key,
        "Export invoices as CSV",
        "draft",
        "ticket",
    )
    assert hit.snippet == "Accountants download every **invoice** of a month as a **spreadsheet** file."
    assert 0 < hit.score <= 1


def test_unrelated_queries_find_nothing(project, items):
    assert _keys(project, "banana smoothie recipe") == []
