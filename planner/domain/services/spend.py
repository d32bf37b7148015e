"""What a project's metered model use is estimated to cost, today and by day (selectors).

Costs come from the price table in configuration (``[prices."MODEL-ID"]``,
``settings.BALLET_PRICES``): list prices in USD per million tokens, estimates an
operator adjusts. Tokens of a model without a price are counted but not priced;
the results say so (``unpriced``) instead of pretending they were free.

The day is the UTC day, as for the daily token budget (docs/trust.md#limits), and
"tokens" against the budget are every token processed, cached input included, as the
budget counts them (``planner/live/session_io.py``). Each selector is one query.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from ballet.env import ModelPrice
from planner.agent.demo import DEMO_MODEL
from planner.domain.selectors import context_estimate, usage_by_day, utc_day_start
from planner.models import Session, UsageRecord
from tracker.models import Project
from tracker.selectors import project_planner_config

MILLION = Decimal(1_000_000)
# The token counts as a Spend (and estimated_cost) names them, and the usage record's fields.
_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_creation_input_tokens": "cache_creation_input_tokens",
    "cache_read_input_tokens": "cache_read_input_tokens",
}
_SUMS = {name: Sum(field) for name, field in _FIELDS.items()}


FREE = ModelPrice(Decimal(0), Decimal(0), Decimal(0), Decimal(0))


def price_of(model: str) -> ModelPrice | None:
    """The configured price of ``model``; None: unknown, its cost cannot be estimated. The demo
    planner costs nothing (docs/architecture.md#the-demo-planner)."""
    if model == DEMO_MODEL:
        return FREE
    prices: dict[str, ModelPrice] = settings.BALLET_PRICES
    return prices.get(model)


def estimated_cost(
    *,
    model: str,
    input_tokens: int,
    output_tokens: int,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> Decimal | None:
    """USD the tokens of one model cost at the configured prices; None if it has no price."""
    price = price_of(model)
    if price is None:
        return None
    total = (
        input_tokens * price.input
        + output_tokens * price.output
        + cache_creation_input_tokens * price.cache_write
        + cache_read_input_tokens * price.cache_read
    )
    return total / MILLION


def record_cost(record: UsageRecord) -> Decimal | None:
    """The estimated cost of one usage record (the admin's column)."""
    return estimated_cost(model=record.model, **{name: getattr(record, f) for name, f in _FIELDS.items()})


@dataclass(frozen=True)
class Spend:
    """Tokens of some metered calls and what the priced ones cost."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost: Decimal = Decimal(0)  # of the priced models' tokens only
    unpriced: bool = False  # some tokens are of a model without a price: cost is a lower bound

    @property
    def tokens(self) -> int:
        """Every token processed, cached input included: what the daily budget counts."""
        return self.input_tokens + self.output_tokens + self.cached_tokens

    @property
    def cached_tokens(self) -> int:
        """The input written to and read from the prompt cache (priced apart from plain input)."""
        return self.cache_creation_input_tokens + self.cache_read_input_tokens

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cost=self.cost + other.cost,
            unpriced=self.unpriced or other.unpriced,
        )

    def plus(self, *, model: str, sums: dict[str, int | None]) -> Spend:
        """This spend with one model's summed tokens added."""
        counts = {name: int(sums.get(name) or 0) for name in _FIELDS}
        cost = estimated_cost(model=model, **counts)
        unpriced = cost is None and any(counts.values())
        return self + Spend(**counts, cost=cost or Decimal(0), unpriced=unpriced)


def _summed(rows: Iterable[dict[str, Any]]) -> Spend:
    """The spend of rows of ``_SUMS`` per model, each priced as its model is."""
    spend = Spend()
    for row in rows:
        spend = spend.plus(model=row["model"], sums=row)
    return spend


@dataclass(frozen=True)
class SpendToday:
    """A project's use on the current UTC day, against its daily token budget."""

    date: date
    spend: Spend
    budget: int | None  # daily_token_budget; None: no budget

    @property
    def tokens(self) -> int:
        return self.spend.tokens

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else max(0, self.budget - self.tokens)

    @property
    def fraction_used(self) -> float | None:
        """Share of the budget used (may pass 1.0: a call in flight finishes); None without one."""
        return None if self.budget is None else self.tokens / self.budget


def project_today(*, project: Project) -> SpendToday:
    """Today's (UTC) tokens, estimated cost and budget of ``project``: one query."""
    start = utc_day_start(timezone.now())
    rows = (
        UsageRecord.objects.filter(project=project, created_at__gte=start)
        .values("model")
        .annotate(**_SUMS)
        .order_by("model")
    )
    spend = _summed(rows)
    budget = project_planner_config(project).daily_token_budget
    return SpendToday(date=start.date(), spend=spend, budget=budget)


@dataclass(frozen=True)
class DaySpend:
    day: date
    spend: Spend


def daily_usage(*, project: Project, days: int = 30) -> list[DaySpend]:
    """The last ``days`` UTC days of ``project``, oldest first, every day present (zero if
    unused): one query, grouped by day and model."""
    today = utc_day_start(timezone.now())
    first = today - timedelta(days=days - 1)
    rows = (
        UsageRecord.objects.filter(project=project, created_at__gte=first)
        .annotate(day=TruncDate("created_at"))  # TIME_ZONE is UTC: the UTC day
        .values("day", "model")
        .annotate(**_SUMS)
        .order_by("day", "model")
    )
    by_day = {first.date() + timedelta(days=n): Spend() for n in range(days)}
    for row in rows:
        if row["day"] in by_day:
            by_day[row["day"]] = by_day[row["day"]].plus(model=row["model"], sums=row)
    return [DaySpend(day=day, spend=spend) for day, spend in by_day.items()]


def usage_rows_priced(*, project: Project, since: date | None = None) -> list[dict[str, Any]]:
    """``usage_by_day``'s rows (per day and model), each with its ``estimated_cost`` (None: no price)."""
    rows = usage_by_day(project=project, since=since)
    for row in rows:
        row["estimated_cost"] = estimated_cost(model=row["model"], **{n: row[f] for n, f in _FIELDS.items()})
    return rows


def session_spend(*, session: Session) -> Spend:
    """Every metered call of one chat (its turns, compactions and title), priced: one query."""
    rows = UsageRecord.objects.filter(session=session).values("model").annotate(**_SUMS).order_by("model")
    return _summed(rows)


@dataclass(frozen=True)
class ChatUsage:
    """What the chat page shows beside the conversation: how full the session's context is
    against its compaction threshold, what the chat has cost, and the project's day."""

    context_tokens: int  # the next call's context, estimated as the compaction check does
    compact_at_tokens: int
    session: Spend
    today: SpendToday

    @property
    def context_fraction(self) -> float:
        return self.context_tokens / self.compact_at_tokens if self.compact_at_tokens > 0 else 0.0


def chat_usage(*, session: Session) -> ChatUsage:
    """The context use, the chat's spend and the project's spend today of ``session``."""
    return ChatUsage(
        context_tokens=context_estimate(session=session),
        compact_at_tokens=project_planner_config(session.project).compact_at_tokens,
        session=session_spend(session=session),
        today=project_today(project=session.project),
    )
