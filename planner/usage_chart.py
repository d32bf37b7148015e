"""The project page's usage chart: tokens by day as bars of an inline SVG (pure, no ORM).

The page's CSP forbids inline styles, so everything is geometry attributes
computed here and classes styled in ``planner/usage.css``; the template only
writes numbers and dates (no text of anyone's into the SVG).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from planner.services.spend import DaySpend, Spend, SpendToday

BAR_STEP = 10  # viewBox units per day: a bar and its gap
BAR_WIDTH = 8
PLOT_HEIGHT = 100


@dataclass(frozen=True)
class Bar:
    day: DaySpend
    x: float
    input_y: float
    input_height: float
    output_y: float
    output_height: float

    @property
    def label(self) -> str:
        spend = self.day.spend
        return (
            f"{self.day.day.isoformat()}: {spend.tokens:,} tokens "
            f"({spend.input_tokens:,} input, {spend.output_tokens:,} output), {cost_text(spend)}"
        )


@dataclass(frozen=True)
class UsageChart:
    bars: list[Bar]
    width: int
    height: int
    peak: int  # the largest day's tokens: the top of the scale
    total: Spend  # over every day shown

    @property
    def description(self) -> str:
        """What the bars show, in words (the SVG's ``<desc>``)."""
        if not self.bars:
            return "No days to show."
        first, last = self.bars[0].day.day, self.bars[-1].day.day
        return (
            f"Stacked bars of input and output tokens per UTC day from {first.isoformat()} to "
            f"{last.isoformat()}. The busiest day had {self.peak:,} tokens; "
            f"{self.total.tokens:,} tokens in all, {cost_text(self.total)}."
        )

    @property
    def rows(self) -> list[tuple[str, int, int, int, str]]:
        """Day, input, output, total tokens and cost text: the table behind the chart."""
        return [
            (
                bar.day.day.isoformat(),
                bar.day.spend.input_tokens,
                bar.day.spend.output_tokens,
                bar.day.spend.tokens,
                cost_text(bar.day.spend),
            )
            for bar in self.bars
        ]


def _scaled(tokens: int, peak: int) -> float:
    return round(tokens * PLOT_HEIGHT / peak, 2) if peak else 0.0


def usage_chart(days: list[DaySpend]) -> UsageChart:
    """Stacked bars, input below output, scaled so the busiest day fills the height."""
    peak = max((day.spend.tokens for day in days), default=0)
    bars = []
    total = Spend()
    for index, day in enumerate(days):
        input_height = _scaled(day.spend.input_tokens, peak)
        output_height = _scaled(day.spend.output_tokens, peak)
        bars.append(
            Bar(
                day=day,
                x=index * BAR_STEP + (BAR_STEP - BAR_WIDTH) / 2,
                input_y=round(PLOT_HEIGHT - input_height, 2),
                input_height=input_height,
                output_y=round(PLOT_HEIGHT - input_height - output_height, 2),
                output_height=output_height,
            )
        )
        total += day.spend
    return UsageChart(bars=bars, width=len(days) * BAR_STEP, height=PLOT_HEIGHT, peak=peak, total=total)


def usd(amount: Decimal) -> str:
    """Dollars to the cent; a small nonzero amount is "under $0.01", never "$0.00"."""
    if 0 < amount < Decimal("0.01"):
        return "under $0.01"
    return f"${amount.quantize(Decimal('0.01')):,}"


def cost_text(spend: Spend) -> str:
    """The estimated cost as a reader should take it: exact, a lower bound, or unknown."""
    if spend.unpriced and not spend.cost:
        return "cost unknown (a model without a price)"
    text = usd(spend.cost) if spend.cost < Decimal("0.01") else f"about {usd(spend.cost)}"
    return f"{text} plus tokens of unpriced models" if spend.unpriced else text


@dataclass(frozen=True)
class TodayFigures:
    """Today's line of the usage section: tokens, the budget and the cost, as text and a meter."""

    today: SpendToday
    cost: str

    @property
    def text(self) -> str:
        today = self.today
        tokens = f"{today.tokens:,} tokens"
        if today.budget is None:
            return f"{tokens} (no daily budget), {self.cost}."
        return f"{tokens} of the daily budget of {today.budget:,} ({self.percent_used}% used), {self.cost}."

    @property
    def percent_used(self) -> int | None:
        fraction = self.today.fraction_used
        return None if fraction is None else round(fraction * 100)


def today_figures(today: SpendToday) -> TodayFigures:
    return TodayFigures(today=today, cost=cost_text(today.spend))
