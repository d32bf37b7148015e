"""planner/services/spend.py: estimated cost of metered use, today against the budget, and by day."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from ballet.env import ModelPrice
from planner.services.spend import daily_usage, estimated_cost, project_today, record_cost
from planner.usage_chart import cost_text, usage_chart, usd
from tests.planner.metering import metered, midnight
from tracker.services.activity import Actor
from tracker.services.projects import project_update


def test_cost_uses_all_four_prices(settings):
    settings.BALLET_PRICES = {"m": ModelPrice(Decimal(2), Decimal(10), Decimal(4), Decimal("0.5"))}
    cost = estimated_cost(
        model="m", input_tokens=1_000, output_tokens=2_000, cache_write_tokens=3_000, cache_read_tokens=4_000
    )
    assert cost == Decimal("0.036")  # (2000 + 20000 + 12000 + 2000) / 1e6
    assert estimated_cost(model="other", input_tokens=1, output_tokens=1) is None


def test_a_records_cost(project):
    record = metered(project, tokens=(1_000_000, 1_000_000, 0, 0))
    assert record_cost(record) == Decimal(18)
    assert record_cost(metered(project, tokens=(1, 1), model="nobody-prices-this")) is None


def test_today_sums_today_only_with_the_budget(project, owner, django_assert_max_num_queries):
    project_update(actor=Actor(user=owner), project=project, settings={"daily_token_budget": 2_000_000})
    metered(project, tokens=(1_000_000, 0, 100, 200))
    metered(project, tokens=(0, 100_000), model="claude-haiku-4-5")
    metered(project, tokens=(9_000_000, 0), at=midnight() - timedelta(seconds=1))

    with django_assert_max_num_queries(2):
        today = project_today(project=project)

    assert (today.date, today.tokens, today.budget, today.remaining) == (
        midnight().date(),
        1_100_300,  # cached input too: the provider processed it
        2_000_000,
        899_700,
    )
    assert today.fraction_used == pytest.approx(0.55015)
    assert (today.spend.cache_write_tokens, today.spend.cache_read_tokens) == (100, 200)
    # Sonnet: 1M input x $3, 100 cache writes x $3.75, 200 cache reads x $0.30; Haiku: 100k output x $5.
    assert today.spend.cost == Decimal("3") + Decimal("0.000375") + Decimal("0.00006") + Decimal("0.5")
    assert today.spend.unpriced is False


def test_unpriced_tokens_are_counted_and_flagged(project):
    metered(project, tokens=(100, 0), model="claude-unknown")
    today = project_today(project=project)
    assert (today.tokens, today.spend.cost, today.spend.unpriced) == (100, Decimal(0), True)
    assert cost_text(today.spend) == "cost unknown (a model without a price)"


def test_daily_usage_has_every_day_oldest_first(project, django_assert_num_queries):
    metered(project, tokens=(10, 5), at=midnight() - timedelta(days=2, hours=-3))
    metered(project, tokens=(1, 1), at=midnight() - timedelta(days=2, hours=-4), model="claude-haiku-4-5")
    metered(project, tokens=(7, 0))
    metered(project, tokens=(999, 999), at=midnight() - timedelta(days=5))  # before the window

    with django_assert_num_queries(1):
        days = daily_usage(project=project, days=3)

    assert [(d.day, d.spend.input_tokens, d.spend.output_tokens) for d in days] == [
        ((midnight() - timedelta(days=2)).date(), 11, 6),
        ((midnight() - timedelta(days=1)).date(), 0, 0),
        (midnight().date(), 7, 0),
    ]


def test_other_projects_usage_is_not_counted(project, other_project):
    metered(other_project, tokens=(500, 500))
    assert project_today(project=project).tokens == 0
    assert sum(d.spend.tokens for d in daily_usage(project=project)) == 0


def test_the_chart_scales_the_busiest_day_to_full_height(project):
    metered(project, tokens=(300, 100), at=midnight() - timedelta(days=1))
    metered(project, tokens=(100, 100))
    chart = usage_chart(daily_usage(project=project, days=3))
    empty, busiest, today = chart.bars
    assert (empty.input_height, empty.output_height) == (0, 0)
    assert (busiest.input_height, busiest.output_height, busiest.output_y) == (75.0, 25.0, 0.0)
    assert (today.input_height, today.output_height, today.input_y, today.output_y) == (
        25.0,
        25.0,
        75.0,
        50.0,
    )
    assert chart.peak == 400
    assert [bar.x for bar in chart.bars] == [1.0, 11.0, 21.0]


@pytest.mark.parametrize(
    ("amount", "text"),
    [("0", "$0.00"), ("0.004", "under $0.01"), ("1.005", "$1.00"), ("1234.5", "$1,234.50")],
)
def test_dollars_are_shown_to_the_cent(amount, text):
    assert usd(Decimal(amount)) == text
