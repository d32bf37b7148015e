"""The gateway of every model call: the request's provider answers it (docs/architecture.md#the-demo-planner).

A project's turns, compactions and titles carry the provider the project uses
(``planner/domain/selectors.py`` ``project_provider``): Anthropic's Messages API, or the
demo planner built into Ballet. The runner holds one :class:`ProviderGateway`,
chosen at start-up; which provider answers is read per call, from the request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from planner.agent.calls import Gateway, Meter, StreamSink
from planner.agent.messages import ModelRequest, ModelResponse

if TYPE_CHECKING:
    from planner.agent.gateway import AnthropicGateway


class AnthropicOnDemand:
    """The Anthropic gateway, made at the first call that needs it: importing the SDK takes
    seconds, which a process (or a test) that never calls Anthropic does not pay."""

    def __init__(self, *, base_url: str | None) -> None:
        self.base_url = base_url
        self._gateway: AnthropicGateway | None = None

    async def complete(
        self, request: ModelRequest, *, api_key: str | None, sink: StreamSink | None, meter: Meter
    ) -> ModelResponse:
        return await self._made().complete(request, api_key=api_key, sink=sink, meter=meter)

    def _made(self) -> AnthropicGateway:
        if self._gateway is None:
            from planner.agent.gateway import AnthropicGateway  # noqa: PLC0415 - the SDK loads on demand

            self._gateway = AnthropicGateway(base_url=self.base_url)
        return self._gateway

    async def close(self) -> None:
        if self._gateway is not None:
            await self._gateway.close()


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
        close = getattr(self.anthropic, "close", None)
        if close is not None:
            await close()
