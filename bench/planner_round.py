"""Planner overhead per round, excluding model time.

A model that answers at once drives turns of one tool round (three tool
calls: get_item, list_items, search_knowledge) and a 20-delta final answer,
on a project of 5,000 items and 500 knowledge entries, in conversations of 20
turns. Prints the median and p99 milliseconds per tool round and per turn,
and the database queries each tool call makes.

    .venv/bin/python bench/planner_round.py                 # SQLite (embedded mode)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/planner_round.py             # PostgreSQL
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import time

from _setup import build_project, setup_django

SESSION_TURNS = 20
TOOLS = (
    ("get_item", {"key": "BENCH-2500"}),
    ("list_items", {"kind": "ticket", "state": "ready", "limit": 20}),
    ("search_knowledge", {"query": "billing export", "limit": 5}),
)


class InstantModel:
    """Answers at once: a tool round, then a 20-delta answer; stamps when each call starts."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.calls = 0

    async def complete(self, request, *, api_key, sink, meter):  # type: ignore[no-untyped-def]
        from planner.agent.gateway import CallRecord
        from planner.agent.messages import ModelResponse, TextBlock, ToolUseBlock, Usage

        if request.purpose == "title":  # after a session's first turn (planner/live/titles.py): not a round
            usage = Usage(input_tokens=60, output_tokens=4)
            await meter(CallRecord(request.purpose, request.model, usage, 0.0, "ok"))
            return ModelResponse(
                content=(TextBlock("Bench chat"),), stop_reason="end_turn", usage=usage, model=request.model
            )
        self.starts.append(time.perf_counter())
        self.calls += 1
        usage = Usage(input_tokens=1500, output_tokens=40)
        if request.messages[-1].kind in ("human", "continue"):
            blocks = tuple(ToolUseBlock(f"toolu_{self.calls}_{i}", n, a) for i, (n, a) in enumerate(TOOLS))
            response = ModelResponse(content=blocks, stop_reason="tool_use", usage=usage, model=request.model)
        else:
            for i in range(20):
                await sink.on_text(f"word{i} ")
            text = "".join(f"word{i} " for i in range(20))
            response = ModelResponse(
                content=(TextBlock(text),), stop_reason="end_turn", usage=usage, model=request.model
            )
        await meter(CallRecord(request.purpose, request.model, usage, 0.0, "ok"))
        return response


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def queries_per_tool(project, user) -> dict[str, int]:  # type: ignore[no-untyped-def]
    import uuid

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from planner.domain.tools import ToolContext, call_tool

    counts = {}
    for name, arguments in TOOLS:
        context = ToolContext(user=user, project=project, session_id=uuid.uuid4())
        call_tool(name, arguments, context)  # warm caches (validators)
        context = ToolContext(user=user, project=project, session_id=uuid.uuid4())
        with CaptureQueriesContext(connection) as captured:
            outcome = call_tool(name, arguments, context)
        assert not outcome.is_error, outcome.output
        counts[name] = len(captured.captured_queries)
    return counts


async def run_turns(project, user, turns: int) -> tuple[list[float], list[float]]:  # type: ignore[no-untyped-def]
    from planner.domain.services.sessions import session_create
    from planner.ground.bridge import db
    from planner.live.runner import Runner

    model = InstantModel()
    runner = Runner(gateway=model)
    round_ms, turn_ms = [], []
    for turn in range(turns):
        if turn % SESSION_TURNS == 0:  # a fresh conversation now and then, as people have them
            session = await db(session_create)(user=user, project=project)
        started = time.perf_counter()
        model.starts.clear()
        await runner.send(session_id=session.pk, user=user, text="Check BENCH-2500 and related knowledge")
        await runner.wait(session.pk)
        ended = time.perf_counter()
        round_ms.append((model.starts[1] - model.starts[0]) * 1000)
        turn_ms.append((ended - started) * 1000)
    return round_ms, turn_ms


def index_knowledge(project) -> None:  # type: ignore[no-untyped-def]
    """search_knowledge searches what the indexer wrote: index the bulk-inserted entries."""
    from tracker.search.indexing import search_index_refresh, search_sources

    ids = search_sources()["knowledge"].ids_of_organization(project.organization_id)
    for start in range(0, len(ids), 64):
        search_index_refresh(kind="knowledge", ids=ids[start : start + 64])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--knowledge", type=int, default=500)
    args = parser.parse_args()
    mode = setup_django()
    from django.conf import settings

    # Compaction is not what this measures: keep the growing transcript below its threshold.
    settings.BALLET_PLANNER = settings.BALLET_PLANNER.__class__(
        **{**settings.BALLET_PLANNER.__dict__, "compact_at_tokens": 10**9}
    )
    # Nor are the message limits (docs/trust.md#limits): one user sends every turn as fast as they end.
    settings.BALLET_LIMITS = dataclasses.replace(settings.BALLET_LIMITS, messages_per_minute=10**9)
    project, user = build_project(items=args.items, knowledge=args.knowledge)
    index_knowledge(project)
    queries = queries_per_tool(project, user)
    asyncio.run(run_turns(project, user, 10))  # warm-up
    round_ms, turn_ms = asyncio.run(run_turns(project, user, args.turns))
    print(f"planner round overhead · {mode} · {args.items} items, {args.knowledge} knowledge entries")
    for label, values in (
        ("tool round (model call → 3 tool calls → next model call)", round_ms),
        ("whole turn (2 model calls, 3 tools, 20-delta answer)", turn_ms),
    ):
        print(f"  {label}: median {statistics.median(values):.2f} ms, p99 {percentile(values, 0.99):.2f} ms")
    print("  database queries per tool call: " + ", ".join(f"{k} {v}" for k, v in queries.items()))


if __name__ == "__main__":
    main()
