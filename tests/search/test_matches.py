"""What a search calls a match (docs/search.md#matches-and-related): its rule, and the seeded demo's
searches with the real model, where "export" once listed the launch milestone, the project
skeleton and the sign-in epic as best matches after the export ticket."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from tracker.models import Project
from tracker.search import project_search
from tracker.search.evidence import (
    BEHIND_BEST,
    LEXICAL_SUPPORT,
    SEMANTIC_MATCH,
    SEMANTIC_RELATED,
    Evidence,
    Standing,
    standing,
    title_has,
)

MATCH, RELATED, CUT = Standing.MATCH, Standing.RELATED, Standing.CUT


def judged(
    *, similarity: float | None, best: float | None = None, named: bool = False, words: int = 1, **found
):
    evidence = Evidence(
        exact=found.get("exact", False),
        lexical=found.get("lexical", False),
        in_title=found.get("in_title", False),
        similarity=similarity,
    )
    return standing(evidence, best_similarity=best, named=named, words=words)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ({"exact": True, "similarity": 0.0}, MATCH),
        ({"lexical": True, "in_title": True, "similarity": 0.0}, MATCH),  # its title holds the word
        ({"lexical": True, "similarity": LEXICAL_SUPPORT}, MATCH),  # the model agrees
        ({"lexical": True, "similarity": LEXICAL_SUPPORT - 0.01}, RELATED),  # a mention in the body
        ({"lexical": True, "similarity": 0.0, "words": 2}, MATCH),  # every one of two words found
        ({"lexical": True, "similarity": None}, MATCH),  # lexical mode: no model to ask
        ({"similarity": None}, CUT),
        ({"similarity": SEMANTIC_MATCH, "best": SEMANTIC_MATCH}, MATCH),  # the model alone, the best
        ({"similarity": SEMANTIC_MATCH, "best": SEMANTIC_MATCH + BEHIND_BEST}, MATCH),
        ({"similarity": 0.5, "best": 0.5 + BEHIND_BEST + 0.01}, RELATED),  # far behind the best
        ({"similarity": SEMANTIC_MATCH - 0.01, "best": SEMANTIC_MATCH - 0.01}, RELATED),  # not close
        ({"similarity": SEMANTIC_RELATED - 0.01, "best": 0.3}, CUT),
        # A query that names an item matches that item only; the rest is related at most.
        ({"lexical": True, "in_title": True, "similarity": 0.9, "named": True}, RELATED),
        ({"similarity": 0.9, "best": 0.9, "named": True}, RELATED),
        ({"similarity": SEMANTIC_RELATED - 0.01, "named": True}, CUT),
    ],
)
def test_a_hit_is_judged_on_its_own_evidence(case, expected):
    assert judged(**case) is expected


def test_a_title_holds_a_word_whatever_its_ending():
    assert title_has("Export a week's bookings as CSV", ("exporting",))
    assert title_has("Reject double bookings", ("booking",))
    assert not title_has("Public launch", ("export",))


@pytest.fixture
def demo(db, real_model, indexed) -> Project:
    with indexed():
        call_command("seed_demo", stdout=StringIO())
    return Project.objects.get(key="DEMO")


def _matches(project: Project, query: str) -> tuple[list[str], list[str]]:
    hits = project_search(project=project, query=query)
    return [h.title for h in hits if not h.related], [h.title for h in hits if h.related]


def test_the_demos_export_search_matches_the_export_ticket_only(demo):
    export = "Export a week's bookings as CSV for the front desk"
    matches, related = _matches(demo, "export")
    assert matches == [export]
    # The launch milestone mentions the export in its description: related, after the match.
    assert related == ["Public launch"]
    matches, _ = _matches(demo, "find export")  # "find" is in no ticket: the model and the title agree
    assert matches == [export]


def test_the_demos_searches_in_plain_words_still_find_their_tickets(demo):
    matches, _ = _matches(demo, "how do people pay")
    assert matches[0] == "Pay the guest fee by card with Stripe Checkout"
    matches, _ = _matches(demo, "sign in")
    assert set(matches) == {
        "Accounts and sign-in",
        "Sign up with email and password, with email verification",
    }
    assert "Public launch" not in matches


def test_a_search_that_names_an_item_matches_that_item(demo):
    export = Project.objects.get(key="DEMO").items.get(title__startswith="Export")
    hits = project_search(project=demo, query=f"status of {export.key}")
    assert [(h.key, h.related) for h in hits][:1] == [(export.key, False)]
    assert all(h.related for h in hits[1:])


def test_nothing_near_the_query_is_an_empty_answer(demo):
    assert project_search(project=demo, query="quantum chromodynamics lattice") == []
