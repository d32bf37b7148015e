"""The peers' agent loops on the workload of ``bench/turn_overhead.py``, side by side in one run.

Every side sends Ballet's own system prompt and tool definitions and gets the same three tool
results (``bench/peers_workload.json``), against one fake Messages API in a process of its own
(``bench/_turns.py``): a model call answered with three tool calls, the results sent back, a
model call streaming a 20-delta answer. Each turn is a conversation of its own (a fresh thread),
in process, without transport. The sides, interleaved round by round in rotating order:

- ``bare``: the hand-written loop on the bare ``anthropic`` SDK that Ballet is measured against;
- ``create_agent``: LangChain's ``create_agent`` on ``ChatAnthropic``, streaming, no memory;
- ``create_agent + AsyncSqliteSaver``: the same, LangGraph's SQLite checkpointer storing every
  step in a file (durable, as Ballet's embedded mode is);
- ``create_agent + AsyncPostgresSaver``: the same on PostgreSQL (``--postgres``; skipped when
  it cannot be reached), as Ballet's production mode stores every step.

The peers' packages are not Ballet's: ``make bench-peers`` builds ``.venv-peers`` from
``requirements/peers.txt`` and runs this (docs/benchmarks.md#peers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _turns import ANSWER_DELTAS, TOOL_CALLS, BareLoop, FakeProcess
from _ws import percentile

WORKLOAD = Path(__file__).with_name("peers_workload.json")
QUESTION = "What can be worked on next?"
Turn = Callable[[], Awaitable[float]]


def workload() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(WORKLOAD.read_text())
    if [c["name"] for c in found["calls"]] != [name for name, _ in TOOL_CALLS]:
        raise RuntimeError(f"{WORKLOAD.name} holds other tool calls than bench/_turns.py makes")
    return found


# --- the bare SDK --------------------------------------------------------------------------------


async def bare_side(stack: AsyncExitStack, base_url: str, work: dict[str, Any]) -> Turn:
    loop = BareLoop(
        base_url=base_url,
        system=work["system"],
        tools=work["tools"],
        results=work["results"],
        model=work["model"],
        max_tokens=work["max_tokens"],
    )
    await loop.start()
    stack.push_async_callback(loop.client.close)

    async def turn() -> float:
        loop.new_session()
        return await loop.turn(QUESTION)

    return turn


# --- LangChain's create_agent --------------------------------------------------------------------


def langchain_tools(work: dict[str, Any]) -> list[Any]:
    """Ballet's tool definitions as LangChain tools; the three the model calls answer what Ballet's
    answered, the others are never called."""
    from langchain_core.tools import StructuredTool

    answers = {call["name"]: result for call, result in zip(work["calls"], work["results"], strict=True)}

    def tool(definition: dict[str, Any]) -> Any:
        answer = answers.get(definition["name"], "{}")

        async def run(**_: Any) -> str:
            return answer

        return StructuredTool.from_function(
            coroutine=run,
            name=definition["name"],
            description=definition["description"],
            args_schema=definition["input_schema"],
        )

    return [tool(definition) for definition in work["tools"]]


def agent_side(base_url: str, work: dict[str, Any], checkpointer: Any = None) -> Turn:
    from langchain.agents import create_agent
    from langchain_anthropic import ChatAnthropic

    model = ChatAnthropic(
        model_name=work["model"],
        max_tokens_to_sample=work["max_tokens"],
        anthropic_api_url=base_url,
        anthropic_api_key="sk-fake",
        streaming=True,
        max_retries=0,
    )
    system = "\n\n".join(block["text"] for block in work["system"])
    agent = create_agent(model, tools=langchain_tools(work), system_prompt=system, checkpointer=checkpointer)

    async def turn() -> float:
        started = time.perf_counter()
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}  # a fresh thread per turn
        deltas = 0
        async for chunk, _meta in agent.astream(
            {"messages": [{"role": "user", "content": QUESTION}]}, config, stream_mode="messages"
        ):
            if getattr(chunk, "type", "") == "AIMessageChunk" and chunk.text:
                deltas += 1
        elapsed = (time.perf_counter() - started) * 1000
        if deltas < ANSWER_DELTAS:
            raise RuntimeError(
                f"create_agent streamed {deltas} text chunks, not the answer's {ANSWER_DELTAS}"
            )
        return elapsed

    return turn


@asynccontextmanager
async def sqlite_saver(directory: Path) -> AsyncIterator[Any]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(str(directory / "checkpoints.sqlite3")) as saver:
        await saver.setup()
        yield saver


@asynccontextmanager
async def postgres_saver(url: str) -> AsyncIterator[Any]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    await ensure_database(url)
    async with AsyncPostgresSaver.from_conn_string(url) as saver:
        await saver.setup()
        yield saver


async def ensure_database(url: str) -> None:
    """Create the database ``url`` names if it is missing (on the same server's ``postgres``)."""
    import psycopg

    server, _, name = url.rpartition("/")
    async with await psycopg.AsyncConnection.connect(f"{server}/postgres", autocommit=True) as conn:
        found = await conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        if await found.fetchone() is None:
            await conn.execute(f'CREATE DATABASE "{name}"')


# --- measuring -------------------------------------------------------------------------------------


async def measure(sides: dict[str, Turn], rounds: int, warmup: int) -> dict[str, list[float]]:
    """Each side's turn times, interleaved round by round in rotating order."""
    names = list(sides)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(warmup + rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            elapsed = await sides[name]()
            if r >= warmup:
                times[name].append(elapsed)
    return times


def report(times: dict[str, list[float]], rounds: int) -> None:
    bare = times["bare"]
    print(f"peers · the workload of turn_overhead.py, in process, a fresh thread per turn, {rounds} rounds")
    print(f"  bare SDK turn median {statistics.median(bare):.1f} ms, p90 {percentile(bare, 0.9):.1f} ms")
    for name, values in times.items():
        if name == "bare":
            continue
        over = [mine - theirs for mine, theirs in zip(values, bare, strict=True)]
        print(
            f"  {name}: over the bare SDK median {statistics.median(over):+.1f} ms,"
            f" p90 {percentile(over, 0.9):+.1f} ms; its turn median {statistics.median(values):.1f} ms"
        )
    packages = ("anthropic", "langchain", "langchain-anthropic", "langgraph")
    savers = ("langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres")
    print("  " + ", ".join(f"{name} {version(name)}" for name in (*packages, *savers)))


async def run(args: argparse.Namespace) -> None:
    work = workload()
    fake = FakeProcess(Path(tempfile.mkdtemp(prefix="ballet-peers-")))
    try:
        async with AsyncExitStack() as stack:
            sides: dict[str, Turn] = {"bare": await bare_side(stack, fake.base_url, work)}
            sides["create_agent"] = agent_side(fake.base_url, work)
            directory = Path(tempfile.mkdtemp(prefix="ballet-peers-sqlite-"))
            sqlite = await stack.enter_async_context(sqlite_saver(directory))
            sides["create_agent + AsyncSqliteSaver"] = agent_side(fake.base_url, work, sqlite)
            if args.postgres:
                try:
                    postgres = await stack.enter_async_context(postgres_saver(args.postgres))
                except OSError as exc:  # psycopg's OperationalError is one
                    print(f"  (PostgreSQL at {args.postgres} unreachable, its side skipped: {exc})")
                else:
                    sides["create_agent + AsyncPostgresSaver"] = agent_side(fake.base_url, work, postgres)
            report(await measure(sides, args.rounds, args.warmup), args.rounds)
    finally:
        fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="rounds of one turn per side")
    parser.add_argument("--warmup", type=int, default=3, help="rounds left out of the figures")
    parser.add_argument(
        "--postgres",
        default="postgresql://postgres@127.0.0.1:5432/ballet_peers",
        help="the AsyncPostgresSaver's database (created if missing); empty: no PostgreSQL side",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
