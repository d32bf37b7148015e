"""The repository tools over MCP (SPEC § 16): a key with the read scope reads the code of a project
its user reads, the deny list kept; a key without read, or a stranger's, reads nothing."""

from __future__ import annotations

import json

import pytest

from planner.mcp_server.tools import SCOPES
from tests.factories import make_key
from tests.planner.conftest import sync
from tests.planner.domain.test_repo_tools import FILES, SECRET, link
from tests.planner.mcp.conftest import connected
from tests.tracker.repo_helpers import configured, source_repo
from tracker.models import Scope
from tracker.services.activity import Actor
from tracker.services.members import membership_remove

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ("repo_tree", "repo_read", "repo_search", "repo_log")


def output(result) -> dict:
    return json.loads(result.content[0].text)


@pytest.fixture
def linked(project, settings, tmp_path):
    roots = configured(settings, tmp_path)
    return link(project, "courtside", source_repo(roots / "courtside", FILES))


def test_the_repository_tools_need_the_read_scope():
    assert {name: SCOPES[name] for name in NAMES} == dict.fromkeys(NAMES, Scope.READ)


async def test_a_read_key_reads_and_searches_the_code_never_a_denied_file(users, linked):
    key = await sync(make_key)(users["viewer"], "read")

    async with connected(key) as session:
        found = await session.call_tool("repo_search", {"project": "BAL", "pattern": "book_court"})
        read = await session.call_tool("repo_read", {"project": "BAL", "path": "src/booking/service.py"})
        secret = await session.call_tool("repo_search", {"project": "BAL", "pattern": SECRET})
        denied = await session.call_tool("repo_read", {"project": "BAL", "path": ".env"})

    assert not found.is_error, found
    assert [hit["path"] for hit in output(found)["hits"]] == ["src/booking/service.py"]
    assert "def book_court" in output(read)["text"]
    assert output(secret)["hits"] == []
    assert denied.is_error
    assert output(denied)["error"]["code"] == "denied"
    assert SECRET not in json.dumps([output(secret), output(denied)])


async def test_without_read_or_rights_nothing_is_read(users, linked):
    work_key = await sync(make_key)(users["member"], "work")
    stranger_key = await sync(make_key)(users["stranger"], "read")

    async with connected(work_key) as session:
        scoped = await session.call_tool("repo_read", {"project": "BAL", "path": "README.md"})
    async with connected(stranger_key) as session:
        stranger = await session.call_tool("repo_read", {"project": "BAL", "path": "README.md"})

    assert output(scoped)["error"]["code"] == "missing_scope"
    assert output(stranger)["error"] == {"code": "not_found", "message": "Project BAL not found."}


async def test_a_removed_member_s_read_key_reads_no_more(users, linked):
    key = await sync(make_key)(users["viewer"], "read")

    async with connected(key) as session:
        before = await session.call_tool("repo_read", {"project": "BAL", "path": "README.md"})
        await sync(membership_remove)(
            actor=Actor(user=users["owner"]), project=linked.project, username="viewer"
        )
        after = await session.call_tool("repo_read", {"project": "BAL", "path": "README.md"})

    assert "# Courtside" in output(before)["text"]
    assert output(after)["error"] == {"code": "not_found", "message": "Project BAL not found."}
