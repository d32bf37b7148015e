"""An agent's reads over MCP against the same reads over REST: over HTTP to a real daphne on the
seeded demo, in either mode, interleaved in one run so both meet the same machine.

MCP is stateless here: each ``tools/call`` is one POST of JSON-RPC, answered in JSON, as the SDK's
client sends it once initialized. Each pair reads the same object (docs/agents.md#one-shape); the
table gives each side's p50 and p95 and what MCP adds at the median (the aim: at most 20 ms).

    .venv/bin/python bench/mcp_reads.py                                  # embedded (SQLite)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ballet REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/mcp_reads.py                              # PostgreSQL and Redis
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.servers import Deployment, Server, production_mode

TICKET = "DEMO-12"
PAIRS = [
    ("list_runnable", {}, "runnable/"),
    ("list_items", {"limit": 50}, "items/?limit=50"),
    ("get_item", {"key": TICKET}, f"items/{TICKET}/"),
    ("get_brief", {"item": TICKET}, f"items/{TICKET}/brief/"),
    ("list_questions", {"mine": False}, "questions/"),
    ("search_project", {"query": "booking rules"}, "search/?q=booking+rules"),
]
KEY = """
from django.contrib.auth.models import User
from tracker.services.keys import key_create
print(key_create(user=User.objects.get(username="agent"), name="bench", scopes=["read"])[1])
"""


class Agent:
    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base, key
        self.version = "2025-06-18"

    def _send(self, url: str, body: dict[str, Any] | None, headers: dict[str, str]) -> tuple[Any, float]:
        request = urllib.request.Request(
            url,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", **headers},
            method="GET" if body is None else "POST",
        )
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as response:
            payload = json.loads(response.read() or b"null")
        return payload, time.perf_counter() - started

    def rest(self, path: str) -> tuple[Any, float]:
        return self._send(f"{self.base}/api/v1/projects/DEMO/{path}", None, {})

    def mcp(self, tool: str, arguments: dict[str, Any]) -> tuple[Any, float]:
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {"project": "DEMO", **arguments}},
        }
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": self.version,
        }
        answer, seconds = self._send(f"{self.base}/mcp", call, headers)
        result = answer["result"]
        assert not result.get("isError"), result
        return json.loads(result["content"][0]["text"]), seconds


def ms(values: list[float], share: float = 0.5) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ballet-bench-mcp-"))
    # The agents' request limit (docs/trust.md#limits) is not what this measures.
    limits = {"BALLET_LIMIT_MCP_REQUESTS_PER_MINUTE": str(10**6)}
    deployment = Deployment.create(home, "http://127.0.0.1:9", extra_env=limits)
    server = Server(deployment, log=home / "daphne.log").start()
    try:
        agent = Agent(server.url, deployment.manage("shell", "-c", KEY).splitlines()[-1].strip())
        print(f"mode: {'postgresql' if production_mode() else 'sqlite'}, one daphne, {args.rounds} rounds")
        for tool, arguments, path in PAIRS:  # warm up, and the same object both ways
            over_mcp, _ = agent.mcp(tool, arguments)
            over_rest, _ = agent.rest(path)
            if isinstance(over_rest, dict) and "next" in over_rest:
                over_rest = {k: v for k, v in over_rest.items() if k not in ("next", "previous")}
            assert over_mcp == over_rest, tool
        print(f"{'read':<16} {'REST p50':>9} {'p95':>7} {'MCP p50':>9} {'p95':>7} {'MCP adds':>9}")
        for tool, arguments, path in PAIRS:
            rest, mcp = [], []
            for _ in range(args.rounds):
                rest.append(agent.rest(path)[1])
                mcp.append(agent.mcp(tool, arguments)[1])
            print(
                f"{tool:<16} {ms(rest):>7.1f}ms {ms(rest, 0.95):>5.1f}ms {ms(mcp):>7.1f}ms "
                f"{ms(mcp, 0.95):>5.1f}ms {ms(mcp) - ms(rest):>+7.1f}ms"
            )
    finally:
        server.stop()
        deployment.drop()


if __name__ == "__main__":
    main()
