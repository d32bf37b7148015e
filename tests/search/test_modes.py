"""The embedded (SQLite FTS5) and production (PostgreSQL) modes agree on the top results.

The suite runs once per mode; both runs must find these same top three
titles, lexical alone and fused, for each query of the small corpus.
"""

from __future__ import annotations

import pytest

from tests.search import corpus
from tracker.search import ITEM, KNOWLEDGE, SKILL, SearchScope, search

PASSWORD, EXPORT, DARK, RATE, FLAKY, UPGRADE, ONBOARDING = (title for title, _ in corpus.ITEMS)
SKILL_NAME, POSTGRES = corpus.SKILL[0], corpus.KNOWLEDGE[0]

CASES = [
    ("invoices", [EXPORT], [EXPORT]),
    ("exporting an invoice", [EXPORT], [EXPORT]),
    ("dark or rate", [DARK, RATE], [DARK, RATE]),
    ('"reset link"', [PASSWORD], [PASSWORD]),
    ("reset -password", [], []),
    ("the build server", [FLAKY], [FLAKY, POSTGRES, ONBOARDING]),
    ("client library credentials", [UPGRADE], [UPGRADE]),
    ("requests per minute", [RATE], [RATE]),
    ("postgresql", [POSTGRES], [POSTGRES]),
    ("release changelog", [SKILL_NAME], [SKILL_NAME]),  # the onboarding checklist is too far to show
    ("emails are not delivered", [PASSWORD], [PASSWORD]),
    ("slow checkout", [], [FLAKY, RATE]),
    ("invite teammates", [ONBOARDING], [ONBOARDING]),
]


@pytest.fixture
def scope(real_model, project, owner, indexed) -> SearchScope:
    with indexed():
        corpus.build(project, owner)
    return SearchScope(
        organization_id=project.organization_id,
        kinds=frozenset({ITEM, SKILL, KNOWLEDGE}),
        project_id=project.pk,
    )


def test_both_modes_find_the_same_top_results(scope):
    found = {
        query: (
            [hit.title for hit in search(scope=scope, query=query, mode="lexical", limit=3)],
            [hit.title for hit in search(scope=scope, query=query, limit=3)],
        )
        for query, _, _ in CASES
    }
    assert found == {query: (lexical, hybrid) for query, lexical, hybrid in CASES}
