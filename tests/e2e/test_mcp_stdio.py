"""The SDK's stdio client starting ``manage.py mcp_stdio`` as Claude Desktop does (README: an
absolute interpreter and ``manage.py``, another working directory, the key alone in its
environment) against a real daphne: it lists the tools and the runnable tickets as over HTTP, in
both eras of the protocol, and a bad key is an error a person can read."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.e2e.test_mcp import TOOLS
from tests.fakes.client import Client
from tests.fakes.servers import PASSWORD, ROOT, Server

pytestmark = pytest.mark.e2e


@asynccontextmanager
async def bridged(
    server: Server, key: str, home: Path, *, discover: bool = False
) -> AsyncIterator[ClientSession]:
    """A session through the bridge; what the bridge logged is in ``home/bridge.log``."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(ROOT / "manage.py"), "mcp_stdio", "--url", f"{server.url}/mcp"],
        env={"BALLET_KEY": key},
        cwd=str(home),
    )
    with (home / "bridge.log").open("w") as log:
        async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
            await (session.discover() if discover else session.initialize())
            yield session


def body(result: Any) -> Any:
    return json.loads(result.content[0].text)


def leaves(group: BaseExceptionGroup) -> list[BaseException]:
    return [
        leaf for e in group.exceptions for leaf in (leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    ]


@pytest.mark.parametrize("discover", [False, True], ids=["initialize", "discover"])
async def test_a_stdio_client_reads_the_plan_through_the_bridge(server, agent_token, tmp_path, discover):
    runnable = Client(server.url, "demo", PASSWORD).get("/api/v1/projects/DEMO/runnable/")["results"]

    async with bridged(server, agent_token, tmp_path, discover=discover) as session:
        tools = [tool.name for tool in (await session.list_tools()).tools]
        result = await session.call_tool("list_runnable", {"project": "DEMO"})
        unknown = await session.call_tool("list_runnable", {"project": "NOPE"})

    assert tools == TOOLS
    assert not result.is_error
    assert [t["key"] for t in body(result)["results"]] == [t["key"] for t in runnable]
    assert [t["key"] for t in runnable] == ["DEMO-9", "DEMO-15", "DEMO-16"]
    assert unknown.is_error
    assert body(unknown)["error"]["message"] == "Project NOPE not found."
    assert "Traceback" not in (tmp_path / "bridge.log").read_text()


async def test_a_bad_key_is_a_readable_error_through_the_bridge(server, tmp_path):
    # The session's task group wraps what initialize raised.
    with pytest.RaisesGroup(MCPError, flatten_subgroups=True) as caught:
        async with bridged(server, "ballet_notakey_0000000000000000", tmp_path):
            pass
    [refused] = leaves(caught.value)

    assert isinstance(refused, MCPError)
    assert refused.message == (
        "Ballet refused the request (HTTP 401): Invalid API key."
        " Check BALLET_KEY in this MCP server's configuration."
    )
    assert refused.data == {"code": "authentication_failed", "http_status": 401}
    assert "Traceback" not in (tmp_path / "bridge.log").read_text()
