"""The project page's usage section: an SVG chart of the last 30 days and today against the budget."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from tests.factories import MembershipFactory, UserFactory
from tests.planner.metering import metered, midnight
from tracker.models import Role
from tracker.services.activity import Actor
from tracker.services.projects import project_update

PAGE = "/projects/BAL/chat/"


def usage_section(response) -> str:
    found = re.search(r'<section class="usage".*?</section>', response.content.decode(), re.S)
    assert found, "no usage section"
    return found.group(0)


def bars(section: str) -> dict[str, tuple[int, int, int]]:
    """Input, cached and output tokens per day, as the chart's bars carry them."""
    return {
        day: (int(inp), int(cached), int(out))
        for day, inp, cached, out in re.findall(
            r'class="usage-day" data-day="([\d-]+)" '
            r'data-input="(\d+)" data-cached="(\d+)" data-output="(\d+)"',
            section,
        )
    }


def table_rows(section: str) -> dict[str, tuple[int, int, int, int, str]]:
    rows = re.findall(
        r'<tr><th scope="row">([\d-]+)</th>'
        r"<td>(\d+)</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td><td>([^<]*)</td></tr>",
        section,
    )
    return {day: (int(i), int(c), int(o), int(t), cost) for day, i, c, o, t, cost in rows}


def test_the_chart_shows_the_last_30_days_as_the_records_say(client: Client, project, member, owner):
    project_update(actor=Actor(user=owner), project=project, settings={"daily_token_budget": 10_000})
    metered(project, tokens=(1_200, 300))
    metered(project, tokens=(800, 200), model="claude-haiku-4-5")
    metered(project, tokens=(5_000, 1_000), at=midnight() - timedelta(days=3, hours=-5))
    metered(project, tokens=(77, 77), at=midnight() - timedelta(days=30))  # 31 days ago: not shown
    client.force_login(member)

    section = usage_section(client.get(PAGE))

    today, three_days_ago = midnight().date().isoformat(), (midnight() - timedelta(days=3)).date().isoformat()
    shown = bars(section)
    assert len(shown) == 30
    assert shown[today] == (2_000, 0, 500)
    assert shown[three_days_ago] == (5_000, 0, 1_000)
    assert sum(sum(day) for day in shown.values()) == 8_500
    assert table_rows(section)[today] == (2_000, 0, 500, 2_500, "under $0.01")  # $0.0081 + $0.0018
    assert table_rows(section)[three_days_ago] == (5_000, 0, 1_000, 6_000, "about $0.03")
    assert '<svg class="usage-svg"' in section
    assert 'role="img"' in section
    assert '<title id="usage-chart-title">' in section
    assert "Today (UTC): 2,500 tokens of the daily budget of 10,000 (25% used), under $0.01." in section
    assert '<meter class="usage-meter" min="0" max="10000" value="2500"' in section


def test_cached_tokens_are_drawn_and_counted_apart_and_add_up(client: Client, project, member):
    metered(project, tokens=(2_000, 600, 800, 9_000))  # 12,400 tokens, 9,800 of them cached
    client.force_login(member)

    section = usage_section(client.get(PAGE))

    today = midnight().date().isoformat()
    assert bars(section)[today] == (2_000, 9_800, 600)
    assert table_rows(section)[today][:4] == (2_000, 9_800, 600, 12_400)
    assert "Today (UTC): 12,400 tokens (9,800 cached) (no daily budget)" in section
    assert f"<title>{today}: 12,400 tokens (9,800 cached); 2,000 input, 9,800 cached, 600 output;" in section


def test_the_busiest_day_fills_the_chart_on_labelled_axes(client: Client, project, member):
    metered(project, tokens=(300, 100), at=midnight() - timedelta(days=1))
    metered(project, tokens=(100, 100))
    client.force_login(member)

    section = usage_section(client.get(PAGE))

    heights = re.findall(
        r'<rect class="usage-bar-(input|cached|output)" x="[\d.]+" y="([\d.]+)" width="8" height="([\d.]+)"',
        section,
    )
    drawn = [(kind, float(y), float(h)) for kind, y, h in heights if float(h)]
    assert drawn == [  # a scale of 0 to 400 tokens, 100 units high, from y = 8
        ("input", 33.0, 75.0),
        ("output", 8.0, 25.0),
        ("input", 83.0, 25.0),
        ("output", 58.0, 25.0),
    ]
    ticks = re.findall(r'<text class="usage-tick" [^>]*>([^<]+)</text>', section)
    assert ticks == ["0", "200", "400"]
    dates = re.findall(r'<text class="usage-tick usage-date" [^>]*>([^<]+)</text>', section)
    assert len(dates) == 5
    assert dates[-1] == f"{midnight().day} {midnight():%b}"
    assert ">tokens</text>" in section  # the y axis says what it counts


def test_without_a_budget_the_page_says_so_and_has_no_meter(client: Client, project, viewer):
    metered(project, tokens=(40, 2), model="claude-unknown")
    client.force_login(viewer)

    section = usage_section(client.get(PAGE))

    assert "Today (UTC): 42 tokens (no daily budget), cost unknown (a model without a price)." in section
    assert "<meter" not in section


def test_no_inline_style_on_the_page(client: Client, project, member):
    metered(project, tokens=(10, 10))
    client.force_login(member)
    response = client.get(PAGE)
    html = response.content.decode()
    assert "style=" not in html
    assert "<style" not in html
    assert "style-src 'self'" in response["Content-Security-Policy"]


@pytest.mark.parametrize("who", ["stranger", "other_project_owner", "removed"])
def test_usage_is_not_shown_to_those_who_cannot_read_the_project(
    client: Client, project, users, other_project, who
):
    metered(project, tokens=(4_321, 1))
    if who == "other_project_owner":
        user: Any = UserFactory(username="elsewhere")
        MembershipFactory(project=other_project, user=user, role=Role.OWNER)
    elif who == "removed":
        user = users["member"]
        user.memberships.filter(project=project).delete()
    else:
        user = users[who]
    client.force_login(user)

    response = client.get(PAGE)

    assert response.status_code == 404
    assert "4322" not in response.content.decode()
    assert "4,322" not in response.content.decode()
