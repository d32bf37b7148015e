"""The relevance set is what it claims: its size, its judgments, its paraphrases and identifiers."""

from __future__ import annotations

from collections import Counter

from tests.search import relevance


def test_the_corpus_is_large_and_mixed():
    docs = relevance.corpus()
    assert len(docs) >= 500
    assert len({doc.ref for doc in docs}) == len(docs)
    kinds = Counter(doc.kind for doc in docs)
    assert kinds["item"] >= 300
    assert kinds["skill"] >= 10
    assert kinds["knowledge"] >= 80


def test_queries_are_many_graded_and_point_at_documents():
    refs = {doc.ref for doc in relevance.corpus()}
    assert len(relevance.QUERIES) >= 60
    for query in relevance.QUERIES:
        assert query.grades, query
        assert set(query.grades) <= refs, query
        assert max(query.grades.values()) == 3, query
    families = Counter(query.family for query in relevance.QUERIES)
    assert families["paraphrase"] >= 20
    assert families["identifier"] >= 8


def test_paraphrases_share_no_word_with_their_answers():
    docs = {doc.ref: doc for doc in relevance.corpus()}
    for query in relevance.QUERIES:
        if query.family == "paraphrase":
            for ref, grade in query.grades.items():
                if grade == 3:
                    assert relevance.shared_words(query, docs[ref]) == set(), (query.text, ref)


def test_identifier_queries_name_item_keys():
    keys = relevance.item_keys()
    texts = [relevance.query_text(q, keys) for q in relevance.QUERIES if q.family == "identifier"]
    assert "DEMO-1" in texts
    assert all("DEMO-" in text and "{" not in text for text in texts)
