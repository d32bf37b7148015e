"""A model call's body, encoded from kept parts (planner/agent/request_body.py), is the JSON of
the parameters the SDK's ``messages.create`` would be given, whatever the history, the anchor and
the tools; a part kept encoded never stands for another."""

from __future__ import annotations

import json
from typing import Any

import pytest

from planner.agent.messages import (
    ChatMessage,
    ModelRequest,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    wire_messages,
)
from planner.agent.request_body import request_body

CACHE = {"type": "ephemeral"}
TOOLS = (
    ToolDefinition("list_items", "List the plan's items.", {"type": "object", "properties": {}}),
    ToolDefinition(
        "get_item", "Read an item.", {"type": "object", "properties": {"key": {"type": "string"}}}
    ),
)


def create_params(request: ModelRequest) -> dict[str, Any]:
    """What ``messages.create(stream=True)`` is given for ``request``, built as the dicts the SDK
    takes: breakpoints on the system prompt, the last tool, the last message and the anchor's."""
    messages = wire_messages(request.messages)
    marked = [len(messages) - 1] if messages else []
    if request.anchor is not None and 0 <= request.anchor < len(messages) - 1:
        marked.append(request.anchor)
    for index in marked:
        if messages[index]["content"]:
            *head, last = messages[index]["content"]
            messages[index] = {**messages[index], "content": [*head, {**last, "cache_control": CACHE}]}
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": True,
        "system": [{"type": "text", "text": request.system, "cache_control": CACHE}],
        "messages": messages,
    }
    if request.tools:
        tools = [tool.to_wire() for tool in request.tools]
        tools[-1] = {**tools[-1], "cache_control": CACHE}
        params["tools"] = tools
    return params


def history(turns: int) -> tuple[ChatMessage, ...]:
    messages: list[ChatMessage] = []
    for turn in range(turns):
        use = ToolUseBlock(f"toolu_{turn}", "get_item", {"key": f"DEMO-{turn}"})
        messages += [
            ChatMessage("user", (TextBlock(f"Question {turn} «é» \u2028"),), "human", len(messages)),
            ChatMessage("assistant", (TextBlock("Reading."), use), "answer", len(messages) + 1),
            ChatMessage("user", (ToolResultBlock(use.id, '{"key": 1}', is_error=turn % 2 == 1),), "tool", 0),
            ChatMessage("assistant", (TextBlock(f"Answer {turn}."),), "answer", 0),
        ]
    return tuple(messages)


@pytest.mark.parametrize("anchor", [None, 0, 3, 6, 40])
@pytest.mark.parametrize("tools", [(), TOOLS])
def test_the_body_is_what_messages_create_would_be_given(anchor, tools):
    request = ModelRequest(
        model="claude-x", system="You plan.", messages=history(3), max_tokens=99, tools=tools, anchor=anchor
    )
    assert json.loads(request_body(request)) == create_params(request)


def test_runs_of_one_role_merge_and_a_message_sent_again_is_encoded_once():
    messages = history(2)
    note = ChatMessage("user", (TextBlock("A change note."),), "note", 0)
    merged = (*messages, note, ChatMessage("user", (TextBlock("And a question."),), "human", 0))
    request = ModelRequest(model="m", system="s", messages=merged, max_tokens=10, tools=TOOLS, anchor=2)
    assert json.loads(request_body(request)) == create_params(request)
    assert "wire_json" in vars(messages[1])  # kept with the message for the next request
    later = ModelRequest(model="m", system="s", messages=(*merged, *history(1)), max_tokens=10, tools=TOOLS)
    assert json.loads(request_body(later)) == create_params(later)


def test_another_set_of_tools_of_the_same_names_is_never_read_from_the_kept_one():
    first = ModelRequest(model="m", system="s", messages=history(1), max_tokens=10, tools=TOOLS)
    changed = (TOOLS[0], ToolDefinition("get_item", "Read an item.", {"type": "object", "properties": {}}))
    second = ModelRequest(model="m", system="s", messages=history(1), max_tokens=10, tools=changed)
    assert json.loads(request_body(first))["tools"][1]["input_schema"]["properties"] == {
        "key": {"type": "string"}
    }
    assert json.loads(request_body(second))["tools"][1]["input_schema"]["properties"] == {}
    assert json.loads(request_body(first)) == create_params(first)
