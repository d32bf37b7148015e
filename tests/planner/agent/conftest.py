"""What the gateway's tests share: the local fake Messages API and a gateway in front of it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from planner.agent.gateway import AnthropicGateway
from tests.fakes.messages_api import FakeMessagesAPI


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeMessagesAPI, AnthropicGateway]]:
    """The fake, and a gateway in front of it that tries a failed request twice more."""
    with FakeMessagesAPI() as fake:
        gateway = AnthropicGateway(base_url=fake.base_url, max_retries=2)
        yield fake, gateway
        await gateway.close()
