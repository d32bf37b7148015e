"""The gateway of every model call: the request's provider answers it (docs/architecture.md#the-demo-planner).

A project's turns, compactions and titles carry the provider the project uses
(``planner/domain/selectors.py`` ``project_provider``): Anthropic's Messages API, or the
demo planner built into Ballet. The runner holds one :class:`ProviderGateway`,
chosen at start-up; which provider answers is read per call, from the request.
"""

from __future__ import annotations

from typing import assert_never

from planner.agent.gateway import AnthropicGateway, Gateway, Meter, StreamSink
from planner.agent.messages import ModelRequest, ModelResponse


class ProviderGateway:
    def __init__(self, *, anthropic: Gateway, demo: Gateway) -> None:
        self.anthropic = anthropic
        self.demo = demo

    def of(self, request: ModelRequest) -> Gateway:
        match request.provider:
            case "anthropic":
                return self.anthropic
            case "demo":
                return self.demo
            case unknown:
                assert_never(unknown)

    async def complete(
        self, request: ModelRequest, *, api_key: str | None, sink: StreamSink | None, meter: Meter
    ) -> ModelResponse:
        return await self.of(request).complete(request, api_key=api_key, sink=sink, meter=meter)

    async def close(self) -> None:
        """Close the clients this event loop opened (the demo provider opens none)."""
        if isinstance(self.anthropic, AnthropicGateway):
            await self.anthropic.close()
