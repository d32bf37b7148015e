"""A scripted model for the planner loop: replays answers in order and records every request.

It stands in for the gateway (no network). Each script step is an answer
(text and tool calls), a :class:`GatewayError` to raise, or a :class:`Hang`
that streams some text and then waits until cancelled. Running out of script
raises, so a test that causes an unexpected call fails loudly.

Title requests (purpose ``title``, made after a session's first turn,
``planner/live/titles.py``) are kept apart: they take no step of the script and are
not in ``requests``; they are answered from ``titles`` (steps like the
script's) or, when none is left, with :data:`DEFAULT_TITLE`, and recorded in
``title_requests``. A test about titles scripts them; other tests are unaffected.
The reuse judge's requests (purpose ``reuse_judge``, ``planner/live/reuse_judging.py``) are
kept apart the same way: answered from ``judgements``, else with :data:`DEFAULT_JUDGEMENT` ("none
asks the same", so a question is asked as if nothing were remembered), recorded in
``judge_requests``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from planner.agent.calls import CallRecord, GatewayError, Meter, StreamSink
from planner.agent.messages import (
    Block,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    wire_messages,
)
from tests.fakes.messages_api import history_problems

_ids = itertools.count(1)
DEFAULT_TITLE = "A scripted title"
TITLE_USAGE = Usage(input_tokens=40, output_tokens=5)
DEFAULT_JUDGEMENT = "0"
JUDGE_USAGE = Usage(input_tokens=120, output_tokens=1)


@dataclass(frozen=True)
class Answer:
    text: str = ""
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=100, output_tokens=20))
    deltas: int = 3
    ids: tuple[str, ...] = ()
    stop_reason: StopReason | None = None  # by default tool_use with calls, else end_turn


def say(text: str, **kwargs: Any) -> Answer:
    return Answer(text=text, **kwargs)


def call(
    name: str,
    arguments: dict[str, Any] | None = None,
    *more: tuple[str, dict[str, Any]],
    text: str = "",
    **kwargs: Any,
) -> Answer:
    return Answer(text=text, calls=((name, arguments or {}), *more), **kwargs)


@dataclass
class Hang:
    """Stream ``text`` then wait until the call is cancelled (or ``release`` is set)."""

    text: str = ""
    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    then: Answer | None = None


Step = Answer | GatewayError | Hang | Callable[[ModelRequest], "Answer"]


class ScriptExhaustedError(AssertionError):
    pass


class ScriptedGateway:
    def __init__(self, *steps: Step) -> None:
        self.steps: list[Step] = list(steps)
        self.requests: list[ModelRequest] = []
        self.records: list[CallRecord] = []
        self.titles: list[Step] = []
        self.title_requests: list[ModelRequest] = []
        self.judgements: list[Step] = []
        self.judge_requests: list[ModelRequest] = []

    def add(self, *steps: Step) -> None:
        self.steps.extend(steps)

    @property
    def turn_requests(self) -> list[ModelRequest]:
        return [r for r in self.requests if r.purpose == "turn"]

    async def complete(
        self, request: ModelRequest, *, api_key: str | None, sink: StreamSink | None, meter: Meter
    ) -> ModelResponse:
        if request.purpose == "title":
            assert_valid_history(request)
            self.title_requests.append(request)
            step = self.titles.pop(0) if self.titles else Answer(DEFAULT_TITLE, usage=TITLE_USAGE)
        elif request.purpose == "reuse_judge":
            assert_valid_history(request)
            self.judge_requests.append(request)
            step = self.judgements.pop(0) if self.judgements else Answer(DEFAULT_JUDGEMENT, usage=JUDGE_USAGE)
        else:
            self.requests.append(request)
            assert_valid_history(request)
            if not self.steps:
                raise ScriptExhaustedError(
                    f"the script ran out at request {len(self.requests)} ({request.purpose})"
                )
            step = self.steps.pop(0)
        if isinstance(step, GatewayError):
            await meter(CallRecord(request.purpose, request.model, Usage(), 1.0, "error", step.message))
            raise step
        if isinstance(step, Hang):
            step = await self._hang(step, sink)
        elif callable(step) and not isinstance(step, Answer):
            step = step(request)
        response = await self._stream(step, sink, request.model)
        record = CallRecord(request.purpose, request.model, step.usage, 1.0, "ok")
        if request.purpose not in ("title", "reuse_judge"):
            self.records.append(record)
        await meter(record)
        return response

    async def _hang(self, step: Hang, sink: StreamSink | None) -> Answer:
        if sink is not None and step.text:
            await sink.on_text(step.text)
        step.started.set()
        await step.release.wait()
        return step.then or Answer()

    async def _stream(self, step: Answer, sink: StreamSink | None, model: str) -> ModelResponse:
        blocks: list[Block] = []
        if step.text:
            if sink is not None:
                size = max(1, -(-len(step.text) // step.deltas))
                for start in range(0, len(step.text), size):
                    await sink.on_text(step.text[start : start + size])
            blocks.append(TextBlock(step.text))
        for index, (name, arguments) in enumerate(step.calls):
            tool_id = step.ids[index] if index < len(step.ids) else f"toolu_{next(_ids)}"
            blocks.append(ToolUseBlock(id=tool_id, name=name, input=arguments))
        stop: StopReason = step.stop_reason or ("tool_use" if step.calls else "end_turn")
        return ModelResponse(content=tuple(blocks), stop_reason=stop, usage=step.usage, model=model)


def assert_valid_history(request: ModelRequest) -> None:
    """What the Messages API insists on (``history_problems``): alternating roles from a user
    message, every tool_use answered by a tool_result in the very next message, no empty content."""
    problems = history_problems(wire_messages(request.messages))
    assert not problems, "; ".join(problems)


def tool_results(request: ModelRequest) -> list[ToolResultBlock]:
    return [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]


def change_notes(request: ModelRequest) -> list[str]:
    """The ``<workspace-changes>`` texts of the request, oldest first."""
    return [
        b.text
        for m in request.messages
        for b in m.content
        if isinstance(b, TextBlock) and b.text.startswith("<workspace-changes>")
    ]
