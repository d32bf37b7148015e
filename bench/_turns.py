"""The pieces of ``bench/turn_overhead.py``: the fake Messages API in a process of its own, the bare
SDK loop Ballet is measured against, and a chat client over Ballet's WebSocket.

Run as a script (``_turns.py DUMP_DIR``) this module is the fake's process: it prints its base URL,
then answers until its standard input closes. It keeps the first two requests it answers
(``DUMP_DIR/0.json``, ``1.json``: the first turn's, whose system prompt, tools and tool results the
bare loop copies), and, while the directory ``DUMP_DIR/record`` exists, every request body in order
(``record/0.json``, ``1.json``, …): what the bare client replays byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _fake_process
import websockets
from _fake_process import serve
from _ws import api

ANSWER_DELTAS = 20
TOOL_CALLS = (
    ("list_runnable", {}),
    ("get_item", {"key": "DEMO-1"}),
    ("list_items", {"limit": 20}),
)
DUMPED = 2  # requests the fake keeps: the first turn's two (tools, then tool results)


# --- the fake, in its own process ------------------------------------------------------------


def serve_fake(dump_dir: Path) -> None:
    """Run the fake Messages API until stdin closes; print its base URL first."""
    from tests.fakes.messages_api import TextReply, ToolCallSpec, ToolUseReply

    answer = TextReply(" ".join(f"word{i}" for i in range(ANSWER_DELTAS)), chunks=ANSWER_DELTAS)
    dumped = [0]
    recorded = [0]
    record_dir = dump_dir / "record"

    def respond(body: dict[str, Any]) -> Any:
        if dumped[0] < DUMPED:
            (dump_dir / f"{dumped[0]}.json").write_text(json.dumps(body))
            dumped[0] += 1
        if record_dir.is_dir():  # written before the answer: the bench reads it after the turn ends
            (record_dir / f"{recorded[0]}.json").write_text(json.dumps(body))
            recorded[0] += 1
        content = body["messages"][-1]["content"]
        if isinstance(content, list) and any(block.get("type") == "tool_result" for block in content):
            return answer
        return ToolUseReply([ToolCallSpec(name, args) for name, args in TOOL_CALLS])

    serve(respond)


class FakeProcess(_fake_process.FakeProcess):
    """This module run as the fake's process, keeping what it answers in ``dump_dir``."""

    def __init__(self, dump_dir: Path) -> None:
        super().__init__(__file__, str(dump_dir))
        self.dump_dir = dump_dir
        self._replayed = 0  # recorded requests handed out so far

    def dumped(self, index: int) -> dict[str, Any]:
        result: dict[str, Any] = json.loads((self.dump_dir / f"{index}.json").read_text())
        return result

    def start_recording(self) -> None:
        (self.dump_dir / "record").mkdir()
        self._replayed = 0

    def stop_recording(self) -> None:
        record = self.dump_dir / "record"
        for path in record.glob("*.json"):
            path.unlink()
        record.rmdir()

    def recorded_since(self) -> list[dict[str, Any]]:
        """The request bodies recorded since the last call (or :meth:`skip`), in order."""
        bodies = []
        while (path := self.dump_dir / "record" / f"{self._replayed}.json").exists():
            bodies.append(json.loads(path.read_text()))
            self._replayed += 1
        return bodies

    def skip(self, count: int) -> None:
        """Pass over ``count`` recorded requests (the bare client's own replays)."""
        self._replayed += count


# --- the bare SDK loop -----------------------------------------------------------------------


@dataclass
class BareLoop:
    """The hand-written agent loop on the bare SDK: what Ballet is measured against."""

    base_url: str
    system: Any
    tools: list[dict[str, Any]]
    results: list[str]
    model: str
    max_tokens: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    client: Any = None

    async def start(self) -> None:
        import anthropic

        self.client = anthropic.AsyncAnthropic(
            api_key="sk-fake", base_url=self.base_url, http_client=anthropic.DefaultAioHttpClient()
        )

    def new_session(self) -> None:
        self.messages = []

    async def turn(self, text: str) -> float:
        started = time.perf_counter()
        self.messages.append({"role": "user", "content": text})
        for _ in range(10):
            content, stop_reason = await self._call(
                {
                    "model": self.model,
                    "system": self.system,
                    "messages": self.messages,
                    "tools": self.tools,
                    "max_tokens": self.max_tokens,
                }
            )
            self.messages.append({"role": "assistant", "content": content})
            if stop_reason != "tool_use":
                break
            calls = [block for block in content if block["type"] == "tool_use"]
            self.messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": call["id"], "content": self.results[i]}
                        for i, call in enumerate(calls)
                    ],
                }
            )
        return (time.perf_counter() - started) * 1000

    async def replay(self, bodies: list[dict[str, Any]]) -> float:
        """One turn sending exactly these request bodies (Ballet's own, as the fake recorded them)."""
        started = time.perf_counter()
        for body in bodies:
            await self._call({key: value for key, value in body.items() if key != "stream"})
        return (time.perf_counter() - started) * 1000

    async def _call(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        blocks: list[dict[str, Any]] = []
        partial: list[str] = []
        stop_reason = ""
        stream = await self.client.messages.create(**request, stream=True)
        async for event in stream:
            if event.type == "content_block_start":
                blocks.append(event.content_block.model_dump(exclude_none=True))
                partial = []
            elif event.type == "content_block_delta":
                if event.delta.type == "text_delta":
                    blocks[-1]["text"] += event.delta.text
                elif event.delta.type == "input_json_delta":
                    partial.append(event.delta.partial_json)
            elif event.type == "content_block_stop" and blocks[-1]["type"] == "tool_use":
                blocks[-1]["input"] = json.loads("".join(partial) or "{}")
            elif event.type == "message_delta":
                stop_reason = event.delta.stop_reason or ""
        return blocks, stop_reason


def bare_from(fake: FakeProcess) -> BareLoop:
    """A bare loop sending what Ballet sends: its system prompt, tools and tool results."""
    first, second = fake.dumped(0), fake.dumped(1)
    results = [
        block["content"] for block in second["messages"][-1]["content"] if block.get("type") == "tool_result"
    ]
    if len(results) != len(TOOL_CALLS):
        raise RuntimeError(f"Ballet's first turn sent {len(results)} tool results")
    return BareLoop(
        base_url=fake.base_url,
        system=first["system"],
        tools=first["tools"],
        results=results,
        model=first["model"],
        max_tokens=first["max_tokens"],
    )


# --- Ballet over its WebSocket ---------------------------------------------------------------


class Silences:
    """The pauses in which no chat heard a frame: a pause of every session at once is the server's
    or the fake's, not the turns' (a fake that kept what it answered stalled in its garbage
    collector for seconds)."""

    def __init__(self, over_s: float = 0.1) -> None:
        self.over_s = over_s
        self.last = time.perf_counter()
        self.pauses: list[float] = []

    def heard(self) -> None:
        now = time.perf_counter()
        if now - self.last > self.over_s:
            self.pauses.append(now - self.last)
        self.last = now


class BalletChat:
    def __init__(self, base_url: str, cookie: str, token: str, silences: Silences | None = None) -> None:
        self.base_url = base_url
        self.cookie = cookie
        self.token = token
        self.silences = silences
        self.ws: websockets.ClientConnection | None = None

    async def new_session(self) -> None:
        await self.close()
        session = await asyncio.to_thread(
            api, self.base_url, "POST", "/api/v1/planner/sessions/", {"project": "DEMO"}, token=self.token
        )
        url = self.base_url.replace("http://", "ws://") + f"/ws/planner/sessions/{session['id']}/"
        self.ws = await websockets.connect(
            url,
            origin=websockets.Origin(self.base_url),
            additional_headers={"Cookie": self.cookie},
            ping_interval=None,
            max_size=None,
            open_timeout=60,
        )
        first = json.loads(await self.ws.recv())
        if first.get("type") != "state":
            raise RuntimeError(f"expected a state frame first, got {first}")

    async def turn(self, text: str, within_s: float = 60) -> float:
        assert self.ws is not None
        started = time.perf_counter()
        await self.ws.send(json.dumps({"type": "message", "text": text}))
        async with asyncio.timeout(within_s):
            async for raw in self.ws:
                if self.silences is not None:
                    self.silences.heard()
                frame = json.loads(raw)
                if frame["type"] == "turn_ended":
                    if frame["reason"] != "completed":
                        raise RuntimeError(f"a Ballet turn ended {frame}")
                    return (time.perf_counter() - started) * 1000
                if frame["type"] == "error":
                    raise RuntimeError(f"Ballet answered an error frame: {frame}")
        raise RuntimeError("the WebSocket closed mid-turn")

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None


if __name__ == "__main__":
    serve_fake(Path(sys.argv[1]))
