"""A flat bill: what a long planner session costs per turn in input tokens, with the prompt cache.

One 50-turn session on the demo project, with the workload of bench/turn_overhead.py: each turn is
a model call → three tool calls (``list_runnable``, ``get_item``, ``list_items`` of 20) → a model call
→ a 20-delta answer. The turns run through the real planner in this process (the runner, the loop,
the tools, the database) and the real ``anthropic`` SDK, against the fake Messages API with its
prompt-cache simulation (``tests/fakes/prompt_cache.py``), which reports what each call would
read from the cache, write to it, and send uncached.

The session runs twice side by side: with stale tool results cleared from the requests
(``planner/agent/clearing.py``) and with clearing off. For turns 1, 5, 10, 20, 30, 40, 50 it prints
the input tokens uncached, written to the cache, read from it, and the input billed in uncached-token
equivalents (a write 1.25 tokens, a read 0.1, uncached 1); the ratio billed(turn 50) / billed(turn 5)
(target ≤ 3); the costliest turn against turn 5 (target ≤ 4) and the mean billed of the last ten
turns against turns 2-11 (target ≤ 2.5); the share of rounds ≥ 2 of a turn whose input is ≥ 90 %
read from the cache, with the same share of the turns' first rounds, and the share of those
rounds' input tokens read from the cache (target ≥ 90 %). And each tool definition's size.
``--on-only`` runs the session with clearing alone.

    .venv/bin/python bench/bill.py                          # SQLite (embedded mode)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/bill.py                      # PostgreSQL
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
from typing import Any

os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")  # Anthropic answers DEMO's chats (the fake)

from _setup import setup_django

ANSWER_DELTAS = 20
TOOL_CALLS = (
    ("list_runnable", {}),
    ("get_item", {"key": "DEMO-1"}),
    ("list_items", {"limit": 20}),
)
SHOWN_TURNS = (1, 5, 10, 20, 30, 40, 50)
WRITE, READ = 1.25, 0.1
CACHED_SHARE = 0.9


@dataclasses.dataclass
class Call:
    turn: int
    round: int  # 1: the turn's first call
    uncached: int
    written: int
    read: int

    @property
    def billed(self) -> float:
        return self.uncached + WRITE * self.written + READ * self.read

    @property
    def cached(self) -> bool:
        return self.read >= CACHED_SHARE * (self.uncached + self.written + self.read)


def respond(body: dict[str, Any]) -> Any:
    from tests.fakes.messages_api import TextReply, ToolCallSpec, ToolUseReply

    content = body["messages"][-1]["content"]
    if any(block.get("type") == "tool_result" for block in content):
        return TextReply(" ".join(f"word{i}" for i in range(ANSWER_DELTAS)), chunks=ANSWER_DELTAS)
    return ToolUseReply([ToolCallSpec(name, args) for name, args in TOOL_CALLS])


async def run_session(turns: int, *, clearing_on: bool) -> tuple[list[Call], list[int]]:
    """The session's calls, and the turns in which it compacted."""
    from django.contrib.auth.models import User

    from planner.agent import clearing
    from planner.agent.gateway import AnthropicGateway
    from planner.domain.services.sessions import session_create
    from planner.ground.bridge import db
    from planner.live.runner import Runner
    from planner.models import Message
    from tests.fakes.messages_api import FakeMessagesAPI
    from tracker.models import Project

    trigger, within = clearing.TRIGGER_TOKENS, clearing.TURN_TOKENS
    if not clearing_on:
        clearing.TRIGGER_TOKENS = clearing.TURN_TOKENS = 10**12
    user = await db(User.objects.get)(username="demo")
    project = await db(Project.objects.get)(key="DEMO")
    calls: list[Call] = []
    compacted: list[int] = []
    try:
        with FakeMessagesAPI(responder=respond, prompt_cache=True) as fake:
            gateway = AnthropicGateway(base_url=fake.base_url, max_retries=0)
            runner = Runner(gateway=gateway)
            session = await db(session_create)(user=user, project=project)
            for turn in range(1, turns + 1):
                seen = len(fake.requests)
                await runner.send(session_id=session.pk, user=user, text=f"Turn {turn}: what is runnable?")
                await runner.wait(session.pk)
                for number, record in enumerate(fake.requests[seen:], start=1):
                    if record.json.get("tools") is None:  # a compaction's summary request
                        compacted.append(turn)
                        continue
                    usage = record.usage
                    assert record.outcome == "completed", record.outcome
                    assert usage is not None
                    calls.append(
                        Call(
                            turn,
                            number,
                            usage.input_tokens,
                            usage.cache_creation_input_tokens,
                            usage.cache_read_input_tokens,
                        )
                    )
            await runner.settle()
            await gateway.close()
            stored = await db(Message.objects.filter(session_id=session.pk).count)()
            assert stored == 4 * turns, stored  # the transcript stays complete
    finally:
        clearing.TRIGGER_TOKENS, clearing.TURN_TOKENS = trigger, within
    return calls, compacted


def tool_sizes() -> list[tuple[str, int, int]]:
    """Each tool definition's size in characters: the whole validation schema (what the model was
    shown before ``model_schema``) and what it is shown."""
    from planner.agent.messages import ToolDefinition
    from planner.domain.tools import DEFINITIONS, TOOLS

    return [
        (
            t.name,
            len(json.dumps(ToolDefinition(t.name, t.description, TOOLS[t.name].input_schema).to_wire())),
            len(json.dumps(t.to_wire())),
        )
        for t in DEFINITIONS
    ]


def read_fraction(calls: list[Call]) -> float:
    """The share of these calls' input tokens read from the cache."""
    read = sum(c.read for c in calls)
    return read / sum(c.uncached + c.written + c.read for c in calls)


def report(label: str, calls: list[Call], compacted: list[int]) -> dict[str, float]:
    by_turn: dict[int, list[Call]] = {}
    for call in calls:
        by_turn.setdefault(call.turn, []).append(call)
    print(f"  {label}")
    print("    turn  uncached   written      read    billed")
    for turn in SHOWN_TURNS:
        if turn in by_turn:
            rounds = by_turn[turn]
            uncached, written, read = (
                sum(getattr(c, k) for c in rounds) for k in ("uncached", "written", "read")
            )
            billed = sum(c.billed for c in rounds)
            print(f"    {turn:4d} {uncached:9,d} {written:9,d} {read:9,d} {billed:9,.0f}")
    billed = {turn: sum(c.billed for c in rounds) for turn, rounds in by_turn.items()}
    last, fifth = max(by_turn), 5
    later = [c for c in calls if c.round >= 2]
    firsts = [c for c in calls if c.round == 1 and c.turn > 1]
    ratio = billed[last] / billed[fifth]
    share = sum(c.cached for c in later) / len(later)
    steady = [c for c in later if c.turn >= 10]
    steady_share = sum(c.cached for c in steady) / len(steady) if steady else 0.0
    peak = max(billed[t] for t in billed if t >= fifth) / billed[fifth]
    first_share = sum(c.cached for c in firsts) / len(firsts)
    read_share = read_fraction(later)
    after_first = read_fraction(calls[1:])
    total = sum(billed.values())
    early, late = range(2, 12), range(last - 9, last + 1)
    mean_ratio = (sum(billed[t] for t in late) / len(late)) / (sum(billed[t] for t in early) / len(early))
    print(
        f"    billed turn {last} / turn {fifth}: {ratio:.2f} (target ≤ 3); "
        f"whole session {total:,.0f}; rounds ≥ 2 ≥ 90 % cached: {share:.0%} (target ≥ 90 %), "
        f"first rounds of turns ≥ 2: {first_share:.0%}"
    )
    print(
        f"    from turn 10 on, rounds ≥ 2 ≥ 90 % cached: {steady_share:.0%}; "
        f"costliest turn / turn 5: {peak:.2f} (target ≤ 4); mean billed of turns {late.start}-{last} / "
        f"turns 2-11: {mean_ratio:.2f} (target ≤ 2.5)"
    )
    print(
        f"    input read from the cache, by tokens: rounds ≥ 2 {read_share:.1%}, "
        f"every call after the session's first {after_first:.1%}"
    )
    missed = sorted({c.turn for c in later if not c.cached})
    print(f"    turns whose rounds ≥ 2 read < 90 % from the cache: {', '.join(map(str, missed)) or 'none'}")
    print(f"    compacted in turns: {', '.join(map(str, compacted)) or 'none'}")
    return {"ratio": ratio, "share": share, "total": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--on-only", action="store_true", help="the session with clearing only")
    args = parser.parse_args()
    mode = setup_django("ballet_bench_bill")
    from django.conf import settings
    from django.core.management import call_command

    from planner.agent import clearing

    # The message limits are not what this measures (docs/trust.md#limits).
    settings.BALLET_LIMITS = dataclasses.replace(settings.BALLET_LIMITS, messages_per_minute=10**9)
    call_command("seed_demo", password="bench-password", stdout=open(os.devnull, "w"))  # noqa: SIM115
    sizes = tool_sizes()
    print(f"a flat bill · {mode} · {args.turns} turns · 3 tool calls and a 20-delta answer per turn")
    print("  tool definitions, chars / tokens (at 4 chars a token): whole schema → as the model is shown it")
    for name, whole, shown in [*sizes, ("all", sum(s[1] for s in sizes), sum(s[2] for s in sizes))]:
        print(f"    {name:18s} {whole:6,d} / {whole // 4:5,d} → {shown:6,d} / {shown // 4:5,d}")
    print(
        f"  clearing: as a turn opens over {clearing.TRIGGER_TOKENS:,d} tokens of results (within a turn "
        f"over {clearing.TURN_TOKENS:,d}), keep {clearing.KEEP_RESULTS}, "
        f"clear ≥ {clearing.MIN_CLEAR_TOKENS:,d}; "
        f"compaction over {settings.BALLET_PLANNER.compact_at_tokens:,d}"
    )
    on = asyncio.run(run_session(args.turns, clearing_on=True))
    report("clearing on", *on)
    if not args.on_only:
        report("clearing off", *asyncio.run(run_session(args.turns, clearing_on=False)))


if __name__ == "__main__":
    main()
