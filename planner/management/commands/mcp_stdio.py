"""``manage.py mcp_stdio --url URL``: Ballet's MCP server over stdio, for clients that only start
local commands (Claude Desktop). The key comes from ``BALLET_KEY`` in the environment; the bridge is
``planner/mcp_server/stdio_bridge.py``. A missing key or a bad URL is said on standard error, and
the command exits 1.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from planner.mcp_server.stdio_bridge import KEY_VARIABLE, TIMEOUT_SECONDS, BridgeError, bridge_run


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds from 1 to 3600, got {text!r}")
    return seconds


class Command(BaseCommand):
    help = (
        f"Serve Ballet's MCP server over stdio: forward the JSON-RPC messages of standard input to "
        f"the server at --url, with the API key in {KEY_VARIABLE}, and write its answers to standard output."
    )
    # It may run on a laptop against a remote Ballet: this checkout's configuration does not matter.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url", required=True, help="Ballet's MCP address, such as https://ballet.example.com/mcp"
        )
        parser.add_argument(
            "--timeout",
            type=_seconds,
            default=TIMEOUT_SECONDS,
            help=f"seconds to wait for an answer (default {TIMEOUT_SECONDS:g}; tools wait up to 60)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            bridge_run(url=options["url"], key=os.environ.get(KEY_VARIABLE), timeout=options["timeout"])
        except BridgeError as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:  # Ctrl-C in a terminal ends it as its input's end does
            pass
