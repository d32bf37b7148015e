"""Web-search syntax, its FTS5 translation, snippets and rank fusion: pure functions."""

from __future__ import annotations

import pytest

from tracker.search.fusion import Ranking, reciprocal_rank_fusion
from tracker.search.lexical_sqlite import fts_query
from tracker.search.query import parse_query, snippet


@pytest.mark.parametrize(
    ("query", "expression"),
    [
        ("how do users sign in", '"users" AND "sign"'),
        ("login or sso password -ldap", '(("login" OR "sso") AND "password") NOT "ldap"'),
        ('"reset link" email', '"reset link" AND "email"'),
        ('say "hi" -"dark mode"', '("say" AND "hi") NOT "dark mode"'),
        ('quote"inside', '"quote" AND "inside"'),
    ],
)
def test_web_search_syntax_becomes_fts5(query, expression):
    assert fts_query(parse_query(query)) == expression


def test_identifiers_are_noted_and_dropped_once_found():
    parsed = parse_query("what blocks bal-12 and utf-8?")
    assert parsed.identifiers == ("BAL-12", "UTF-8")
    assert parsed.words == ("blocks", "bal", "12", "utf", "8")
    dropped = parse_query("what blocks bal-12 and utf-8?", drop=frozenset({"BAL-12"}))
    assert (dropped.words, dropped.text) == (("blocks", "utf", "8"), "what blocks and utf-8?")
    assert parse_query("(see BAL-3).").identifiers == ("BAL-3",)


def test_stop_words_and_operators_alone_ask_for_nothing():
    assert parse_query("or the and").is_empty
    assert parse_query("-spam").groups == ()
    assert not parse_query("DEMO-1").is_empty


def test_snippet_marks_stems_around_the_first_match():
    text = "Intro. " * 40 + "The **login** form logs every failed Logins attempt."
    result = snippet(text, ("logins", "attempts"))
    assert result.startswith("…")
    assert "**login** form logs every failed **Logins** **attempt**." in result
    assert snippet("Short text", ()) == "Short text"


def test_reciprocal_rank_fusion_rewards_agreement():
    fused = reciprocal_rank_fusion([Ranking([1, 2, 3]), Ranking([3, 1])])
    assert [doc for doc, _ in fused] == [1, 3, 2]
    assert fused[0][1] == pytest.approx((1 / 61 + 1 / 62) / (2 / 61))
    assert reciprocal_rank_fusion([Ranking([7]), Ranking([7])]) == [(7, 1.0)]
    assert reciprocal_rank_fusion([Ranking([]), Ranking([5, 6])])[0] == (5, 0.5)


def test_a_lighter_ranking_counts_less():
    fused = reciprocal_rank_fusion([Ranking([1, 2]), Ranking([2], weight=0.5)])
    assert [doc for doc, _ in fused] == [2, 1]
    assert fused[0][1] == pytest.approx((1 / 62 + 0.5 / 61) / (1.5 / 61))
