"""A model call's request body, encoded as the Messages API takes it, from parts encoded once.

The SDK's ``messages.create`` copies, transforms and encodes the whole request at every call: the
system prompt, the tools' schemas and every message of the history, the same at each call of a
session but for the last few messages. Here each part is encoded once and kept: the system
prompt and the tools by what they are (a few sessions' worth), a message with the message
(``ChatMessage.wire_json``). A request is their concatenation, less the messages that carry a
cache breakpoint, encoded anew. ``tests/planner/agent/test_request_body.py`` holds it to the
parameters ``messages.create`` would be given.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from typing import Any

from planner.agent.messages import ChatMessage, ModelRequest, ToolDefinition, role_runs, wire_group

CACHE = {"type": "ephemeral"}
KEPT_TOOL_SETS = 32  # the tools of this many requests' sets kept encoded: a process's few prompts


def request_body(request: ModelRequest) -> bytes:
    """The JSON body of a streamed call of ``request``, with cache breakpoints on the system
    prompt, the tools, the last message and ``request.anchor``'s."""
    groups = role_runs(request.messages)
    marked = {len(groups) - 1} if groups else set()
    if request.anchor is not None and 0 <= request.anchor < len(groups) - 1:
        marked.add(request.anchor)
    messages = ",".join(
        _marked_json(wire_group(group)) if index in marked else _json(group)
        for index, group in enumerate(groups)
    )
    head = json.dumps({"model": request.model, "max_tokens": request.max_tokens, "stream": True})[:-1]
    tools = f',"tools":{_tools_json(request.tools)}' if request.tools else ""
    return f'{head},"system":{_system_json(request.system)}{tools},"messages":[{messages}]}}'.encode()


def _json(group: list[ChatMessage]) -> str:
    return group[0].wire_json if len(group) == 1 else json.dumps(wire_group(group))


def _marked_json(message: dict[str, Any]) -> str:
    """The message with a cache breakpoint on its last block."""
    if message["content"]:
        *head, last = message["content"]
        message = {**message, "content": [*head, {**last, "cache_control": CACHE}]}
    return json.dumps(message)


@functools.lru_cache(maxsize=64)
def _system_json(system: str) -> str:
    return json.dumps([{"type": "text", "text": system, "cache_control": CACHE}])


_tool_sets: OrderedDict[int, tuple[tuple[ToolDefinition, ...], str]] = OrderedDict()
_tool_sets_lock = threading.Lock()


def _tools_json(tools: tuple[ToolDefinition, ...]) -> str:
    """The tools with a cache breakpoint on the last, kept by the tuple itself (a session's tools
    are one tuple, built once with its prompt); another tuple of the same tools is encoded anew."""
    with _tool_sets_lock:  # loops of other threads call models too (a worker's, a sync caller's)
        kept = _tool_sets.get(id(tools))
        if kept is not None and kept[0] is tools:
            _tool_sets.move_to_end(id(tools))
            return kept[1]
    wire = [tool.to_wire() for tool in tools]
    wire[-1] = {**wire[-1], "cache_control": CACHE}
    encoded = json.dumps(wire)
    with _tool_sets_lock:
        _tool_sets[id(tools)] = (tools, encoded)
        if len(_tool_sets) > KEPT_TOOL_SETS:
            _tool_sets.popitem(last=False)
    return encoded
