"""A model call as the rest of the planner sees it, without the SDK: the :class:`Gateway` that
makes one, what it streams to (:class:`StreamSink`), how it is metered (:class:`CallRecord`) and
how it fails (:class:`GatewayError`). ``gateway.py`` makes them through Anthropic's SDK, ``demo.py``
without it; whoever only calls a gateway imports this module, and the SDK is not loaded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from planner.agent.messages import ModelRequest, ModelResponse, Usage
from tracker.errors import BalletError


class GatewayError(BalletError):
    """A model call failed for good; ``message`` is fit to show the human."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.code = kind
        self.kind = kind


@dataclass(frozen=True)
class CallRecord:
    """One model call, as metering stores it."""

    purpose: str
    model: str
    usage: Usage
    latency_ms: float
    outcome: str  # ok, error, cancelled
    error: str = ""


Meter = Callable[[CallRecord], Awaitable[None]]


class StreamSink(Protocol):
    async def on_text(self, delta: str) -> None: ...

    async def on_reset(self) -> None: ...


class Gateway(Protocol):
    async def complete(
        self, request: ModelRequest, *, api_key: str | None, sink: StreamSink | None, meter: Meter
    ) -> ModelResponse: ...
