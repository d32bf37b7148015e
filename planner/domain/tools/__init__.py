"""The planner's tools, by name, in the order the model is shown them: the twelve of the seed,
the repository reads (``repos``) in a project that has a repository, ``start_subchat`` and
``ask_human`` in every session, ``answer_question`` in a question's sub-chat (docs/architecture.md).

A session is shown one of four fixed lists (:func:`definitions`), the same for every turn of a
project while its repositories stay linked, so the prompt cache keeps them."""

from __future__ import annotations

from planner.agent.messages import ToolDefinition
from planner.domain.tools import asking, knowledge, plan, repos, skills, subchats
from planner.domain.tools.base import ToolContext, ToolOutcome, ToolSpec, run_tool
from tracker.trust.permissions import access_scope

TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        *plan.SPECS,
        *skills.SPECS,
        *knowledge.SPECS,
        *repos.SPECS,
        *subchats.SPECS,
        *asking.SPECS,
    )
}
# What a session's model is shown: answer_question only in a question's sub-chat, the repository
# reads only in a project with a repository (REPO_…).
REPO_DEFINITIONS: tuple[ToolDefinition, ...] = tuple(
    spec.definition() for spec in TOOLS.values() if spec is not asking.ANSWER_QUESTION
)
REPO_QUESTION_DEFINITIONS: tuple[ToolDefinition, ...] = (
    *REPO_DEFINITIONS,
    asking.ANSWER_QUESTION.definition(),
)
DEFINITIONS: tuple[ToolDefinition, ...] = tuple(d for d in REPO_DEFINITIONS if d.name not in repos.NAMES)
QUESTION_DEFINITIONS: tuple[ToolDefinition, ...] = (*DEFINITIONS, asking.ANSWER_QUESTION.definition())


def definitions(*, question: bool, repositories: bool) -> tuple[ToolDefinition, ...]:
    """The tools a session is shown: in a question's sub-chat (``question``) or not, in a project
    with a linked repository (``repositories``) or not."""
    if repositories:
        return REPO_QUESTION_DEFINITIONS if question else REPO_DEFINITIONS
    return QUESTION_DEFINITIONS if question else DEFINITIONS


def call_tool(name: str, arguments: object, context: ToolContext) -> ToolOutcome:
    """Run the tool ``name`` for ``context``; failures come back as error outcomes.

    The human's access is read afresh for each call, or once for a round of calls the model
    made at once when the caller opened an :func:`access_scope` around them: a member
    removed while a turn runs is refused from the next round on.
    """
    with access_scope(within=True):
        return run_tool(TOOLS.get(name), name, arguments, context)


__all__ = [
    "DEFINITIONS",
    "QUESTION_DEFINITIONS",
    "REPO_DEFINITIONS",
    "REPO_QUESTION_DEFINITIONS",
    "TOOLS",
    "ToolContext",
    "ToolOutcome",
    "call_tool",
    "definitions",
]
