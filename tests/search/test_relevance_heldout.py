"""The held-out relevance set is what it claims: its size, its judgments, its paraphrases, its hard
negatives, and a vocabulary of its own (tests/search/relevance_heldout.py)."""

from __future__ import annotations

from collections import Counter

from tests.search import relevance, relevance_heldout


def test_the_corpus_is_mixed_and_its_refs_unique():
    docs = relevance_heldout.corpus()
    assert len(docs) >= 350
    assert len({doc.ref for doc in docs}) == len(docs)
    kinds = Counter(doc.kind for doc in docs)
    assert kinds["item"] >= 250
    assert kinds["skill"] >= 10
    assert kinds["knowledge"] >= 60
    assert len(relevance_heldout.CORE) >= 60


def test_queries_are_many_graded_unique_and_point_at_documents():
    refs = {doc.ref for doc in relevance_heldout.corpus()}
    texts = [query.text for query in relevance_heldout.QUERIES]
    assert len(texts) >= 70
    assert len(set(texts)) == len(texts)  # hard negatives are looked up by the query's text
    for query in relevance_heldout.QUERIES:
        assert query.grades, query
        assert set(query.grades) <= refs, query
        assert set(query.grades.values()) <= {1, 2, 3}, query
        assert max(query.grades.values()) == 3, query
    families = Counter(query.family for query in relevance_heldout.QUERIES)
    assert set(families) == {"keyword", "paraphrase", "identifier", "natural"}
    assert families["paraphrase"] >= 25
    assert families["keyword"] >= 20
    assert families["identifier"] >= 8
    assert families["natural"] >= 15


def test_paraphrases_share_no_word_with_their_answers():
    docs = {doc.ref: doc for doc in relevance_heldout.corpus()}
    for query in relevance_heldout.QUERIES:
        if query.family == "paraphrase":
            for ref, grade in query.grades.items():
                if grade == 3:
                    assert relevance.shared_words(query, docs[ref]) == set(), (query.text, ref)


def test_hard_negatives_exist_are_never_graded_and_are_many():
    refs = {doc.ref for doc in relevance_heldout.corpus()}
    queries = {query.text: query for query in relevance_heldout.QUERIES}
    negatives = relevance_heldout.HARD_NEGATIVES
    assert len(negatives) >= 30
    for text, refs_of_query in negatives.items():
        assert text in queries, text
        assert refs_of_query, text
        assert refs_of_query <= refs, text
        assert not refs_of_query & set(queries[text].grades), text


def test_identifier_queries_name_item_keys():
    keys = relevance_heldout.item_keys()
    texts = [relevance.query_text(q, keys) for q in relevance_heldout.QUERIES if q.family == "identifier"]
    assert "SHOP-1" in texts
    assert all("SHOP-" in text and "{" not in text for text in texts)


def test_it_is_another_product_than_the_tuned_set():
    """Held out means new text: no document of the tuned set's hand-written ones reappears, and the
    queries are not the tuned set's."""
    tuned_titles = {doc.title for doc in relevance.CORE}
    assert not tuned_titles & {doc.title for doc in relevance_heldout.CORE}
    assert not {q.text for q in relevance.QUERIES} & {q.text for q in relevance_heldout.QUERIES}
    assert relevance_heldout.PROJECT_KEY != relevance.PROJECT_KEY
