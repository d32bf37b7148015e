"""The README's MCP configurations (*Coding agents over MCP*), one per client, parse and have the
shape their client reads: Claude Code's and Cursor's ``mcpServers`` with a URL and the key's
header, VS Code's ``servers`` with an input for the key, and Claude Desktop's local command, whose
arguments ``manage.py mcp_stdio`` accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from django.core.management import get_commands

from planner.management.commands.mcp_stdio import Command
from planner.mcp_server.stdio_bridge import endpoint

README = Path(__file__).resolve().parent.parent / "README.md"
CLIENTS = ["Claude Code", "VS Code", "Cursor", "Claude Desktop"]
ITEM = re.compile(r"^- \*\*(?P<client>[^*]+)\*\*(?P<text>.*?)```json\n(?P<block>.*?)```", re.S | re.M)


def configurations() -> dict[str, Any]:
    """Each client's JSON block of the README's MCP section, parsed."""
    text = README.read_text()
    section = text.split("\n## Coding agents over MCP\n", 1)[1].split("\n## ", 1)[0]
    found = {match["client"]: json.loads(match["block"]) for match in ITEM.finditer(section)}
    assert list(found) == CLIENTS, "each client's item, in order, with its JSON block"
    return found


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return configurations()


def _mcp_url(url: str) -> None:
    assert endpoint(url) == url
    assert url.endswith("/mcp")


def test_claude_code_takes_mcp_servers_over_http_with_the_key_from_the_environment(config):
    server = config["Claude Code"]["mcpServers"]["ballet"]

    assert set(server) == {"type", "url", "headers"}
    assert server["type"] == "http"
    _mcp_url(server["url"])
    assert server["headers"] == {"Authorization": "Bearer ${BALLET_KEY}"}


def test_vs_code_takes_servers_and_an_input_for_the_key(config):
    vscode = config["VS Code"]
    server = vscode["servers"]["ballet"]

    assert set(vscode) == {"inputs", "servers"}
    assert server["type"] == "http"
    _mcp_url(server["url"])
    reference = re.fullmatch(r"Bearer \$\{input:(?P<id>[\w-]+)\}", server["headers"]["Authorization"])
    assert reference is not None
    [key_input] = [i for i in vscode["inputs"] if i["id"] == reference["id"]]
    assert (key_input["type"], key_input["password"]) == ("promptString", True)


def test_cursor_takes_mcp_servers_with_a_url_and_the_key_from_the_environment(config):
    server = config["Cursor"]["mcpServers"]["ballet"]

    assert set(server) == {"url", "headers"}
    _mcp_url(server["url"])
    assert server["headers"] == {"Authorization": "Bearer ${env:BALLET_KEY}"}


def test_claude_desktop_starts_the_bridge_by_absolute_paths(config):
    server = config["Claude Desktop"]["mcpServers"]["ballet"]
    python, (manage, command, *arguments) = PurePosixPath(server["command"]), server["args"]
    checkout = PurePosixPath(manage).parent

    assert set(server) == {"command", "args", "env"}
    assert python.is_absolute()
    assert python == checkout / ".venv" / "bin" / "python"
    assert PurePosixPath(manage).is_absolute()
    assert PurePosixPath(manage).name == "manage.py"
    assert (command, get_commands()[command]) == ("mcp_stdio", "planner")
    options = Command().create_parser("manage.py", command).parse_args(arguments)
    _mcp_url(options.url)
    assert set(server["env"]) == {"BALLET_KEY"}
    assert server["env"]["BALLET_KEY"].startswith("ballet_")
