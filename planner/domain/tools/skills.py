"""Tools over skills: list_skills, read_skill."""

from __future__ import annotations

from planner.domain.tools.base import JsonObject, ToolContext, ToolSpec
from tracker.selectors import skill_effective_list, skill_resolve
from tracker.trust.permissions import SKILL_READ


def list_skills(ctx: ToolContext, args: JsonObject) -> JsonObject:
    return {
        "skills": [
            {
                "name": s.name,
                "scope": s.scope,
                "version": s.version.version,
                "latest_version": s.latest_version,
                "pinned": s.pinned,
            }
            for s in skill_effective_list(project=ctx.project)
        ]
    }


def read_skill(ctx: ToolContext, args: JsonObject) -> JsonObject:
    skill = skill_resolve(project=ctx.project, name=args["name"])
    ctx.follow(f"skill:{skill.name}")
    return {
        "name": skill.name,
        "scope": skill.scope,
        "version": skill.version.version,
        "body": skill.version.body,
    }


SPECS = (
    ToolSpec(
        name="list_skills",
        description="The project's effective skills: its own and its organization's (the project's shadow "
        "the organization's of the same name), each at its pinned version, else the latest.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        permission=SKILL_READ,
        handler=list_skills,
    ),
    ToolSpec(
        name="read_skill",
        description="Read a skill's SKILL.md in the version the project uses.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 100}},
            "required": ["name"],
            "additionalProperties": False,
        },
        permission=SKILL_READ,
        handler=read_skill,
    ),
)
