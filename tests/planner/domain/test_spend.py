"""planner/domain/services/spend.py: estimated cost of metered use, today against the budget, and by day."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from ballet.env import ModelPrice
from planner.domain.services.spend import Spend, daily_usage, estimated_cost, project_today, record_cost
from planner.web.usage_chart import cost_text, round_top, short_number, tokens_text, usage_chart, usd
from tests.planner.metering import metered, midnight
from tracker.services.activity import Actor
from tracker.services.projects import project_update


def test_cost_uses_all_four_prices(settings):
    settings.BALLET_PRICES = {"m": ModelPrice(Decimal(2), Decimal(10), Decimal(4), Decimal("0.5"))}
    cost = estimated_cost(
        model="m",
        input_tokens=1_000,
        output_tokens=2_000,
        cache_creation_input_tokens=3_000,
        cache_read_input_tokens=4_000,
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
    assert (today.spend.cache_creation_input_tokens, today.spend.cache_read_input_tokens) == (100, 200)
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


def test_the_bars_stack_input_cached_and_output_to_each_days_tokens_on_a_round_scale(project):
    metered(project, tokens=(300, 100, 40, 60), at=midnight() - timedelta(days=1))  # 500, 100 cached
    metered(project, tokens=(100, 100))
    chart = usage_chart(daily_usage(project=project, days=3))
    empty, busiest, today = chart.bars
    assert (chart.peak, chart.top) == (500, 500)
    assert (empty.input_height, empty.cached_height, empty.output_height) == (0, 0, 0)
    assert (busiest.input_height, busiest.cached_height, busiest.output_height) == (60.0, 20.0, 20.0)
    assert (busiest.input_y, busiest.cached_y, busiest.output_y) == (48.0, 28.0, 8.0)  # stacked up to the top
    for bar in chart.bars:  # each bar is its day's tokens, cached ones included
        drawn = bar.input_height + bar.cached_height + bar.output_height
        assert drawn == pytest.approx(bar.day.spend.tokens * 100 / chart.top)
    assert (today.input_height, today.output_height) == (20.0, 20.0)
    assert [bar.x for bar in chart.bars] == [47.0, 57.0, 67.0]
    assert "500 tokens (100 cached); 300 input, 100 cached, 100 output" in busiest.label


def test_the_axes_have_round_ticks_and_dates(project):
    metered(project, tokens=(12_000, 345))
    chart = usage_chart(daily_usage(project=project, days=30))
    assert [(tick.label, tick.y) for tick in chart.ticks] == [("0", 108), ("10k", 58), ("20k", 8)]
    first, last = chart.bars[0].day.day, chart.bars[-1].day.day
    dates = [(d.text, d.anchor) for d in chart.dates]
    assert len(dates) == 5  # every seventh day, and today
    assert dates[0] == (f"{first.day} {first:%b}", "start")
    assert dates[-1] == (f"{last.day} {last:%b}", "end")
    assert "on a scale of 0 to 20,000 tokens" in chart.description


@pytest.mark.parametrize(
    ("peak", "top"), [(0, 10), (7, 10), (11, 20), (345, 400), (401, 500), (12_345, 20_000), (50_001, 100_000)]
)
def test_the_scale_tops_out_at_a_round_number(peak, top):
    assert round_top(peak) == top


@pytest.mark.parametrize(
    ("value", "text"), [(0, "0"), (800, "800"), (5_000, "5k"), (2_500, "2.5k"), (1_200_000, "1.2M")]
)
def test_ticks_are_short(value, text):
    assert short_number(value) == text


def test_tokens_say_the_cached_apart_and_add_up():
    assert tokens_text(
        Spend(
            input_tokens=2_000,
            output_tokens=600,
            cache_read_input_tokens=9_000,
            cache_creation_input_tokens=800,
        )
    ) == ("12,400 tokens (9,800 cached)")
    assert tokens_text(Spend(input_tokens=10, output_tokens=5)) == "15 tokens"


@pytest.mark.parametrize(
    ("amount", "text"),
    [("0", "$0.00"), ("0.004", "under $0.01"), ("1.005", "$1.00"), ("1234.5", "$1,234.50")],
)
def test_dollars_are_shown_to_the_cent(amount, text):
    assert usd(Decimal(amount)) == text
