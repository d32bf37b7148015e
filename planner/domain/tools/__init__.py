"""The planner's tools, by name, in the order the model is shown them: the twelve of the seed,
``start_subchat`` and ``ask_human`` in every session, ``answer_question`` in a question's sub-chat
(docs/architecture.md)."""

from __future__ import annotations

from planner.agent.messages import ToolDefinition
from planner.domain.tools import asking, knowledge, plan, skills, subchats
from planner.domain.tools.base import ToolContext, ToolOutcome, ToolSpec, run_tool
from tracker.trust.permissions import access_scope

TOOLS: dict[str, ToolSpec] = {
    spec.name: spec for spec in (*plan.SPECS, *skills.SPECS, *knowledge.SPECS, *subchats.SPECS, *asking.SPECS)
}
# What a session's model is shown: answer_question only in a question's sub-chat.
DEFINITIONS: tuple[ToolDefinition, ...] = tuple(
    spec.definition() for spec in TOOLS.values() if spec is not asking.ANSWER_QUESTION
)
QUESTION_DEFINITIONS: tuple[ToolDefinition, ...] = (*DEFINITIONS, asking.ANSWER_QUESTION.definition())


def call_tool(name: str, arguments: object, context: ToolContext) -> ToolOutcome:
    """Run the tool ``name`` for ``context``; failures come back as error outcomes.

    The human's access is read afresh for each call, or once for a round of calls the model
    made at once when the caller opened an :func:`access_scope` around them: a member
    removed while a turn runs is refused from the next round on.
    """
    with access_scope(within=True):
        return run_tool(TOOLS.get(name), name, arguments, context)


__all__ = ["DEFINITIONS", "QUESTION_DEFINITIONS", "TOOLS", "ToolContext", "ToolOutcome", "call_tool"]
