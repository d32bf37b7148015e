"""Context compaction, pure: estimate, decide, cut, build the summary request.

Before each model call the loop estimates the context: the provider's reported
usage for the last answer plus the messages added since, at about four
characters per token where no usage is known. Above ``compact_at_tokens`` it
summarizes everything before the latest human message (earlier summary
included) and from then on sends the summary plus the newer messages. The cut
is always just before a human message that began or continued a turn, so it
never separates a tool_use from its tool_result. Before either, old tool
results are cleared from what is sent (``planner/agent/clearing.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from planner.agent import clearing
from planner.agent.messages import (
    ChatMessage,
    ModelRequest,
    Provider,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)

CHARS_PER_TOKEN = 4
CUT_KINDS = ("human", "continue")
SUMMARY_MAX_TOKENS = 4096

SUMMARY_SYSTEM = """You compress a planning conversation between a human and Ballet's planner \
agent so the planner can go on without the full transcript.

Write a faithful, dense summary in Markdown with these sections:
- **Goal and context**: what the human is trying to achieve, in their words where it matters.
- **Decisions and agreements**: what was decided, with the reasons given.
- **Constraints**: limits the work must respect (dates, budgets, rules, technical limits).
- **Plan facts**: item keys (like DEMO-12), knowledge entries and skills consulted, with the \
facts from them that still matter (states, versions, acceptance criteria).
- **Changesets**: every changeset proposed, its number, status and what it contains.
- **Open questions and next steps**: what is unresolved or was promised.

Write "None." under a section with nothing to say. The goal, decisions, constraints and open \
questions may be offered to the team's knowledge base, so state each one so that it reads on its \
own. Keep identifiers, numbers and versions exact. Do not invent anything. Do not address the human; \
write notes for the planner."""


def message_chars(message: ChatMessage) -> int:
    total = 0
    for block in message.content:
        if isinstance(block, TextBlock):
            total += len(block.text)
        elif isinstance(block, ToolUseBlock):
            total += len(block.name) + len(json.dumps(block.input))
        else:
            total += len(block.content)
    return total


def estimate_tokens(
    *,
    messages: Sequence[ChatMessage],
    reported_tokens: int,
    reported_seq: int,
    summary: str,
    system: str,
    tools: Sequence[ToolDefinition],
) -> int:
    """The context the next call would send, in tokens.

    ``messages`` are those the request would hold (after any summary);
    ``reported_tokens`` is the provider's usage for the answer ending at
    ``reported_seq`` (0: unknown).
    """
    if reported_tokens:
        newer = sum(message_chars(m) for m in messages if m.seq > reported_seq)
        return reported_tokens + newer // CHARS_PER_TOKEN
    fixed = len(system) + len(summary) + sum(len(json.dumps(t.to_wire())) for t in tools)
    return (fixed + sum(message_chars(m) for m in messages)) // CHARS_PER_TOKEN


def should_compact(estimated_tokens: int, compact_at_tokens: int) -> bool:
    return estimated_tokens > compact_at_tokens


def find_cut(messages: Sequence[ChatMessage], summary_up_to: int | None) -> int | None:
    """The seq of the last message to summarize, or None when there is nothing new to fold.

    That is the message just before the latest human message which began or
    continued a turn; messages after ``summary_up_to`` only.
    """
    for index in range(len(messages) - 1, 0, -1):
        if messages[index].kind in CUT_KINDS:
            cut = messages[index - 1].seq
            if summary_up_to is None or cut > summary_up_to:
                return cut
            return None
    return None


def pairs_intact(messages: Sequence[ChatMessage], cut_seq: int) -> bool:
    """True when no tool_use at or before ``cut_seq`` has its result after it."""
    before = [m for m in messages if m.seq <= cut_seq]
    used = {b.id for m in before for b in m.content if isinstance(b, ToolUseBlock)}
    answered = {b.tool_use_id for m in before for b in m.content if isinstance(b, ToolResultBlock)}
    return used <= answered


def render_transcript(messages: Sequence[ChatMessage]) -> str:
    """The messages as plain text for the summarizer."""
    lines: list[str] = []
    for message in messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                speaker = "Planner" if message.role == "assistant" else _speaker(message.kind)
                lines.append(f"{speaker}: {block.text}")
            elif isinstance(block, ToolUseBlock):
                lines.append(f"Planner called {block.name} {json.dumps(block.input, ensure_ascii=False)}")
            else:
                status = "error" if block.is_error else "result"
                lines.append(f"Tool {status}: {block.content}")
    return "\n\n".join(lines)


def _speaker(kind: str) -> str:
    return "Workspace changes" if kind == "changes" else "Human"


def build_summary_request(
    *,
    model: str,
    previous_summary: str,
    messages: Sequence[ChatMessage],
    provider: Provider = "anthropic",
) -> ModelRequest:
    """The request that asks the model for the new summary."""
    parts = []
    if previous_summary:
        parts.append(f"<previous-summary>\n{previous_summary}\n</previous-summary>")
    parts.append(f"<transcript>\n{render_transcript(messages)}\n</transcript>")
    parts.append("Write the summary now, covering the previous summary and the transcript.")
    prompt = ChatMessage(role="user", content=(TextBlock("\n\n".join(parts)),), kind="human")
    return ModelRequest(
        model=model,
        system=SUMMARY_SYSTEM,
        messages=(prompt,),
        max_tokens=SUMMARY_MAX_TOKENS,
        purpose="compaction",
        provider=provider,
    )


def request_messages(
    messages: Sequence[ChatMessage],
    summary: str,
    summary_up_to: int | None,
    replay: clearing.Replay | None = None,
) -> tuple[ChatMessage, ...]:
    """The summary, if any, then every message after the one it covers, stale tool results
    cleared (``planner/agent/clearing.py``: replayed from the first message after the summary,
    with ``replay`` only from where its last call left off; its ``anchor`` then counts from that
    first message, one less than its place here when the summary leads)."""
    if not summary or summary_up_to is None:
        return clearing.clear_stale_results(messages, replay)
    head = ChatMessage(
        role="user",
        content=(
            TextBlock(
                "<conversation-summary>\nThe earlier conversation, summarized:\n\n"
                f"{summary}\n</conversation-summary>"
            ),
        ),
        kind="summary",
        seq=summary_up_to,
    )
    return (head, *clearing.clear_stale_results([m for m in messages if m.seq > summary_up_to], replay))
