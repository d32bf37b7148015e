"""The MCP tools: the planner's read tools, each naming its project (SPEC § 13.4).

A planner tool runs in its session's project; an MCP client names the project
in every call. A tool's MCP input schema is the planner's schema plus a
required ``project`` string, computed from the planner's spec (never copied).
A call resolves the project with the one permission check (an unknown project
and one the caller cannot read are the same "Project X not found."), strips
``project`` and runs the planner's spec with ``run_tool``: validation, the
tool's permission, the handler, as the token's user outside any planner
session (the activity log says ``user:NAME``). A refused call is an error
outcome with the planner's JSON body ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import mcp_types as types
from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from planner.tools import TOOLS
from planner.tools.base import (
    JsonObject,
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    domain_error,
    error_output,
    run_tool,
)
from tracker.errors import BalletError
from tracker.models import Project
from tracker.permissions import TRACKER_READ, access_scope, require
from tracker.selectors import project_get

logger = logging.getLogger(__name__)

READ_TOOLS = (
    "list_runnable",
    "get_item",
    "list_items",
    "search_project",
    "search_knowledge",
    "get_knowledge",
)
PROJECT_KEY_CHARS = Project._meta.get_field("key").max_length or 10
PROJECT: JsonObject = {
    "type": "string",
    "minLength": 1,
    "maxLength": PROJECT_KEY_CHARS,
    "description": "The key of the project, such as DEMO.",
}
PROJECT_HINT = "the key of a project you can read, such as DEMO"


def with_project(schema: JsonObject) -> JsonObject:
    """A planner tool's input ``schema`` with the required ``project`` in front."""
    derived = copy.deepcopy(schema)
    properties = derived.get("properties", {})
    assert "project" not in properties, "a planner tool's own input cannot be named project"
    derived["properties"] = {"project": PROJECT, **properties}
    derived["required"] = ["project", *derived.get("required", [])]
    return derived


def _definition(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=with_project(spec.input_schema),
        annotations=types.ToolAnnotations(read_only_hint=not spec.writes, open_world_hint=False),
    )


SPECS: dict[str, ToolSpec] = {name: TOOLS[name] for name in READ_TOOLS}
DEFINITIONS: tuple[types.Tool, ...] = tuple(_definition(spec) for spec in SPECS.values())


def project_named(user: User, arguments: JsonObject) -> tuple[Project, JsonObject]:
    """The project the call names, if ``user`` may read it, and the rest of the arguments."""
    key = arguments.get("project")
    if not isinstance(key, str) or not key:
        raise ToolError("invalid_input", f"project: required: {PROJECT_HINT}.")
    if len(key) > PROJECT_KEY_CHARS:
        raise ToolError("invalid_input", f"project: at most {PROJECT_KEY_CHARS} characters: {PROJECT_HINT}.")
    project = project_get(key=key)
    require(user, project, TRACKER_READ)  # unreadable answers as unknown does: "Project X not found."
    return project, {name: value for name, value in arguments.items() if name != "project"}


def refused(exc: BalletError) -> ToolOutcome:
    if isinstance(exc, ToolError):
        return ToolOutcome(error_output(exc.code, exc.message), True)
    return ToolOutcome(domain_error(exc), True)


@database_sync_to_async
def _run(user: User, spec: ToolSpec, arguments: JsonObject) -> ToolOutcome:
    with access_scope():
        try:
            project, rest = project_named(user, arguments)
        except BalletError as exc:
            return refused(exc)
        return run_tool(spec, spec.name, rest, ToolContext(user=user, project=project))


async def tool_call(user: User, name: str, arguments: Any) -> ToolOutcome:
    """Run the MCP tool ``name`` as ``user``; a refusal comes back as an error outcome."""
    spec = SPECS.get(name)
    if spec is None:
        known = ", ".join(SPECS)
        return ToolOutcome(
            error_output("unknown_tool", f"There is no tool named {name[:100]!r}; there are {known}."), True
        )
    if not isinstance(arguments, dict):
        return ToolOutcome(error_output("invalid_input", "The input must be a JSON object."), True)
    return await _run(user, spec, arguments)
