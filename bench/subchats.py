"""Sub-chats the planner drives (docs/domain.md#sub-chats), in process: how much later a sub-chat's
first model call comes than an ordinary turn's, and how 3 sub-chats run side by side.

A fake model (no transport) answers by the first message of the chat it is called in:

* an ordinary turn ("Plain"): a one-line answer at once;
* a parent ("Parent 200,300"): one ``start_subchat`` call per delay, then, once their results are
  back, a one-line answer;
* a sub-chat ("Sub 300 ms #k"): the answer after sleeping that long (the model's time).

1. **Start latency**, ``--rounds`` rounds of: an ordinary turn, timed from ``Runner.send`` to its
   model call; a parent with one sub-chat, timed from the parent's model call returning the
   ``start_subchat`` call to the sub-chat's first model call (the parent's round saved, its turn
   paused, the sub-chat opened and its first turn started: what the planner adds). Target: the
   sub-chat's median at most 20 ms above the ordinary turn's.
2. **Parallel**, ``--parallel`` runs of: a parent whose sub-chats take 200, 300 and 400 ms
   (``--delays``), from ``Runner.send`` to the parent's final answer, beside a parent with the
   slowest alone; in parallel the three cost about what the slowest does (their sum, run one after
   another, is printed for scale).

    .venv/bin/python bench/subchats.py                      # SQLite (embedded mode)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/subchats.py                  # PostgreSQL
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import time
from typing import Any

from _setup import setup_django

START_TARGET_MS = 20


class FakeModel:
    """Answers by the chat's first message (see the module's docstring); stamps each call."""

    def __init__(self) -> None:
        self.calls: dict[str, float] = {}  # first message → when its chat's first call came
        self.returned: dict[str, float] = {}  # a parent's first message → when its call returned
        self.done: dict[str, asyncio.Event] = {}  # a parent's first message → its final answer given

    def expect(self, first: str) -> asyncio.Event:
        self.done[first] = asyncio.Event()
        return self.done[first]

    async def complete(self, request, *, api_key, sink, meter):  # type: ignore[no-untyped-def]
        from planner.agent.gateway import CallRecord
        from planner.agent.messages import ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock, Usage

        usage = Usage(input_tokens=800, output_tokens=20)

        def answer(*blocks: Any, stop: str = "end_turn") -> ModelResponse:
            return ModelResponse(content=blocks, stop_reason=stop, usage=usage, model=request.model)  # type: ignore[arg-type]

        if request.purpose != "turn":  # a title, after a chat's first turn
            await meter(CallRecord(request.purpose, request.model, usage, 0.0, "ok"))
            return answer(TextBlock("Bench chat"))
        first = request.messages[0].content[0].text
        self.calls.setdefault(first, time.perf_counter())
        last = request.messages[-1].content
        await meter(CallRecord(request.purpose, request.model, usage, 0.0, "ok"))
        if first.startswith("Sub "):
            await asyncio.sleep(int(first.split()[1]) / 1000)
            return answer(TextBlock(f"{first}: done."))
        if first.startswith("Parent "):
            if any(isinstance(block, ToolResultBlock) for block in last):
                self.done[first].set()
                return answer(TextBlock("Every part is done."))
            delays = first.split()[1].split(",")
            calls = tuple(
                ToolUseBlock(f"toolu_{n}", "start_subchat", {"brief": f"Sub {ms} ms #{n} of {first}"})
                for n, ms in enumerate(delays)
            )
            self.returned[first] = time.perf_counter()
            return answer(*calls, stop="tool_use")
        return answer(TextBlock("Done."))


@dataclasses.dataclass
class Bench:
    runner: Any
    model: FakeModel
    project: Any
    user: Any
    runs: int = 0

    async def session(self) -> Any:
        from planner.domain.services.sessions import session_create
        from planner.ground.bridge import db

        return await db(session_create)(user=self.user, project=self.project)

    async def plain_start_ms(self) -> float:
        session = await self.session()
        self.runs += 1
        text = f"Plain {self.runs}"
        sent = time.perf_counter()
        await self.runner.send(session_id=session.pk, user=self.user, text=text)
        await self.runner.wait(session.pk)
        await self.runner.settle()
        return (self.model.calls[text] - sent) * 1000

    async def parent(self, delays: list[int]) -> tuple[float, str]:
        """A parent whose sub-chats take ``delays`` ms: ms from send to its final answer; its text."""
        session = await self.session()
        self.runs += 1
        text = f"Parent {','.join(map(str, delays))} run {self.runs}"
        done = self.model.expect(text)
        sent = time.perf_counter()
        await self.runner.send(session_id=session.pk, user=self.user, text=text)
        await asyncio.wait_for(done.wait(), timeout=30)
        ended = time.perf_counter()
        await self.runner.wait(session.pk)
        await self.runner.settle()
        return (ended - sent) * 1000, text

    async def subchat_start_ms(self) -> float:
        _, text = await self.parent([0])
        return (self.model.calls[f"Sub 0 ms #0 of {text}"] - self.model.returned[text]) * 1000


def figures(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"median {statistics.median(values):.1f} ms, p90 {p90:.1f} ms"


async def measure(args: argparse.Namespace) -> None:
    from django.contrib.auth.models import User

    from planner.ground.bridge import on_db_threads
    from planner.live.runner import Runner
    from tracker.models import Membership, Organization, Project

    def build() -> tuple[Any, Any]:
        Organization.objects.filter(slug="subchat-bench").delete()
        org = Organization.objects.create(slug="subchat-bench", name="Sub-chat bench")
        project = Project.objects.create(organization=org, key="SUBB", name="Sub-chat bench")
        user, _ = User.objects.get_or_create(username="subchat-bench")
        Membership.objects.create(project=project, user=user, role="maintainer")
        return project, user

    project, user = await on_db_threads(build)()
    model = FakeModel()
    bench = Bench(Runner(gateway=model), model, project, user)
    for _ in range(5):  # warm-up: first-use costs stay out of the figures
        await bench.plain_start_ms()
        await bench.subchat_start_ms()
    plain: list[float] = []
    sub: list[float] = []
    for n in range(args.rounds):
        starts = ((plain, bench.plain_start_ms), (sub, bench.subchat_start_ms))
        for series, timed in starts if n % 2 == 0 else starts[::-1]:
            series.append(await timed())
    together: list[float] = []
    alone: list[float] = []
    for n in range(args.parallel):
        parents = ((together, args.delays), (alone, [max(args.delays)]))
        for into, delays in parents if n % 2 == 0 else parents[::-1]:
            into.append((await bench.parent(delays))[0])
    print(f"sub-chats · {args.mode} · in process, a fake model")
    print(f"  start latency, {args.rounds} rounds alternating:")
    print(f"    ordinary turn (send → its model call): {figures(plain)}")
    print(f"    sub-chat (the parent's start_subchat returned → the sub-chat's model call): {figures(sub)}")
    print(
        f"    sub-chat - ordinary, medians: {statistics.median(sub) - statistics.median(plain):+.1f} ms  "
        f"[target ≤ +{START_TARGET_MS} ms]"
    )
    delays = "/".join(map(str, args.delays))
    print(f"  parallel, {args.parallel} runs alternating (send → the parent's final answer):")
    print(f"    {len(args.delays)} sub-chats of {delays} ms: {figures(together)}")
    print(f"    the slowest ({max(args.delays)} ms) alone: {figures(alone)}")
    extra = statistics.median(together) - statistics.median(alone)
    print(
        f"    parallel - slowest alone, medians: {extra:+.1f} ms "
        f"(one after another they would take {sum(args.delays)} ms of model time)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50, help="start-latency rounds")
    parser.add_argument("--parallel", type=int, default=10, help="runs of each parallel parent")
    parser.add_argument("--delays", type=int, nargs="+", default=[200, 300, 400], help="ms per sub-chat")
    parser.add_argument("--database", default="ballet_bench", help="production mode: the database's name")
    args = parser.parse_args()
    args.mode = setup_django(args.database)
    from django.conf import settings

    many = 10**6
    settings.BALLET_LIMITS = dataclasses.replace(
        settings.BALLET_LIMITS,
        messages_per_minute=many,
        running_turns_per_user=many,
        running_turns_per_project=many,
    )
    asyncio.run(measure(args))


if __name__ == "__main__":
    main()
