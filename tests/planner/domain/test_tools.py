"""The twelve tools: success paths, every error kind, authority, schemas."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.services import knowledge_create
from planner.domain.tools import (
    DEFINITIONS,
    QUESTION_DEFINITIONS,
    REPO_DEFINITIONS,
    REPO_QUESTION_DEFINITIONS,
    TOOLS,
    ToolContext,
    call_tool,
)
from planner.domain.tools.base import VALIDATION_ONLY, input_problem
from tests.factories import MembershipFactory
from tracker.models import ActivityEvent, Changeset, Dependency, Item
from tracker.services.activity import Actor
from tracker.services.skills import skill_version_create

SESSION = uuid.UUID("00000000-0000-0000-0000-00000000abcd")


def ctx(user, project) -> ToolContext:
    return ToolContext(user=user, project=project, session_id=SESSION)


def run(user, project, name, arguments, context=None):
    outcome = call_tool(name, arguments, context or ctx(user, project))
    json.dumps(outcome.output)  # outputs are JSON
    return outcome


def ok(user, project, name, arguments, context=None):
    outcome = run(user, project, name, arguments, context)
    assert not outcome.is_error, outcome.output
    return outcome.output


def error(user, project, name, arguments) -> dict:
    outcome = run(user, project, name, arguments)
    assert outcome.is_error, outcome.output
    assert set(outcome.output) == {"error"}
    return outcome.output["error"]


@pytest.fixture
def plan(project, make_item, indexed):
    with indexed():
        milestone = make_item(kind="milestone", title="Beta")
        epic = make_item(kind="epic", title="Accounts", milestone=milestone)
        login = make_item(
            title="Login form",
            state="ready",
            epic=epic,
            description="Email and password login.",
            acceptance_criteria=["Shows errors"],
        )
        reset = make_item(title="Password reset", state="ready", epic=epic)
    Dependency.objects.create(blocker=login, blocked=reset)
    return {"milestone": milestone, "epic": epic, "login": login, "reset": reset}


def test_the_twelve_tools_ask_human_and_answer_question_have_closed_schemas():
    assert list(TOOLS) == [
        "list_items",
        "get_item",
        "list_runnable",
        "search_project",
        "list_changesets",
        "propose_changeset",
        "list_skills",
        "read_skill",
        "search_knowledge",
        "get_knowledge",
        "create_knowledge",
        "update_knowledge",
        "repo_tree",
        "repo_read",
        "repo_search",
        "repo_log",
        "start_subchat",
        "ask_human",
        "answer_question",
    ]
    # answer_question: in question sub-chats; the repo_ tools: where the project has a repository
    assert [d.name for d in REPO_DEFINITIONS] == list(TOOLS)[:-1]
    assert [d.name for d in REPO_QUESTION_DEFINITIONS] == list(TOOLS)
    assert [d.name for d in DEFINITIONS] == [name for name in TOOLS if not name.startswith("repo_")][:-1]
    assert [d.name for d in QUESTION_DEFINITIONS] == [name for name in TOOLS if not name.startswith("repo_")]
    for definition in REPO_QUESTION_DEFINITIONS:
        assert definition.input_schema["type"] == "object"
        assert definition.input_schema["additionalProperties"] is False
        assert len(definition.description) > 30


def _keys(node) -> set[str]:
    """The schema keywords in ``node``: a property's name (repo_search's ``pattern``) is none."""
    if isinstance(node, list):
        return set().union(*(_keys(child) for child in node))
    if not isinstance(node, dict):
        return set()
    properties = node.get("properties")
    found = set(node).union(*(_keys(child) for key, child in node.items() if key != "properties"))
    if isinstance(properties, dict):
        found |= set().union(*(_keys(child) for child in properties.values()))
    return found


def test_the_model_is_shown_the_schemas_without_what_only_the_validator_needs():
    for definition in REPO_QUESTION_DEFINITIONS:
        assert not _keys(definition.input_schema) & VALIDATION_ONLY, definition.name
    # The validator still enforces them.
    assert "pattern" in TOOLS["get_item"].input_schema["properties"]["key"]
    assert "does not match" in (input_problem(TOOLS["get_item"], {"key": "not a key"}) or "")
    # The create and update operations share their fields: described once, for create.
    create, update = (
        TOOLS["propose_changeset"].definition().input_schema["properties"]["operations"]["items"]["anyOf"][:2]
    )
    assert "description" in create["properties"]["fields"]["properties"]["epic"]
    assert update["properties"]["fields"]["properties"]["epic"] == {"type": ["string", "null"]}


def test_list_items_filters(project, member, plan):
    output = ok(member, project, "list_items", {"kind": "ticket", "epic": plan["epic"].key})
    assert [i["key"] for i in output["items"]] == [plan["login"].key, plan["reset"].key]
    assert output["items"][0]["epic"] == plan["epic"].key
    page = ok(member, project, "list_items", {"limit": 1, "offset": 1})
    assert [i["key"] for i in page["items"]] == [plan["epic"].key]
    assert page["more"] is True
    assert ok(member, project, "list_items", {"state": "done"})["items"] == []


def test_get_item_with_dependencies_and_focus(project, member, plan):
    context = ctx(member, project)
    output = ok(member, project, "get_item", {"key": plan["reset"].key}, context)
    assert output["blocked_by"] == [{"key": plan["login"].key, "title": "Login form", "state": "ready"}]
    assert output["version"] == 1
    assert plan["reset"].key in context.focus
    login = ok(member, project, "get_item", {"key": plan["login"].key})
    assert login["acceptance_criteria"] == ["Shows errors"]
    assert login["blocks"][0]["key"] == plan["reset"].key


def test_get_item_errors(project, member, plan, other_project, make_item):
    assert error(member, project, "get_item", {"key": "BAL-999"})["code"] == "not_found"
    foreign = make_item(target=other_project)
    assert error(member, project, "get_item", {"key": foreign.key})["code"] == "invalid_input"
    assert error(member, project, "get_item", {})["code"] == "invalid_input"
    assert error(member, project, "get_item", {"key": "BAL-1", "verbose": True})["code"] == "invalid_input"


def test_unknown_field_is_rejected_before_anything_runs(project, member, plan):
    problem = error(
        member,
        project,
        "propose_changeset",
        {
            "title": "x",
            "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}],
            "apply": True,
        },
    )
    assert problem["code"] == "invalid_input"
    assert "apply" in problem["message"]
    assert not Changeset.objects.exists()


def test_unknown_tool(project, member):
    assert error(member, project, "delete_everything", {})["code"] == "unknown_tool"


def test_list_runnable(project, member, plan):
    assert [t["key"] for t in ok(member, project, "list_runnable", {})["tickets"]] == [plan["login"].key]


def test_search_project_finds_items_by_key_and_words_and_skills(project, member, maintainer, plan, indexed):
    with indexed():
        skill_version_create(
            actor=Actor(user=maintainer), project=project, name="estimation", body="Estimate login work"
        )
    by_key = ok(member, project, "search_project", {"query": plan["reset"].key})
    assert by_key["results"][0]["key"] == plan["reset"].key
    by_words = ok(member, project, "search_project", {"query": "login"})
    kinds = {(r["kind"], r["key"]) for r in by_words["results"]}
    assert ("item", plan["login"].key) in kinds
    assert ("skill", "estimation") in kinds
    assert all("snippet" in r and "score" in r for r in by_words["results"])


def test_list_changesets_and_propose(project, member, plan):
    context = ctx(member, project)
    output = ok(
        member,
        project,
        "propose_changeset",
        {
            "title": "Split login",
            "rationale": "Smaller tickets",
            "operations": [
                {
                    "op": "create",
                    "ref": "sso",
                    "kind": "ticket",
                    "fields": {"title": "SSO", "epic": plan["epic"].key},
                },
                {
                    "op": "update",
                    "item": plan["login"].key,
                    "base_version": 1,
                    "fields": {"state": "in_progress"},
                },
                {"op": "add_dependency", "blocker": "$sso", "blocked": plan["reset"].key},
            ],
        },
        context,
    )
    assert output["changeset"]["number"] == 1
    assert output["changeset"]["review_url"] == f"/projects/{context.project.key}/changesets/1/"
    changeset = Changeset.objects.get()
    assert (changeset.planner_session, changeset.proposed_by, changeset.status) == (
        SESSION,
        member,
        "proposed",
    )
    assert context.drafts[0].kind == "changeset"
    assert context.drafts[0].snapshot["number"] == 1
    assert plan["login"].key in context.focus
    listed = ok(member, project, "list_changesets", {"status": "proposed"})
    assert listed["changesets"][0]["by_this_session"] is True
    assert ok(member, project, "list_changesets", {"status": "applied"})["changesets"] == []
    event = ActivityEvent.objects.get(verb="changeset.proposed")
    assert (event.actor, event.on_behalf_of) == (f"planner:{SESSION}", member)


def test_propose_errors_carry_field_paths(project, member, plan):
    problem = error(
        member,
        project,
        "propose_changeset",
        {
            "title": "Bad",
            "operations": [
                {"op": "update", "item": plan["login"].key, "base_version": 1, "fields": {"state": "open"}}
            ],
        },
    )
    assert problem["code"] == "invalid"
    assert problem["fields"] == {
        "operations[0].fields.state": [
            "A ticket's state is one of: draft, ready, in_progress, in_review, done, cancelled."
        ]
    }


@pytest.mark.parametrize(
    ("operation", "where"),
    [
        (
            {"op": "update", "item": "BAL-3", "base_version": 1, "fields": {"state": "shipped"}},
            "fields.state",
        ),
        ({"op": "delete", "item": "BAL-3"}, "op"),
        ({"op": "create", "kind": "ticket", "fields": {"title": "T", "colour": "red"}}, "fields"),
        ({"op": "update", "item": "BAL-3", "base_version": "1", "fields": {"title": "T"}}, "base_version"),
    ],
)
def test_a_malformed_operation_is_refused_by_the_tool_schema_at_its_path(
    project, member, plan, operation, where
):
    problem = error(member, project, "propose_changeset", {"title": "Bad", "operations": [operation]})

    assert problem["code"] == "invalid_input"
    assert problem["message"].startswith(f"operations[0].{where}: ")
    assert not Changeset.objects.exists()


def test_propose_touching_policy_is_refused_even_for_a_maintainer(project, maintainer, plan):
    problem = error(
        maintainer,
        project,
        "propose_changeset",
        {
            "title": "Policy",
            "operations": [
                {
                    "op": "update",
                    "item": plan["login"].key,
                    "base_version": 1,
                    "fields": {"policy": {"autonomy": "full"}},
                }
            ],
        },
    )
    assert "operations[0].fields.policy" in problem["fields"]
    assert not Changeset.objects.exists()


def test_the_planner_has_no_apply_or_reject_tool():
    assert not {name for name in TOOLS if "apply" in name or "reject" in name}


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        (
            "propose_changeset",
            {"title": "x", "operations": [{"op": "create", "kind": "ticket", "fields": {"title": "T"}}]},
        ),
        ("create_knowledge", {"kind": "note", "title": "N"}),
        ("update_knowledge", {"id": 1, "version": 1, "title": "N"}),
    ],
)
def test_a_viewers_session_cannot_write(project, viewer, name, arguments):
    problem = error(viewer, project, name, arguments)
    assert problem["code"] == "permission_denied"
    assert "viewer lacks" in problem["message"]


def test_a_viewer_may_read(project, viewer, plan):
    assert ok(viewer, project, "list_items", {})["items"]


def test_skills_tools(project, member, maintainer):
    skill_version_create(actor=Actor(user=maintainer), project=project, name="planner", body="v1")
    skill_version_create(actor=Actor(user=maintainer), project=project, name="planner", body="v2")
    assert ok(member, project, "list_skills", {})["skills"] == [
        {"name": "planner", "scope": "project", "version": 2, "latest_version": 2, "pinned": False}
    ]
    assert ok(member, project, "read_skill", {"name": "planner"})["body"] == "v2"
    assert error(member, project, "read_skill", {"name": "nope"})["code"] == "not_found"


def test_knowledge_tools(project, member, plan, indexed):
    context = ctx(member, project)
    with indexed():
        created = ok(
            member,
            project,
            "create_knowledge",
            {
                "kind": "decision",
                "title": "Use passkeys",
                "body": "Passwords are weak.",
                "items": [plan["login"].key],
            },
            context,
        )
    entry_id = created["id"]
    assert f"knowledge:{entry_id}" in context.focus
    found = ok(member, project, "search_knowledge", {"query": "passkeys"})
    assert found["results"][0]["id"] == entry_id
    read = ok(member, project, "get_knowledge", {"id": entry_id})
    assert (read["version"], read["items"], read["projects"]) == (1, [plan["login"].key], ["BAL"])
    updated = ok(
        member, project, "update_knowledge", {"id": entry_id, "version": 1, "body": "Passwords leak."}
    )
    assert updated["version"] == 2
    event = ActivityEvent.objects.filter(verb="knowledge.updated").get()
    assert (event.actor, event.on_behalf_of) == (f"planner:{SESSION}", member)


def test_search_knowledge_finds_only_the_kind_asked_for(project, member, indexed):
    with indexed():
        for kind, title in [
            ("decision", "Passkeys for login"),
            ("note", "Passkeys rollout notes"),
            ("debt", "Passkeys lack recovery"),
        ]:
            knowledge_create(actor=Actor(user=member), kind=kind, title=title, projects=[project])

    def kinds(**filters):
        found = ok(member, project, "search_knowledge", {"query": "passkeys", **filters})["results"]
        return sorted((r["kind"], r["title"]) for r in found)

    assert kinds() == [
        ("debt", "Passkeys lack recovery"),
        ("decision", "Passkeys for login"),
        ("note", "Passkeys rollout notes"),
    ]
    assert kinds(kind="decision") == [("decision", "Passkeys for login")]
    assert kinds(kind="debt") == [("debt", "Passkeys lack recovery")]
    assert kinds(kind="document") == []


def test_update_knowledge_with_a_stale_version_conflicts_with_the_current_version(project, member):
    entry = knowledge_create(actor=Actor(user=member), kind="note", title="N", body="one", projects=[project])
    ok(member, project, "update_knowledge", {"id": entry.pk, "version": 1, "body": "two"})
    problem = error(member, project, "update_knowledge", {"id": entry.pk, "version": 1, "body": "three"})
    assert problem["code"] == "conflict"
    assert (problem["current"]["version"], problem["current"]["body"]) == (2, "two")


def test_knowledge_errors(project, member, other_project, users, indexed):
    MembershipFactory(project=other_project, user=users["stranger"], role="owner")
    with indexed():
        foreign = knowledge_create(
            actor=Actor(user=users["stranger"]), kind="note", title="Secret", projects=[other_project]
        )
    assert error(member, project, "get_knowledge", {"id": foreign.pk})["code"] == "not_found"
    assert (
        error(member, project, "update_knowledge", {"id": foreign.pk, "version": 1, "title": "x"})["code"]
        == "not_found"
    )
    assert ok(member, project, "search_knowledge", {"query": "secret"})["results"] == []
    assert (
        error(member, project, "create_knowledge", {"kind": "memo", "title": "x"})["code"] == "invalid_input"
    )
    unknown = error(member, project, "create_knowledge", {"kind": "note", "title": "x", "items": ["BAL-77"]})
    assert (unknown["code"], unknown["fields"]) == ("invalid", {"items": ["Unknown item BAL-77."]})
    entry = knowledge_create(actor=Actor(user=member), kind="note", title="N", projects=[project])
    assert (
        error(member, project, "update_knowledge", {"id": entry.pk, "version": 1})["code"] == "invalid_input"
    )
    assert Item.objects.count() == 0


def _grow(project, member, maintainer, make_item, plan) -> None:
    """Make the project several times bigger: items and dependencies, changesets, skills, knowledge."""
    for number in range(20):
        ticket = make_item(title=f"Login step {number}", state="ready", epic=plan["epic"])
        Dependency.objects.create(blocker=ticket, blocked=plan["login"])
        Dependency.objects.create(blocker=plan["login"], blocked=make_item(title=f"After {number}"))
        knowledge_create(
            actor=Actor(user=member), kind="note", title=f"Login {number}", projects=[project], items=[ticket]
        )
    for number in range(5):
        ok(
            member,
            project,
            "propose_changeset",
            {
                "title": f"Change {number}",
                "operations": [{"op": "create", "kind": "ticket", "fields": {"title": f"New {number}"}}],
            },
        )
        skill_version_create(actor=Actor(user=maintainer), project=project, name=f"skill-{number}", body="x")
        skill_version_create(actor=Actor(user=maintainer), project=project, name="planner", body=f"v{number}")


@pytest.mark.parametrize(
    ("name", "arguments", "most"),
    [
        ("get_item", {"key": "BAL-3"}, 5),  # the human's access, the item, its dependencies, claim, reports
        ("list_items", {}, 3),  # the human's access, the items, their claims
        ("list_items", {"epic": "BAL-2", "state": "ready"}, 4),  # + the epic named
        ("list_runnable", {}, 2),  # the human's access, the tickets
        ("search_project", {"query": "login"}, 3),  # the human's access, the index's head, the words
        ("list_changesets", {}, 2),  # the human's access, the changesets
        ("list_skills", {}, 3),  # the human's access, the skills with their pins, their versions
        ("read_skill", {"name": "planner"}, 3),
        ("get_knowledge", {"id": "entry"}, 3),  # the human's access, the entry, the links they see
        ("search_knowledge", {"query": "password login"}, 4),  # + what the human may not read
    ],
)
def test_a_read_tool_costs_a_few_queries_whatever_the_projects_size(
    project, member, maintainer, make_item, plan, indexed, name, arguments, most
):
    with indexed():
        entry = knowledge_create(
            actor=Actor(user=member), kind="note", title="Login passwords", body="Hashing", projects=[project]
        )
        skill_version_create(actor=Actor(user=maintainer), project=project, name="planner", body="v1")
    if arguments.get("id") == "entry":
        arguments = {"id": entry.pk}
    counts = []
    for grown in (False, True):
        if grown:
            with indexed():
                _grow(project, member, maintainer, make_item, plan)
        ok(member, project, name, arguments)  # warm the search store and the validators
        with CaptureQueriesContext(connection) as queries:
            ok(member, project, name, arguments)
        # Reads take no transaction (on SQLite a transaction takes the write lock).
        assert len(queries) <= most, [q["sql"][:80] for q in queries]
        counts.append(len(queries))
    assert counts[0] == counts[1]
