"""The typed vocabulary of the planner loop: content blocks, messages, requests, answers.

Blocks mirror the provider's content-block form; ``to_wire`` gives the JSON the
Messages API takes and the transcript stores, ``block_from_wire`` reads it back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, TypeAlias

Role = Literal["user", "assistant"]
# Who answers a model call: Anthropic's Messages API, or the demo planner
# (docs/architecture.md#the-demo-planner).
Provider = Literal["anthropic", "demo"]
StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]


# A block's wire form is built once and shared by every request that sends it (a session's
# history goes out again with each model call): callers never modify it.


@dataclass(frozen=True)
class TextBlock:
    text: str

    def to_wire(self) -> dict[str, Any]:
        return self._wire

    @cached_property
    def _wire(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True)
class ToolUseBlock:
    id: str
    name: str
    input: dict[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return self._wire

    @cached_property
    def _wire(self) -> dict[str, Any]:
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": self.input}


@dataclass(frozen=True)
class ToolResultBlock:
    tool_use_id: str
    content: str
    is_error: bool = False

    def to_wire(self) -> dict[str, Any]:
        return self._wire

    @cached_property
    def _wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": self.tool_use_id,
            "content": self.content,
        }
        if self.is_error:
            wire["is_error"] = True
        return wire


Block: TypeAlias = TextBlock | ToolUseBlock | ToolResultBlock


def block_from_wire(data: dict[str, Any]) -> Block:
    kind = data.get("type")
    if kind == "text":
        return TextBlock(text=data["text"])
    if kind == "tool_use":
        return ToolUseBlock(id=data["id"], name=data["name"], input=dict(data.get("input") or {}))
    if kind == "tool_result":
        content = data.get("content", "")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return ToolResultBlock(
            tool_use_id=data["tool_use_id"], content=content, is_error=bool(data.get("is_error"))
        )
    raise ValueError(f"unknown content block type {kind!r}")


@dataclass(frozen=True)
class ChatMessage:
    """A message of the transcript; ``seq`` is its place in the session."""

    role: Role
    content: tuple[Block, ...]
    kind: str
    seq: int = 0

    def wire_content(self) -> list[dict[str, Any]]:
        return [block.to_wire() for block in self.content]

    @cached_property
    def wire(self) -> dict[str, Any]:
        """The message as the Messages API takes it, alone (``wire_messages``); built once."""
        return _wire_message(self.role, list(self.content))

    @cached_property
    def wire_json(self) -> str:
        """:attr:`wire` encoded as JSON, once (``planner/agent/request_body.py``)."""
        return json.dumps(self.wire)

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def context_tokens(self) -> int:
        """Everything the model saw and wrote: the size of the context after this answer."""
        return (
            self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
            + self.output_tokens
        )


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    input_schema: dict[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass(frozen=True)
class ModelRequest:
    model: str
    system: str
    messages: tuple[ChatMessage, ...]
    max_tokens: int
    tools: tuple[ToolDefinition, ...] = ()
    purpose: Literal["turn", "compaction", "title", "reuse_judge"] = "turn"
    provider: Provider = "anthropic"
    # A message (its index) whose last block is a cache breakpoint too: where the next clearing of
    # stale tool results starts (docs/architecture.md#clearing-stale-tool-results).
    anchor: int | None = None


@dataclass(frozen=True)
class ModelResponse:
    content: tuple[Block, ...]
    stop_reason: StopReason
    usage: Usage
    model: str

    @property
    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


@dataclass
class PartialAnswer:
    """What a model call streamed so far; kept when a turn is stopped mid-call."""

    text_parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def reset(self) -> None:
        self.text_parts.clear()


def wire_messages(messages: tuple[ChatMessage, ...] | list[ChatMessage]) -> list[dict[str, Any]]:
    """The messages as the Messages API takes them.

    Consecutive messages of one role merge into one (change notes and a human
    message after tool results, say), with tool results first in a user
    message, as the API requires. A message that merges with none is sent as
    its own ``wire``, built once for every request that sends it.
    """
    return [wire_group(run) for run in role_runs(messages)]


def role_runs(messages: tuple[ChatMessage, ...] | list[ChatMessage]) -> list[list[ChatMessage]]:
    """The messages in runs of one role: each run is one message on the wire."""
    runs: list[list[ChatMessage]] = []
    for message in messages:
        if runs and runs[-1][-1].role == message.role:
            runs[-1].append(message)
        else:
            runs.append([message])
    return runs


def wire_group(group: list[ChatMessage]) -> dict[str, Any]:
    """A run of messages of one role, as the one message the API takes."""
    if len(group) == 1:
        return group[0].wire
    return _wire_message(group[0].role, [block for message in group for block in message.content])


def _wire_message(role: Role, blocks: list[Block]) -> dict[str, Any]:
    if role == "user":
        blocks.sort(key=lambda b: not isinstance(b, ToolResultBlock))
    return {"role": role, "content": [b.to_wire() for b in blocks]}
