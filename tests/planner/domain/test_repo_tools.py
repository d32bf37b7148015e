"""The planner's repository tools (SPEC § 16): offered only in a project with a repository, read with
the project's readers' rights, the deny list kept, every refusal a readable error outcome."""

from __future__ import annotations

import json

import pytest

from planner.agent.loop import History
from planner.domain.selectors import session_tools, turn_setup
from planner.domain.services.sessions import session_create
from planner.domain.tools import DEFINITIONS, REPO_DEFINITIONS, definitions
from tests.factories import make_membership, make_project
from tests.planner.domain.test_tools import error, ok
from tests.tracker.repo_helpers import commit, configured, git, source_repo
from tracker.models import Repository, Role
from tracker.repos.selectors import mirror_path
from tracker.services.activity import Actor
from tracker.services.members import membership_remove

SECRET = "hunter2"
FILES = {
    "README.md": "# Courtside\n",
    "src/booking/service.py": "def book_court(court, slot):\n    return (court, slot)\n",
    ".env": f"TOKEN={SECRET}\n",
    "config/secret.yml": f"key: {SECRET}\n",
}


def link(project, name: str, source, *, fetched: bool = True) -> Repository:
    """``source`` linked to ``project`` as ``name``, mirrored as the worker mirrors it."""
    repo = Repository.objects.create(
        project=project, name=name, local_path=str(source), default_branch="main"
    )
    if fetched:
        mirror = mirror_path(repo)
        mirror.parent.mkdir(parents=True, exist_ok=True)
        git(source, "clone", "-q", "--mirror", str(source), str(mirror))
    return repo


@pytest.fixture
def roots(settings, tmp_path):
    return configured(settings, tmp_path)


@pytest.fixture
def source(roots):
    return source_repo(roots / "courtside", FILES)


@pytest.fixture
def linked(project, source) -> Repository:
    return link(project, "courtside", source)


def names(tools) -> list[str]:
    return [tool.name for tool in tools]


def test_the_repository_tools_are_offered_only_where_the_project_has_a_repository(project, member, source):
    session = session_create(user=member, project=project)
    assert not [name for name in names(session_tools(session)) if name.startswith("repo_")]
    assert session_tools(session) == DEFINITIONS
    assert turn_setup(session=session, history=History(messages=[])).settings.tools == DEFINITIONS

    link(project, "courtside", source)

    shown = session_tools(session)
    assert shown == REPO_DEFINITIONS  # the same tuple every turn: the prompt cache keeps it
    assert turn_setup(session=session, history=History(messages=[])).settings.tools == REPO_DEFINITIONS
    assert {"repo_tree", "repo_read", "repo_search", "repo_log"} <= set(names(shown))
    assert names(definitions(question=True, repositories=True))[-1] == "answer_question"
    assert "repo_read" not in names(definitions(question=True, repositories=False))


def test_a_viewer_reads_lists_searches_and_logs_the_code(project, viewer, linked):
    tree = ok(viewer, project, "repo_tree", {})
    assert (tree["repository"], tree["ref"]) == ("courtside", "main")
    assert {entry["name"] for entry in tree["entries"]} == {"README.md", "src", ".env", "config"}

    read = ok(viewer, project, "repo_read", {"path": "src/booking/service.py", "lines": 1})
    assert read["text"] == "     1\tdef book_court(court, slot):"
    assert "start 2" in read["cut"]

    found = ok(viewer, project, "repo_search", {"pattern": "book_court", "path_glob": "*.py"})
    assert found["hits"] == [
        {"path": "src/booking/service.py", "line": 1, "text": "def book_court(court, slot):"}
    ]

    log = ok(viewer, project, "repo_log", {"repository": "courtside", "limit": 5})
    assert [c["subject"] for c in log["commits"]] == ["First"]


def test_a_stranger_reads_nothing(project, users, linked):
    for name, arguments in [
        ("repo_tree", {}),
        ("repo_read", {"path": "README.md"}),
        ("repo_search", {"pattern": "book"}),
        ("repo_log", {}),
    ]:
        refused = error(users["stranger"], project, name, arguments)
        assert refused["code"] == "permission_denied"
        assert "book_court" not in json.dumps(refused)


def test_denied_files_never_reach_the_model(project, viewer, linked):
    for path in (".env", "config/secret.yml", "CONFIG/../.env"):
        refused = error(viewer, project, "repo_read", {"path": path})
        assert refused["code"] in ("denied", "invalid_path")
    outputs = [
        ok(viewer, project, "repo_search", {"pattern": SECRET}),
        ok(viewer, project, "repo_search", {"pattern": "hunter.", "regex": True}),
        ok(viewer, project, "repo_tree", {"path": "config"}),
        ok(viewer, project, "repo_tree", {}),
    ]
    assert outputs[0]["hits"] == outputs[1]["hits"] == []
    assert all(SECRET not in json.dumps(output) for output in outputs)


def test_bad_input_is_a_readable_error(project, viewer, linked):
    cases = [
        ("repo_read", {"path": "../../etc/passwd"}, "invalid_path"),
        ("repo_read", {"path": "/etc/passwd"}, "invalid_path"),
        ("repo_read", {"path": "README.md\x00"}, "invalid_input"),
        ("repo_read", {"path": "nowhere.py"}, "not_found"),
        ("repo_read", {"path": "README.md", "ref": "--output=x"}, "invalid_ref"),
        ("repo_tree", {"ref": "no-such-branch"}, "unknown_ref"),
        ("repo_tree", {"depth": 3}, "invalid_input"),
        ("repo_read", {}, "invalid_input"),
        ("repo_read", {"path": "README.md", "lines": 5000}, "invalid_input"),
        ("repo_search", {"pattern": ""}, "invalid_input"),
        ("repo_log", {"repository": "elsewhere"}, "not_found"),
    ]
    for name, arguments, code in cases:
        refused = error(viewer, project, name, arguments)
        assert refused["code"] == code, (name, arguments, refused)
        assert refused["message"]


def test_a_project_without_a_repository_says_so(project, viewer):
    refused = error(viewer, project, "repo_tree", {})
    assert refused["code"] == "no_repository"
    assert "BAL" in refused["message"]


def test_a_repository_not_fetched_yet_says_so(project, viewer, source):
    link(project, "courtside", source, fetched=False)
    assert error(viewer, project, "repo_tree", {})["code"] == "no_mirror"


def test_with_several_repositories_the_call_names_one(project, viewer, roots, linked):
    other = source_repo(roots / "website", {"index.html": "<h1>Courtside</h1>\n"})
    commit(other, {"about.html": "About\n"}, "About page")
    link(project, "website", other)

    refused = error(viewer, project, "repo_tree", {})
    assert refused["code"] == "invalid_input"
    assert "courtside, website" in refused["message"]
    site = ok(viewer, project, "repo_log", {"repository": "website"})
    assert [c["subject"] for c in site["commits"]] == ["About page", "First"]
    assert ok(viewer, project, "repo_tree", {"repository": "courtside"})["repository"] == "courtside"


def test_another_projects_repository_is_not_this_ones(project, other_project, viewer, roots):
    link(other_project, "courtside", source_repo(roots / "theirs", FILES))
    assert error(viewer, project, "repo_tree", {"repository": "courtside"})["code"] == "no_repository"


@pytest.mark.parametrize("who", ["owner_of_a_sibling_project", "removed_member"])
def test_a_sibling_project_s_owner_or_a_removed_member_reads_nothing(project, users, owner, linked, who):
    """Rights are the project's, checked at each call: neither another project of the same
    organization nor a membership that has ended reads its code."""
    user = users["stranger"] if who == "owner_of_a_sibling_project" else users["member"]
    if who == "owner_of_a_sibling_project":
        sibling = make_project(organization=project.organization, key="SIB")
        make_membership(project=sibling, user=user, role=Role.OWNER)
    else:
        assert ok(user, project, "repo_read", {"path": "README.md"})["text"] == "     1\t# Courtside"
        membership_remove(actor=Actor(user=owner), project=project, username=user.username)

    for name, arguments in [
        ("repo_tree", {}),
        ("repo_read", {"path": "README.md"}),
        ("repo_search", {"pattern": "book"}),
        ("repo_log", {}),
    ]:
        refused = error(user, project, name, arguments)
        assert refused["code"] == "permission_denied"
        assert "Courtside" not in json.dumps(refused)
