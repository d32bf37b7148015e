"""The demo planner: a scripted stand-in for the model that needs no key.

(docs/architecture.md#the-demo-planner)

:class:`DemoGateway` answers a :class:`ModelRequest` as a model would, from the
request alone: for the latest human message it recognises a few plain requests
("what can run next", an item key, "find …", "add a ticket for …", "replan the
payments epic") and calls the real tools (the loop runs them, with every check,
fold, card and approval); on their results it streams an answer composed from
their output. A replan runs over two sub-chats, in which it does its brief's
small job (:mod:`planner.agent.demo_subchats`). In a
question's sub-chat it searches the plan and the knowledge base, asks the
project's humans with ``ask_human``, and passes their answer on with
``answer_question``. Titles come from the first message and compaction is a
plain list of what the human asked. It knows nothing of Django: the wording of
its answers is in :mod:`planner.agent.demo_replies`.

Each call is metered as a zero-token record of the model ``demo``: the usage
page counts the calls, the daily token budget is untouched.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, assert_never

from planner.agent import demo_replies as replies
from planner.agent import demo_subchats as subchats
from planner.agent.calls import CallRecord, Meter, StreamSink
from planner.agent.demo_replies import Scripted
from planner.agent.messages import (
    ChatMessage,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

DEMO_MODEL = "demo"  # the model name of its usage records and answers
HUMAN_KINDS = ("human", "continue", "steer")
CHUNK_WORDS = 4  # words per streamed delta
MAX_QUERY = subchats.MAX_QUERY  # search_project's and search_knowledge's limit
SEARCH_LIMIT = subchats.SEARCH_LIMIT  # hits of each search in an answer

_ITEM_KEY = subchats.ITEM_KEY
_PROPOSE = re.compile(
    r"^\W*(?:please\s+)?(?:(?:add|create|open|file)\s+(?:a\s+|an\s+)?(?:new\s+)?(?:ticket|task)"
    r"|propose(?:\s+(?:a|an)\s+(?:new\s+)?(?:ticket|task|change))?)\b[\s:,-]*"
    r"(?:(?:for|to|about|that)\b\s*)?(?P<what>.*)",
    re.IGNORECASE | re.DOTALL,
)
_SEARCH = re.compile(
    r"^\W*(?:please\s+)?(?:find|search|look\s+(?:up|for))\b(?:\s+for\b)?[\s:]*(?P<what>.*)",
    re.IGNORECASE | re.DOTALL,
)
# "where is booking implemented?", "find the cancellation window in the code": repo_search's job.
_CODE = re.compile(
    r"^\W*(?:please\s+)?(?:where\s+(?:is|are)\s+(?P<where>.+?)\s+"
    r"(?:implemented|defined|handled|coded|written|done)\b"
    r"|(?:find|search\s+for|look\s+for|look\s+up)\s+(?P<find>.+?)\s+in\s+the\s+"
    r"(?:code(?:base)?|repository|repo|source)\b)",
    re.IGNORECASE | re.DOTALL,
)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
MAX_CODE_WORDS = 4  # of the pattern the demo searches the code for
_RUNNABLE = re.compile(r"runnable|run next|can run|ready to run|\bnext\b", re.IGNORECASE)
_ASKER = re.compile(r"\(Asked by (.+?), a worker\.")
_HUMAN_PART = re.compile(r"<human>\n(.*?)\n</human>", re.DOTALL)


class DemoGateway:
    """The gateway of the ``demo`` provider: scripted answers, streamed, metered at zero tokens."""

    def __init__(self, *, pause: float = 0.02) -> None:
        self.pause = pause  # between streamed deltas, so that the answer streams as a model's does

    async def complete(
        self, request: ModelRequest, *, api_key: str | None, sink: StreamSink | None, meter: Meter
    ) -> ModelResponse:
        started = time.perf_counter()
        outcome = "error"
        try:
            answer = script(request)
            await self._stream(answer.text, sink)
            outcome = "ok"
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            latency = (time.perf_counter() - started) * 1000
            await asyncio.shield(meter(CallRecord(request.purpose, DEMO_MODEL, Usage(), latency, outcome)))
        content: list[TextBlock | ToolUseBlock] = [TextBlock(answer.text)] if answer.text else []
        content += [ToolUseBlock(f"toolu_demo_{uuid.uuid4().hex[:20]}", n, i) for n, i in answer.calls]
        return ModelResponse(
            content=tuple(content),
            stop_reason="tool_use" if answer.calls else "end_turn",
            usage=Usage(),
            model=DEMO_MODEL,
        )

    async def _stream(self, text: str, sink: StreamSink | None) -> None:
        if sink is None:
            return
        for delta in deltas(text):
            await sink.on_text(delta)
            await asyncio.sleep(self.pause)


def deltas(text: str) -> list[str]:
    """``text`` in pieces of a few words, as a model streams it; joined, they are ``text``."""
    words = re.findall(r"\s*\S+\s*", text) or ([text] if text else [])
    return ["".join(words[i : i + CHUNK_WORDS]) for i in range(0, len(words), CHUNK_WORDS)]


def script(request: ModelRequest) -> Scripted:
    """The demo's answer to ``request``."""
    match request.purpose:
        case "title":
            return Scripted(_title(request))
        case "compaction":
            return Scripted(replies.summary(_first_text(request)))
        case "turn":
            return _turn(request)
        case "reuse_judge":  # never asked (the demo has no judge: its threshold alone decides); none
            return Scripted("0")
        case unknown:
            assert_never(unknown)


def _first_text(request: ModelRequest) -> str:
    return request.messages[0].text if request.messages else ""


def _title(request: ModelRequest) -> str:
    """A few words of the chat's first message (the title request quotes it in ``<human>``)."""
    found = _HUMAN_PART.search(_first_text(request))
    words = (found.group(1) if found else "").split()
    return " ".join(words[:6]) or "A demo chat"


@dataclass(frozen=True)
class _Since:
    """The latest answer's calls, and what came after it: their results and the human's words."""

    calls: dict[str, ToolUseBlock]
    results: list[ToolResultBlock]
    said: list[str]
    first_answer: bool  # the planner has not answered in this history yet


def _since_last_answer(messages: tuple[ChatMessage, ...]) -> _Since:
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    after = messages[last + 1 :]
    return _Since(
        calls={use.id: use for use in messages[last].tool_uses} if last >= 0 else {},
        results=[b for m in after for b in m.content if isinstance(b, ToolResultBlock)],
        said=[m.text for m in after if m.kind in HUMAN_KINDS and m.text.strip()],
        first_answer=last < 0,
    )


def _turn(request: ModelRequest) -> Scripted:
    since = _since_last_answer(request.messages)
    in_question = any(tool.name == "answer_question" for tool in request.tools)
    in_subchat = subchats.SUBCHAT_MARK in request.system
    if (opening := _opening(since, in_question=in_question, in_subchat=in_subchat)) is not None:
        return opening
    if since.said:
        code = any(tool.name == "repo_search" for tool in request.tools)
        return recognised(since.said[-1], splits=not (in_question or in_subchat), code=code)
    if since.results:
        return _on_results(request, since, in_question=in_question, in_subchat=in_subchat)
    return Scripted(replies.HELP)


def _opening(since: _Since, *, in_question: bool, in_subchat: bool) -> Scripted | None:
    """A question's or a sub-chat's own steps: its first message, the humans' answer."""
    if in_question:
        answered = [r for r in since.results if _name(since, r) == "ask_human"]
        if answered:
            return _pass_on(answered[0])
        if since.first_answer and since.said:
            return _look_up_question(since.said[0])
    elif in_subchat and since.first_answer and since.said:
        return subchats.brief_work(since.said[0])
    return None


def _on_results(request: ModelRequest, since: _Since, *, in_question: bool, in_subchat: bool) -> Scripted:
    """The answer to a round of tool results: composed from them, or a question's or a replan's
    next step."""
    outputs = [(_name(since, r), replies.output_of(r.content), r.is_error) for r in since.results]
    if in_question and {name for name, _, _ in outputs} <= {"search_project", "search_knowledge"}:
        return _escalate(request, outputs)
    if in_subchat:
        return subchats.brief_answer(outputs)
    uses = [since.calls.get(r.tool_use_id) for r in since.results]
    step = subchats.replan_step(_last_said(request.messages), uses, outputs)
    return step if step is not None else Scripted(replies.report(outputs))


def _last_said(messages: tuple[ChatMessage, ...]) -> str:
    """The human's latest words in the history."""
    return next((m.text for m in reversed(messages) if m.kind in HUMAN_KINDS and m.text.strip()), "")


def _name(since: _Since, result: ToolResultBlock) -> str:
    use = since.calls.get(result.tool_use_id)
    return use.name if use is not None else "a tool"


def recognised(text: str, *, splits: bool = True, code: bool = False) -> Scripted:
    """The tool calls (and the words before them) for a human's plain request; else what the
    demo can do. A replan starts sub-chats only where ``splits`` (not in a sub-chat); the code is
    searched only where ``code`` (repo_search is offered: the project has a repository)."""
    if (found := _CODE.match(text)) is not None:
        return _search_code(found.group("where") or found.group("find"), code=code)
    return _plain(text, splits=splits)


def _plain(text: str, *, splits: bool) -> Scripted:
    """The plan's requests: propose, find, replan, what can run, an item."""
    if (found := _PROPOSE.match(text)) is not None:
        return _propose(found.group("what"), text)
    if (found := _SEARCH.match(text)) is not None:
        return _search(found.group("what"))
    if subchats.REPLAN.search(text):
        return subchats.replan_start(text) if splits else Scripted(replies.NO_SUBCHATS_HERE)
    if _RUNNABLE.search(text):
        return Scripted(replies.RUNNABLE, (("list_runnable", {}),))
    if (key := _ITEM_KEY.search(text)) is not None:
        return Scripted(replies.reading(key.group(1).upper()), (("get_item", {"key": key.group(1).upper()}),))
    return Scripted(replies.HELP)


def _search(what: str) -> Scripted:
    query = what.strip().rstrip("?.!").strip()[:MAX_QUERY]
    if not query:
        return Scripted(replies.SEARCH_WHAT)
    return Scripted(replies.searching(query), subchats.searches(query))


def _search_code(what: str, *, code: bool) -> Scripted:
    """repo_search for ``what``'s words, a naive singular of the last (*bookings* finds *booking*
    too), in any case, joined by a space, ``_`` or ``-``."""
    words = re.findall(r"[^\W_]+", _ARTICLE.sub("", what.strip()))[:MAX_CODE_WORDS]
    if not words:
        return Scripted(replies.CODE_WHAT)
    if not code:
        return Scripted(replies.NO_REPOSITORY)
    last = words[-1]
    if len(last) > 3 and last.lower().endswith("s") and not last.lower().endswith("ss"):
        words[-1] = last[:-1]
    pattern = "[ _-]".join(
        "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in w) for w in words
    )
    shown = " ".join(words)
    return Scripted(replies.searching_code(shown), (("repo_search", {"pattern": pattern, "regex": True}),))


def _propose(what: str, text: str) -> Scripted:
    title = " ".join(what.split()).rstrip(".!?")[: replies.MAX_TITLE].strip()
    if not title:
        return Scripted(replies.PROPOSE_WHAT)
    title = title[0].upper() + title[1:]
    operation = {
        "op": "create",
        "ref": "new",
        "kind": "ticket",
        "fields": {"title": title, "description": replies.proposed_description(text)},
    }
    proposal = {
        "title": f"Add a ticket: {title}"[: replies.MAX_TITLE],
        "rationale": replies.proposed_rationale(text),
        "operations": [operation],
    }
    return Scripted(replies.proposing(title), (("propose_changeset", proposal),))


def _look_up_question(first: str) -> Scripted:
    """A question's sub-chat opens: search the plan and the knowledge base for it."""
    query = " ".join(_question_of(first).split())[:MAX_QUERY]
    return Scripted(replies.LOOKING_UP, subchats.searches(query))


def _question_of(first: str) -> str:
    """The question of a sub-chat's first message, without how to answer it."""
    return first.split("\n\n(Asked by ", 1)[0].strip()


def _escalate(request: ModelRequest, outputs: list[tuple[str, Any, bool]]) -> Scripted:
    first = next((m.text for m in request.messages if m.kind == "human"), "")
    asker = _ASKER.search(first)
    question = replies.escalation(asker.group(1) if asker else "an agent", _question_of(first))
    return Scripted(replies.searched_for_question(outputs), (("ask_human", {"question": question}),))


def _pass_on(result: ToolResultBlock) -> Scripted:
    """The humans' answer to ``ask_human`` in a question's sub-chat goes to the agent that asked."""
    output = replies.output_of(result.content)
    answer = output.get("answer") if isinstance(output, dict) and not result.is_error else None
    if not isinstance(answer, str) or not answer.strip():
        return Scripted(replies.unanswered(output))
    by = output.get("answered_by") or "A human"
    return Scripted(replies.passing_on(str(by)), (("answer_question", {"answer": answer.strip()}),))
