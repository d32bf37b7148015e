"""``projects/{key}/usage/``: metered use by day and model, and today's use against the budget (§ 12.4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone

from planner.gateway import CallRecord
from planner.messages import Usage
from planner.models import UsageRecord
from planner.services import usage_save
from tracker.services.activity import Actor
from tracker.services.projects import project_update


def metered(project, *, tokens: tuple[int, int], at: datetime | None = None) -> None:
    record = CallRecord("turn", "claude-sonnet-5-5", Usage(*tokens), 1.0, "ok")
    usage_save(project_id=project.pk, session_id=None, record=record)
    if at is not None:
        UsageRecord.objects.filter(pk=UsageRecord.objects.latest("pk").pk).update(created_at=at)


def midnight() -> datetime:
    return timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


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

    assert today == {"date": midnight().date().isoformat(), "tokens": 42, "budget": None, "remaining": None}


def test_the_schema_documents_todays_use(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    answer = schema["paths"]["/api/v1/projects/{key}/usage/"]["get"]["responses"]["200"]["content"]
    name = answer["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    properties = schema["components"]["schemas"][name]["properties"]
    assert set(properties) == {"results", "today"}
    today = schema["components"]["schemas"][properties["today"]["allOf"][0]["$ref"].rsplit("/", 1)[1]]
    assert set(today["properties"]) == {"date", "tokens", "budget", "remaining"}
