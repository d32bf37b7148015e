"""A simulation of the Messages API's prompt cache, for :class:`tests.fakes.messages_api.FakeMessagesAPI`.

A request is read as the API caches it: its blocks in order, tools, then system, then each
message's content blocks. A block with ``cache_control`` is a breakpoint: the request's prefix up to
it is written to the cache. A later request reads the longest cached prefix it starts with, looked
up at each of its breakpoints and at the block boundaries up to :data:`LOOKBACK_BLOCKS` before one
(as the API does). Usage then says: ``cache_read_input_tokens`` that prefix,
``cache_creation_input_tokens`` the rest up to the last breakpoint, ``input_tokens`` what follows it.

Simplified: tokens are estimated at :data:`CHARS_PER_TOKEN` characters of the block's JSON (without
its ``cache_control``); there is no minimum cacheable size, no expiry, and one cache for every model
and key. The standard library only.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, Final

CHARS_PER_TOKEN: Final = 4
LOOKBACK_BLOCKS: Final = 20


def request_blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The request's blocks in cache order: (canonical text, is a breakpoint)."""
    blocks: list[tuple[str, bool]] = []

    def add(prefix: str, block: Any) -> None:
        marked = isinstance(block, dict) and "cache_control" in block
        if marked:
            block = {k: v for k, v in block.items() if k != "cache_control"}
        blocks.append((prefix + json.dumps(block, sort_keys=True), marked))

    for tool in body.get("tools") or []:
        add("tool:", tool)
    system = body.get("system")
    if isinstance(system, str):
        add("system:", {"type": "text", "text": system})
    elif isinstance(system, list):
        for block in system:
            add("system:", block)
    for index, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content or []:
            add(f"{index}:{message.get('role')}:", block)
    return blocks


class PromptCache:
    """The cached prefixes (by digest, with their size in tokens) of every request seen so far."""

    def __init__(self) -> None:
        self._entries: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(input_tokens, cache_creation_input_tokens, cache_read_input_tokens) of ``body``, whose
        breakpoints are then cached."""
        blocks = request_blocks(body)
        digests: list[bytes] = []
        tokens: list[int] = []  # tokens[i]: the prefix up to and with block i
        running = hashlib.sha256()
        total = 0
        for text, _ in blocks:
            running.update(text.encode())
            running.update(b"\x00")
            digests.append(running.copy().digest())
            total += len(text) // CHARS_PER_TOKEN
            tokens.append(total)
        breakpoints = [i for i, (_, marked) in enumerate(blocks) if marked]
        with self._lock:
            read = 0
            for point in breakpoints:
                for i in range(point, max(-1, point - LOOKBACK_BLOCKS - 1), -1):
                    if digests[i] in self._entries:
                        read = max(read, tokens[i])
                        break
            for point in breakpoints:
                self._entries[digests[point]] = tokens[point]
        cached = tokens[breakpoints[-1]] if breakpoints else 0
        written = max(0, cached - read)
        return total - max(cached, read), written, read
