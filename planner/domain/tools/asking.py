"""Tools that reach a human: ask_human (every session) and answer_question (a question's sub-chat).

``ask_human`` never runs as a handler: the turn pauses on a stored request
(``planner/domain/services/human_requests.py``) and the human's answer becomes the call's result
(docs/domain.md#the-planners-requests-to-humans). ``answer_question`` answers the question of the sub-chat the
planner speaks in (docs/domain.md#agents-questions).
"""

from __future__ import annotations

from planner.domain.services.agent_questions import question_answer
from planner.domain.tools.base import JsonObject, ToolContext, ToolError, ToolSpec
from tracker.errors import InvalidStateError
from tracker.trust.permissions import PLANNER_CHAT

MAX_QUESTION = 4_000
MAX_OPTIONS = 10
MAX_OPTION = 200
MAX_ANSWER = 16_000


def _asked(ctx: ToolContext, args: JsonObject) -> JsonObject:
    raise ToolError("internal_error", "ask_human is answered by a human, never run.")


def answer_question(ctx: ToolContext, args: JsonObject) -> JsonObject:
    if ctx.session_id is None:  # a call outside any planner session (MCP offers no such tool)
        raise ToolError("invalid_state", "answer_question answers in a question's sub-chat only.")
    try:
        question = question_answer(session_id=ctx.session_id, user=ctx.user, answer=args["answer"])
    except InvalidStateError as exc:
        raise ToolError("invalid_state", exc.message) from exc
    return {
        "question": question.pk,
        "status": question.status,
        "answered_by": question.answered_by,  # the human whose reply it stands on, or the planner
        "answered_via": question.answered_via,  # the planner, when it worded a human's reply
    }


ASK_HUMAN = ToolSpec(
    name="ask_human",
    description="Ask the human a question and wait for the answer: when you need a decision or a fact "
    "you cannot find in the plan, skills or knowledge, instead of guessing. Give options when the "
    "answer is a choice; the human may still answer in their own words. The turn pauses until they "
    "answer; the result is their answer. In a question's sub-chat, the project's members are asked.",
    input_schema={
        "type": "object",
        "properties": {
            "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION},
            "options": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_OPTION},
                "maxItems": MAX_OPTIONS,
                "uniqueItems": True,
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    },
    permission=PLANNER_CHAT,
    handler=_asked,
    asks_human=True,
)

ANSWER_QUESTION = ToolSpec(
    name="answer_question",
    description="Answer the question this sub-chat was opened for; the agent that asked reads your "
    "answer. Answer from the plan and knowledge; if they do not hold the answer, ask_human first. "
    "Only in a question's sub-chat, once.",
    input_schema={
        "type": "object",
        "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": MAX_ANSWER}},
        "required": ["answer"],
        "additionalProperties": False,
    },
    permission=PLANNER_CHAT,
    handler=answer_question,
    writes=True,
)

SPECS = (ASK_HUMAN, ANSWER_QUESTION)
