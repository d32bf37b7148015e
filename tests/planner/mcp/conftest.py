"""MCP clients on the ASGI app in this process: the SDK's own client, and raw HTTP for what it hides."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from django.conf import settings
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token

from ballet.asgi import application
from tests.fakes.rate_clock import hold_rate_clock
from tests.planner.conftest import chat_project, scripted  # noqa: F401 - fixtures of these tests too

BASE = "http://testserver"
ACCEPT = {"accept": "application/json, text/event-stream"}


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """``limits(name=value)`` changes the limits of docs/trust.md#limits for the test."""
    original = settings.BALLET_LIMITS
    hold_rate_clock(monkeypatch)

    def change(**values: Any) -> None:
        settings.BALLET_LIMITS = dataclasses.replace(settings.BALLET_LIMITS, **values)

    yield change
    settings.BALLET_LIMITS = original


def token_of(user) -> str:
    return Token.objects.get_or_create(user=user)[0].key


def http(headers: Mapping[str, str | bytes] | None = None) -> httpx2.AsyncClient:
    raw = [(name.encode(), v if isinstance(v, bytes) else v.encode()) for name, v in (headers or {}).items()]
    transport = httpx2.ASGITransport(app=application)
    return httpx2.AsyncClient(transport=transport, base_url=BASE, headers=raw, timeout=30)


@asynccontextmanager
async def connected(
    token: str, *, scheme: str = "Bearer", discover: bool = False
) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session on ``/mcp`` with ``token``; ``discover``: the 2026 era."""
    async with (
        http({"Authorization": f"{scheme} {token}"}) as client,
        streamable_http_client(f"{BASE}/mcp", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await (session.discover() if discover else session.initialize())
        yield session


def rpc(method: str, params: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}
