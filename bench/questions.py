"""Agents' questions end to end: REST latency, and 50 agents asking at once over MCP.

A fake Messages API runs in a process of its own (this script, started again with
``--serve-fake``) and answers at once: a question's sub-chat gets an ``answer_question``
call whose answer names the question's tag, then, after the tool result, a short text.
One real daphne serves Ballet (``tests/fakes/servers.py``: its own database, the demo
project; in production mode PostgreSQL and Redis).

1. **Latency** (``--questions``, 100): one after another over REST, ``POST
   /api/v1/projects/DEMO/questions/`` then ``GET .../questions/ID/?wait=30``; the time from
   sending the POST to reading the answered question. Median and p99. Then as many over MCP,
   ``ask_question`` in one client session.
2. **Agents at once** (``--agents``, 50): as many users, each a member of DEMO with its own
   token, each connect with the SDK's own MCP client (Streamable HTTP) and call
   ``ask_question`` with ``wait_seconds=60`` at the same moment. Every agent must get its own
   answer (the tag of its question); REST's list of answered questions is checked too. Daphne's
   RSS before and after, and its peak. ``--over rest`` has them ask over REST instead (POST,
   then GET with ``?wait=60``), to tell what MCP adds from what the questions cost.

    .venv/bin/python bench/questions.py                       # SQLite, in-memory channel layer
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/questions.py                   # PostgreSQL and Redis

The running-turn limits are raised so that the agents' turns run side by side;
``--keep-turn-limits`` keeps the defaults (10 a project): the other 40 questions wait, open,
until turns free up (docs/domain.md#agents-questions), and are still answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _fake_process import FakeProcess, serve
from _ws import api, api_token, percentile, proc_status_kb, raise_fd_limit

TAG = re.compile(r"\[q:([a-z0-9-]+)\]")


# --- the fake, in its own process ------------------------------------------------------------


def serve_fake() -> None:
    """Run the fake Messages API until stdin closes; print its base URL first."""
    from tests.fakes.messages_api import TextReply, ToolCallSpec, ToolUseReply

    def respond(body: dict[str, Any]) -> Any:
        content = body["messages"][-1]["content"]
        if isinstance(content, list) and any(block.get("type") == "tool_result" for block in content):
            return TextReply("Answered.")
        found = TAG.search(json.dumps(body["messages"][0]))
        answer = f"The answer to [q:{found.group(1) if found else 'none'}]."
        return ToolUseReply([ToolCallSpec("answer_question", {"answer": answer})])

    serve(respond)


# --- 1. latency over REST --------------------------------------------------------------------


def rest_question(base_url: str, token: str, tag: str) -> float:
    started = time.perf_counter()
    path = "/api/v1/projects/DEMO/questions/"
    asked = api(
        base_url, "POST", path, {"text": f"Which delimiter should the CSV use? [q:{tag}]"}, token=token
    )
    answered = api(base_url, "GET", f"{path}{asked['id']}/?wait=30", token=token)
    elapsed = (time.perf_counter() - started) * 1000
    if answered["status"] != "answered" or f"[q:{tag}]" not in answered["answer"]:
        raise RuntimeError(f"question {asked['id']} was not answered in time: {answered}")
    return elapsed


def latency(base_url: str, token: str, count: int) -> list[float]:
    for n in range(5):  # warm-up: first-use costs stay out of the figures
        rest_question(base_url, token, f"warm-{n}")
    return [rest_question(base_url, token, f"rest-{n}") for n in range(count)]


async def mcp_latency(url: str, token: str, count: int) -> list[float]:
    """The same questions over MCP, one after another in one client session."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    times = []
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for n in range(count):
            tag = f"mcp-one-{n}"
            started = time.perf_counter()
            arguments = {"project": "DEMO", "text": f"Which delimiter? [q:{tag}]", "wait_seconds": 30}
            result = await session.call_tool("ask_question", arguments)
            times.append((time.perf_counter() - started) * 1000)
            body = json.loads(result.content[0].text)  # type: ignore[union-attr]
            if body.get("status") != "answered" or f"[q:{tag}]" not in body.get("answer", ""):
                raise RuntimeError(f"an MCP question was not answered in time: {body}")
    return times


# --- 2. agents at once over MCP --------------------------------------------------------------

MAKE_AGENTS = """
import json
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from tracker.models import Membership, Project, Role
project = Project.objects.get(key="DEMO")
tokens = []
for n in range({count}):
    user, _ = User.objects.get_or_create(username=f"bench-agent-{{n}}")
    Membership.objects.get_or_create(project=project, user=user, defaults={{"role": Role.MEMBER}})
    tokens.append(Token.objects.get_or_create(user=user)[0].key)
print(json.dumps(tokens))
"""


async def agent(url: str, token: str, tag: str, start: asyncio.Event) -> tuple[float, dict[str, Any]]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await start.wait()
        started = time.perf_counter()
        arguments = {
            "project": "DEMO",
            "text": f"Which columns go in the export? [q:{tag}]",
            "wait_seconds": 60,
        }
        result = await session.call_tool("ask_question", arguments)
        elapsed = (time.perf_counter() - started) * 1000
    body: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return elapsed, body


async def rest_agent(url: str, token: str, tag: str, start: asyncio.Event) -> tuple[float, dict[str, Any]]:
    """The same agent over REST: POST the question, then GET it with ``?wait=60``."""
    import httpx2

    path = f"{url}/api/v1/projects/DEMO/questions/"
    async with httpx2.AsyncClient(headers={"Authorization": f"Token {token}"}, timeout=120) as http:
        await start.wait()
        started = time.perf_counter()
        asked = await http.post(path, json={"text": f"Which columns go in the export? [q:{tag}]"})
        answered = await http.get(f"{path}{asked.json()['id']}/?wait=60")
        elapsed = (time.perf_counter() - started) * 1000
    body: dict[str, Any] = answered.json()
    return elapsed, body


async def agents_at_once(
    url: str, tokens: list[str], over: str
) -> tuple[list[float], list[dict[str, Any]], float]:
    start = asyncio.Event()
    run = uuid.uuid4().hex[:6]
    tags = [f"{over}-{run}-{n}" for n in range(len(tokens))]
    ask = agent if over == "mcp" else rest_agent
    tasks = [
        asyncio.create_task(ask(url, token, tag, start)) for token, tag in zip(tokens, tags, strict=True)
    ]
    await asyncio.sleep(1.0)  # every client connected and initialized
    began = time.perf_counter()
    start.set()
    done = await asyncio.gather(*tasks)
    wall = (time.perf_counter() - began) * 1000
    bodies = [body for _, body in done]
    for tag, body in zip(tags, bodies, strict=True):
        if body.get("status") != "answered" or f"[q:{tag}]" not in body.get("answer", ""):
            raise RuntimeError(f"the agent asking [q:{tag}] got {body}")
    return [ms for ms, _ in done], bodies, wall


def _ms(values: list[float]) -> str:
    median, p99 = statistics.median(values), percentile(values, 0.99)
    return f"median {median:.1f} ms, p99 {p99:.1f} ms, max {max(values):.1f} ms"


def measure(server: Any, args: argparse.Namespace) -> None:
    from tests.fakes.servers import PASSWORD

    pid = server.process.pid
    token = api_token(server.url, "demo", PASSWORD)
    print(f"questions · {args.mode} · fake model answering at once with answer_question")
    rest = latency(server.url, token, args.questions)
    print(f"  {len(rest)} questions one after another over REST (POST, then GET ?wait=30): ask → answered")
    print(f"    {_ms(rest)}")
    one = asyncio.run(mcp_latency(server.url, token, args.questions))
    print(f"  {len(one)} questions one after another over MCP (one SDK client session, ask_question)")
    print(f"    {_ms(one)}")

    printed = server.deployment.manage("shell", "-c", MAKE_AGENTS.format(count=args.agents))
    tokens = json.loads(printed.strip().splitlines()[-1])
    before = proc_status_kb(pid, "VmRSS")
    latencies, bodies, wall = asyncio.run(agents_at_once(server.url, tokens, args.over))
    after, peak = proc_status_kb(pid, "VmRSS"), proc_status_kb(pid, "VmHWM")
    listed = api(server.url, "GET", "/api/v1/projects/DEMO/questions/?status=answered", token=token)
    answered = sum(body["status"] == "answered" for body in bodies)
    how = "MCP (SDK client, ask_question with wait_seconds=60)" if args.over == "mcp" else "REST (?wait=60)"
    print(f"  {len(tokens)} agents asking at once over {how}")
    print(f"    answered {answered} of {len(tokens)}, each its own answer; lost {len(tokens) - answered}")
    print(f"    ask → answer {_ms(latencies)}; the last answered {wall:.0f} ms after they all asked")
    expected = 2 * args.questions + 5 + len(tokens)  # the warm-up's 5 too; the demo's own stays open
    if listed["count"] != expected:
        raise RuntimeError(f"REST lists {listed['count']} answered questions, not {expected}")
    print(f"    answered questions listed over REST: {listed['count']} of {expected} asked in all")
    mb = [kb / 1024 for kb in (before, after, peak)]
    print(f"    daphne RSS before {mb[0]:.1f} MB, after {mb[1]:.1f} MB, peak {mb[2]:.1f} MB")


def main() -> None:
    if len(sys.argv) == 2 and sys.argv[1] == "--serve-fake":
        serve_fake()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100, help="questions one after another over REST")
    parser.add_argument("--agents", type=int, default=50, help="agents asking at once over MCP")
    parser.add_argument("--over", choices=["mcp", "rest"], default="mcp", help="how the agents ask at once")
    parser.add_argument("--keep-turn-limits", action="store_true", help="the default running-turn limits")
    parser.add_argument("--log-dir", type=Path, default=None, help="keep daphne's log here")
    args = parser.parse_args()
    from tests.fakes.servers import production_mode, served

    raise_fd_limit()
    args.mode = "postgresql + redis" if production_mode() else "sqlite + in-memory layer"
    tmp = Path(tempfile.mkdtemp(prefix="ballet-questions-bench-"))
    args.log_dir = args.log_dir or tmp
    args.log_dir.mkdir(parents=True, exist_ok=True)
    many = "100000"
    limits = {
        "BALLET_LIMIT_MCP_REQUESTS_PER_MINUTE": many,  # one token asks the REST questions
        # The questions differ by a tag only: each is to reach the planner, never an earlier answer
        # reused (docs/domain.md#agents-questions), which would be measured instead.
        "BALLET_QUESTIONS_REUSE_THRESHOLD": "1",
    }
    if not args.keep_turn_limits:
        limits |= {
            "BALLET_LIMIT_RUNNING_TURNS_PER_USER": many,
            "BALLET_LIMIT_RUNNING_TURNS_PER_PROJECT": many,
        }
    fake = FakeProcess(__file__, "--serve-fake")
    try:
        redis_url, log = os.environ.get("REDIS_URL"), args.log_dir / "daphne.log"
        with served(tmp, fake.base_url, extra_env=limits, redis_url=redis_url, log=log) as server:
            measure(server, args)
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
