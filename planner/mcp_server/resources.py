"""MCP beyond tools (docs/agents.md#resources-and-prompts): Ballet's objects as ``ballet://``
resources, and the prompts of an agent's two jobs.

A resource reads what its tool reads, as its tool reads it (the same handler, permission and
output, within the key's ``read`` scope): ``ballet://{project}/items/{key}`` is ``get_item``,
``…/items/{key}/brief`` ``get_brief``, ``ballet://{project}/knowledge/{id}`` ``get_knowledge``,
``ballet://{project}/questions/{id}`` ``get_question``. ``resources/list`` names what a worker
wants at hand: the runnable tickets and the newest knowledge of each project the reader reads (the
first :data:`MAX_PROJECTS` by key). An unknown or unreadable resource is the JSON-RPC error -32602,
as an unknown tool is; a resource of a project the reader may not read answers as one that does
not exist.

Prompts: ``work_on_ticket`` (claim, brief, ask, report; the brief embedded) and ``plan_change``
(read the plan and knowledge, then ``propose_changeset`` for a human to review).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from knowledge.selectors import knowledge_of_project
from planner.domain.tools.base import ToolContext, run_tool
from planner.mcp_server.tools import SPECS, project_named, user_of
from tracker.errors import BalletError
from tracker.models import Project, Scope
from tracker.selectors import runnable_tickets
from tracker.trust.permissions import TRACKER_READ, access_scope, project_ids_with
from tracker.web.credentials import KeyScopes, scope_require

MAX_PROJECTS: Final = 10  # resources/list reads the runnable tickets and knowledge of this many
MAX_LISTED: Final = 20  # of each kind, a project
JSON: Final = "application/json"

_URI = re.compile(
    r"ballet://(?P<project>[A-Za-z0-9_-]{1,10})/"
    r"(?:items/(?P<item>[A-Za-z0-9_-]{1,30})(?P<brief>/brief)?|knowledge/(?P<entry>\d{1,12})|questions/(?P<question>\d{1,12}))"
)

TEMPLATES: Final = (
    types.ResourceTemplate(
        name="ticket",
        uri_template="ballet://{project}/items/{key}",
        description="An item of the plan as get_item reads it: its description, criteria, blockers, "
        "claim and reports.",
        mime_type=JSON,
    ),
    types.ResourceTemplate(
        name="brief",
        uri_template="ballet://{project}/items/{key}/brief",
        description="Everything to start a ticket, as get_brief reads it.",
        mime_type=JSON,
    ),
    types.ResourceTemplate(
        name="knowledge",
        uri_template="ballet://{project}/knowledge/{id}",
        description="A knowledge entry (document, decision, note, debt), as get_knowledge reads it.",
        mime_type=JSON,
    ),
    types.ResourceTemplate(
        name="question",
        uri_template="ballet://{project}/questions/{id}",
        description="A question asked of the planner, its status and answer, as get_question reads it.",
        mime_type=JSON,
    ),
)


@dataclass(frozen=True)
class Address:
    """A resource's URI, understood: the tool that reads it and its input."""

    uri: str
    tool: str
    arguments: dict[str, Any]


def address(uri: str) -> Address:
    """The tool and input ``uri`` names; an MCP error -32602 for one that names nothing here."""
    found = _URI.fullmatch(uri)
    if found is None:
        raise MCPError(
            INVALID_PARAMS,
            f"Unknown resource {uri[:200]!r}: see resources/templates/list.",
            {"code": "not_found"},
        )
    project = found["project"]
    if found["item"]:
        tool = "get_brief" if found["brief"] else "get_item"
        return Address(uri, tool, {"project": project, ("item" if found["brief"] else "key"): found["item"]})
    if found["entry"]:
        return Address(uri, "get_knowledge", {"project": project, "id": int(found["entry"])})
    return Address(uri, "get_question", {"project": project, "id": int(found["question"])})


def resource_read(user_id: int, key: KeyScopes | None, uri: str) -> types.ReadResourceResult:
    """``uri`` read by its tool as the caller (on the database threads)."""
    scope_require(key, Scope.READ, f"reading {uri[:200]}")
    found = address(uri)
    with access_scope():
        try:
            user = user_of(user_id, key)
            project, rest = project_named(user, found.arguments)
        except BalletError as exc:
            raise MCPError(INVALID_PARAMS, exc.message, {"code": exc.code}) from None
        outcome = run_tool(SPECS[found.tool], found.tool, rest, ToolContext(user=user, project=project))
    if outcome.is_error:
        error = outcome.output.get("error", {})
        raise MCPError(INVALID_PARAMS, str(error.get("message", "Not found.")), {"code": error.get("code")})
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=JSON, text=outcome.content)]
    )


def resources_listed(user_id: int, key: KeyScopes | None) -> types.ListResourcesResult:
    """The runnable tickets and newest knowledge of each project the caller reads."""
    scope_require(key, Scope.READ, "resources/list")
    user = user_of(user_id, key)
    resources: list[types.Resource] = []
    with access_scope():
        readable = Project.objects.filter(pk__in=project_ids_with(user, TRACKER_READ)).order_by("key")
        for project in readable[:MAX_PROJECTS]:
            resources += [
                types.Resource(
                    name=item.key,
                    title=f"{item.key}: {item.title}",
                    uri=f"ballet://{project.key}/items/{item.key}",
                    description=f"A runnable ticket of {project.key} ({item.priority}).",
                    mime_type=JSON,
                )
                for item in runnable_tickets(project=project).select_related("project")[:MAX_LISTED]
            ]
            entries = knowledge_of_project(user=user, project=project).order_by("-updated_at", "-pk")
            resources += [
                types.Resource(
                    name=f"knowledge:{entry.pk}",
                    title=entry.title,
                    uri=f"ballet://{project.key}/knowledge/{entry.pk}",
                    description=f"A {entry.kind} of {project.key}'s knowledge.",
                    mime_type=JSON,
                )
                for entry in entries[:MAX_LISTED]
            ]
    return types.ListResourcesResult(resources=resources)


# --- prompts ------------------------------------------------------------------------------------

PROMPTS: Final = (
    types.Prompt(
        name="work_on_ticket",
        title="Work on a ticket",
        description="Claim a runnable ticket, read its brief, ask when it does not say, report as you go.",
        arguments=[
            types.PromptArgument(
                name="project", description="The project's key, such as DEMO.", required=True
            ),
            types.PromptArgument(name="item", description="The ticket's key, such as DEMO-9.", required=True),
        ],
    ),
    types.Prompt(
        name="plan_change",
        title="Plan a change",
        description="Read the plan and knowledge, then propose a changeset for a human to review.",
        arguments=[
            types.PromptArgument(
                name="project", description="The project's key, such as DEMO.", required=True
            ),
            types.PromptArgument(
                name="text", description="The change, in your words: what it should achieve.", required=True
            ),
        ],
    ),
)


def _argument(arguments: dict[str, str] | None, name: str, limit: int) -> str:
    value = (arguments or {}).get(name)
    if not isinstance(value, str) or not value.strip() or len(value) > limit or "\x00" in value:
        raise MCPError(
            INVALID_PARAMS, f"{name}: required, 1 to {limit} characters.", {"code": "invalid_input"}
        )
    return value.strip()


def prompt_get(
    user_id: int, key: KeyScopes | None, name: str, arguments: dict[str, str] | None
) -> types.GetPromptResult:
    """The prompt ``name`` for its arguments (on the database threads): ``work_on_ticket`` embeds
    the ticket's brief, read as the caller."""
    if name not in {prompt.name for prompt in PROMPTS}:  # its name first, then its arguments
        raise MCPError(
            INVALID_PARAMS, f"Unknown prompt {name[:100]!r}: see prompts/list.", {"code": "not_found"}
        )
    project = _argument(arguments, "project", 10)
    if name == "work_on_ticket":
        item = _argument(arguments, "item", 30)
        brief = resource_read(user_id, key, f"ballet://{project}/items/{item}/brief").contents[0]
        steps = (
            f"Work on {item} of the Ballet project {project}. Its brief is attached: the ticket, its "
            "acceptance criteria and policy, its blockers' final reports, the knowledge linked to it.\n\n"
            f'1. claim_ticket {{"project": "{project}", "item": "{item}"}} (claiming again returns your '
            "claim).\n"
            "2. Do the work the brief describes. When the brief and the knowledge do not say, "
            f'ask_question {{"project": "{project}", "item": "{item}", "text": "..."}} and wait for the '
            "answer.\n"
            "3. report progress as you go (it renews the claim's lease), with an idempotency_key per "
            "report.\n"
            "4. report done with a summary and links (the pull request), or blocked or failed saying why."
        )
        return types.GetPromptResult(
            description=f"Work on {item}",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(text=steps)),
                types.PromptMessage(role="user", content=types.EmbeddedResource(resource=brief)),
            ],
        )
    change = _argument(arguments, "text", 2000)  # the other prompt: plan_change
    with access_scope():
        try:
            project_named(user_of(user_id, key), {"project": project})
        except BalletError as exc:
            raise MCPError(INVALID_PARAMS, exc.message, {"code": exc.code}) from None
    text = (
        f"Plan this change in the Ballet project {project}: {change}\n\n"
        "Read the plan first: list_items, get_item and search_project for what exists, "
        "search_knowledge and get_knowledge for the decisions that bind it. Then propose_changeset "
        "with the operations (create, update, add_dependency, remove_dependency) and a rationale. "
        "A human reviews the changeset and applies or rejects it; nothing changes before that."
    )
    return types.GetPromptResult(
        description=f"Plan a change in {project}",
        messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))],
    )
