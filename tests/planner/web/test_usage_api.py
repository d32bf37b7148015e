"""``projects/{key}/usage/``: metered use by day and model, and today's use against the
budget (docs/trust.md)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from ballet.env import ModelPrice
from tests.factories import MembershipFactory, UserFactory
from tests.planner.metering import metered, midnight
from tracker.models import Role
from tracker.services.activity import Actor
from tracker.services.projects import project_update


def test_usage_shows_today_against_the_budget(client_for, project, owner, member):
    project_update(actor=Actor(user=owner), project=project, settings={"daily_token_budget": 1000})
    metered(project, tokens=(250, 50))
    metered(project, tokens=(5000, 500), at=midnight() - timedelta(seconds=1))

    response = client_for(member).get("/api/v1/projects/BAL/usage/")

    assert response.status_code == 200
    body = response.json()
    assert body["today"] == {
        "date": midnight().date().isoformat(),
        "tokens": 300,
        "budget": 1000,
        "remaining": 700,
        "fraction_used": 0.3,
        "input_tokens": 250,
        "output_tokens": 50,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cached_tokens": 0,
        "estimated_cost": 0.0015,  # 250 x $3 + 50 x $15 per million
        "unpriced": False,
    }
    assert [(row["day"], row["input_tokens"]) for row in body["results"]] == [
        (midnight().date().isoformat(), 250),
        ((midnight() - timedelta(days=1)).date().isoformat(), 5000),
    ]


def test_the_day_starts_at_midnight_utc(client_for, project, owner, member):
    project_update(actor=Actor(user=owner), project=project, settings={"daily_token_budget": 1000})
    metered(project, tokens=(10, 0), at=midnight())
    metered(project, tokens=(700, 0), at=midnight() - timedelta(microseconds=1))

    today = client_for(member).get("/api/v1/projects/BAL/usage/").json()["today"]

    assert (today["tokens"], today["remaining"]) == (10, 990)


def test_a_used_up_budget_has_nothing_remaining(client_for, project, owner, member):
    project_update(actor=Actor(user=owner), project=project, settings={"daily_token_budget": 1000})
    metered(project, tokens=(1200, 300))

    today = client_for(member).get("/api/v1/projects/BAL/usage/").json()["today"]

    assert (today["tokens"], today["budget"], today["remaining"]) == (1500, 1000, 0)


def test_without_a_budget_there_is_no_remaining(client_for, project, member):
    metered(project, tokens=(40, 2))

    today = client_for(member).get("/api/v1/projects/BAL/usage/").json()["today"]

    figures = (today["tokens"], today["budget"], today["remaining"], today["fraction_used"])
    assert figures == (42, None, None, None)


def test_the_schema_documents_todays_use(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    answer = schema["paths"]["/api/v1/projects/{key}/usage/"]["get"]["responses"]["200"]["content"]
    name = answer["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    properties = schema["components"]["schemas"][name]["properties"]
    assert set(properties) == {"results", "today"}
    today = schema["components"]["schemas"][properties["today"]["allOf"][0]["$ref"].rsplit("/", 1)[1]]
    assert set(today["properties"]) >= {"date", "tokens", "budget", "remaining", "estimated_cost", "unpriced"}
    row = schema["components"]["schemas"][properties["results"]["items"]["$ref"].rsplit("/", 1)[1]]
    assert "estimated_cost" in row["properties"]


def test_each_row_and_today_carry_the_estimated_cost(client_for, project, member):
    metered(project, tokens=(1_000_000, 100_000, 200_000, 2_000_000))  # 3 + 1.5 + 0.75 + 0.6
    metered(project, tokens=(1_000_000, 0), model="claude-haiku-4-5")  # 1
    metered(project, tokens=(1_000_000, 0), model="claude-sonnet-5-5", at=midnight() - timedelta(hours=1))

    body = client_for(member).get("/api/v1/projects/BAL/usage/").json()

    costs = [(row["day"], row["model"], row["estimated_cost"]) for row in body["results"]]
    yesterday = (midnight() - timedelta(days=1)).date().isoformat()
    assert costs == [
        (midnight().date().isoformat(), "claude-haiku-4-5", pytest.approx(1.0)),
        (midnight().date().isoformat(), "claude-sonnet-5-5", pytest.approx(5.85)),
        (yesterday, "claude-sonnet-5-5", pytest.approx(3.0)),
    ]
    assert body["today"]["estimated_cost"] == pytest.approx(6.85)
    assert (body["today"]["cache_creation_input_tokens"], body["today"]["cache_read_input_tokens"]) == (
        200_000,
        2_000_000,
    )


def test_a_model_without_a_price_shows_tokens_and_no_cost(client_for, project, member):
    metered(project, tokens=(500, 20), model="claude-unknown-model")
    metered(project, tokens=(1_000_000, 0))

    body = client_for(member).get("/api/v1/projects/BAL/usage/").json()

    unknown = next(row for row in body["results"] if row["model"] == "claude-unknown-model")
    assert (unknown["input_tokens"], unknown["estimated_cost"]) == (500, None)
    assert body["today"]["tokens"] == 1_000_520
    assert body["today"]["estimated_cost"] == pytest.approx(3.0)
    assert body["today"]["unpriced"] is True


def test_configured_prices_replace_the_defaults(client_for, project, member, settings):
    settings.BALLET_PRICES = {"claude-sonnet-5-5": ModelPrice(*(Decimal(n) for n in ("10", "20", "0", "0")))}
    metered(project, tokens=(100_000, 100_000))

    today = client_for(member).get("/api/v1/projects/BAL/usage/").json()["today"]

    assert today["estimated_cost"] == pytest.approx(3.0)


@pytest.mark.parametrize("who", ["stranger", "anonymous", "other_project_owner"])
def test_usage_is_hidden_from_outsiders(client_for, project, users, other_project, who):
    metered(project, tokens=(10, 10))
    if who == "other_project_owner":
        user = UserFactory(username="elsewhere")
        MembershipFactory(project=other_project, user=user, role=Role.OWNER)
    else:
        user = users.get(who)

    response = client_for(user).get("/api/v1/projects/BAL/usage/")

    assert response.status_code in ({401, 403} if who == "anonymous" else {404})
    assert "tokens" not in response.content.decode()


def test_a_viewer_reads_the_usage(client_for, project, viewer):
    metered(project, tokens=(7, 3))

    response = client_for(viewer).get("/api/v1/projects/BAL/usage/")

    assert (response.status_code, response.json()["today"]["tokens"]) == (200, 10)
