"""The project page's usage chart: tokens by day as bars of an inline SVG (pure, no ORM).

The page's CSP forbids inline styles, so everything is geometry attributes
computed here and classes styled in ``planner/usage.css``; the template only
writes numbers and dates (no text of anyone's into the SVG).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from planner.domain.services.spend import DaySpend, Spend, SpendToday

BAR_STEP = 10  # viewBox units per day: a bar and its gap
BAR_WIDTH = 8
PLOT_HEIGHT = 100
LEFT = 46  # room for the y axis: its title and the tick labels
TOP = 8  # room for the top tick's label
BOTTOM = 16  # room for the dates under the bars
RIGHT = 2
LABEL_EVERY = 7  # a date under every seventh day, and under the last


@dataclass(frozen=True)
class Bar:
    """One day: input (not cached) at the bottom, cached input above it, output on top; the three
    add up to the day's tokens, as the budget counts them."""

    day: DaySpend
    x: float
    input_y: float
    input_height: float
    cached_y: float
    cached_height: float
    output_y: float
    output_height: float

    @property
    def label(self) -> str:
        spend = self.day.spend
        return (
            f"{self.day.day.isoformat()}: {tokens_text(spend)}; {spend.input_tokens:,} input, "
            f"{spend.cached_tokens:,} cached, {spend.output_tokens:,} output; {cost_text(spend)}"
        )


@dataclass(frozen=True)
class Tick:
    """A value on the y axis: its label and the height of its grid line."""

    label: str
    y: float


@dataclass(frozen=True)
class DateLabel:
    """A date under the bars: where, anchored how (``start``, ``middle``, ``end``)."""

    text: str
    x: float
    anchor: str


@dataclass(frozen=True)
class UsageChart:
    bars: list[Bar]
    width: int
    height: int
    peak: int  # the largest day's tokens
    top: int  # the scale's top: a round number at or above the peak
    ticks: list[Tick]
    dates: list[DateLabel]
    total: Spend  # over every day shown

    @property
    def plot_bottom(self) -> int:
        return TOP + PLOT_HEIGHT

    @property
    def date_y(self) -> int:
        return TOP + PLOT_HEIGHT + BOTTOM - 3

    @property
    def axis_x(self) -> int:
        return LEFT

    @property
    def tick_x(self) -> int:
        return LEFT - 3

    @property
    def axis_title_y(self) -> float:
        return TOP + PLOT_HEIGHT / 2

    @property
    def description(self) -> str:
        """What the bars show, in words (the SVG's ``<desc>``)."""
        if not self.bars:
            return "No days to show."
        first, last = self.bars[0].day.day, self.bars[-1].day.day
        return (
            f"Stacked bars of input, cached input and output tokens per UTC day from {first.isoformat()} "
            f"to {last.isoformat()}, on a scale of 0 to {self.top:,} tokens. The busiest day had "
            f"{self.peak:,} tokens; {tokens_text(self.total)} in all, {cost_text(self.total)}."
        )

    @property
    def rows(self) -> list[tuple[str, int, int, int, int, str]]:
        """Day, input, cached, output and total tokens, and the cost: the table behind the chart."""
        return [
            (
                bar.day.day.isoformat(),
                bar.day.spend.input_tokens,
                bar.day.spend.cached_tokens,
                bar.day.spend.output_tokens,
                bar.day.spend.tokens,
                cost_text(bar.day.spend),
            )
            for bar in self.bars
        ]


def round_top(peak: int) -> int:
    """The smallest of 1, 2, 4 or 5 times a power of ten at or above ``peak`` (its half is round
    too), 10 at least."""
    top = 10
    while True:
        for step in (1, 2, 4, 5):
            if step * top >= peak:
                return step * top
        top *= 10


def short_number(value: int) -> str:
    """``value`` for a tick: 0, 800, 5k, 2.5k, 1.2M."""
    for size, unit in ((1_000_000, "M"), (1_000, "k")):
        if value >= size:
            return f"{value / size:.1f}".rstrip("0").rstrip(".") + unit
    return str(value)


def _scaled(tokens: int, top: int) -> float:
    return round(tokens * PLOT_HEIGHT / top, 2) if top else 0.0


def _bar(index: int, day: DaySpend, top: int) -> Bar:
    spend = day.spend
    heights = [_scaled(n, top) for n in (spend.input_tokens, spend.cached_tokens, spend.output_tokens)]
    bottom = TOP + PLOT_HEIGHT
    ys = [round(bottom - sum(heights[: n + 1]), 2) for n in range(3)]
    return Bar(
        day=day,
        x=LEFT + index * BAR_STEP + (BAR_STEP - BAR_WIDTH) / 2,
        input_y=ys[0],
        input_height=heights[0],
        cached_y=ys[1],
        cached_height=heights[1],
        output_y=ys[2],
        output_height=heights[2],
    )


def _dates(bars: list[Bar]) -> list[DateLabel]:
    shown = [n for n in range(len(bars)) if n % LABEL_EVERY == 0 and len(bars) - n > 3] + [len(bars) - 1]
    labels = []
    for n in shown if bars else []:
        bar = bars[n]
        anchor = "start" if n == 0 else "end" if n == len(bars) - 1 else "middle"
        x = {"start": bar.x, "middle": bar.x + BAR_WIDTH / 2, "end": bar.x + BAR_WIDTH}[anchor]
        labels.append(DateLabel(text=f"{bar.day.day.day} {bar.day.day:%b}", x=x, anchor=anchor))
    return labels


def usage_chart(days: list[DaySpend]) -> UsageChart:
    """Stacked bars on a round scale (0, its half, its top) with the days' dates under them."""
    peak = max((day.spend.tokens for day in days), default=0)
    top = round_top(peak)
    bars = [_bar(index, day, top) for index, day in enumerate(days)]
    ticks = [Tick(label=short_number(v), y=TOP + PLOT_HEIGHT - _scaled(v, top)) for v in (0, top // 2, top)]
    total = sum((day.spend for day in days), Spend())
    return UsageChart(
        bars=bars,
        width=LEFT + len(days) * BAR_STEP + RIGHT,
        height=TOP + PLOT_HEIGHT + BOTTOM,
        peak=peak,
        top=top,
        ticks=ticks,
        dates=_dates(bars),
        total=total,
    )


def tokens_text(spend: Spend) -> str:
    """ "12,400 tokens (9,800 cached)": every token, the cached input among them said apart."""
    text = f"{spend.tokens:,} tokens"
    return f"{text} ({spend.cached_tokens:,} cached)" if spend.cached_tokens else text


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
        tokens = tokens_text(today.spend)
        if today.budget is None:
            return f"{tokens} (no daily budget), {self.cost}."
        return f"{tokens} of the daily budget of {today.budget:,} ({self.percent_used}% used), {self.cost}."

    @property
    def percent_used(self) -> int | None:
        fraction = self.today.fraction_used
        return None if fraction is None else round(fraction * 100)


def today_figures(today: SpendToday) -> TodayFigures:
    return TodayFigures(today=today, cost=cost_text(today.spend))
