"""The demo planner searches the code (SPEC § 16, docs/architecture.md#the-demo-planner): "where is
booking implemented?" calls repo_search, and its answer names the files and lines found; without a
repository (repo_search not offered) it says so. First the script alone, then through the runner
on the seeded Courtside repository."""

from __future__ import annotations

import dataclasses
import re
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from ballet.env import RepositoriesTable
from planner.agent.demo_replies import NO_REPOSITORY
from planner.agent.messages import ToolDefinition
from planner.domain.services.sessions import session_create
from planner.live.runner import runner
from planner.models import ToolCall
from tests.planner.agent.test_demo_subchats import History, answer_of, demo_runner  # noqa: F401
from tests.planner.conftest import sync
from tracker.management import demo_repository
from tracker.models import Project

REPO_SEARCH = ToolDefinition("repo_search", "Search the code.", {"type": "object"})


def asked(text: str, *, code: bool = True) -> History:
    chat = History(text)
    if code:
        original = chat.request

        def request():  # the loop offers repo_search only where the project has a repository
            return dataclasses.replace(original(), tools=(REPO_SEARCH,))

        chat.request = request  # type: ignore[method-assign]
    return chat


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Where is booking implemented?", ["booking"]),
        ("where are the bookings handled", ["booking"]),
        ("Where is the cancellation window defined?", ["cancellation", "window"]),
        ("find class in the code", ["class"]),
        ("please look for guest fees in the repository", ["guest", "fee"]),
    ],
)
def test_a_question_about_the_code_is_a_repo_search(text, words):
    scripted = asked(text).answer()

    assert [name for name, _ in scripted.calls] == ["repo_search"]
    (_, args), *_ = scripted.calls
    assert args["regex"] is True
    phrase = "_".join(words)
    assert re.fullmatch(args["pattern"], phrase.upper())  # any case, words joined by _ or a space
    assert re.fullmatch(args["pattern"], " ".join(words))
    assert not re.fullmatch(args["pattern"], "something else")
    assert " ".join(words) in scripted.text


def test_without_a_repository_it_says_the_project_has_none():
    scripted = asked("Where is booking implemented?", code=False).answer()

    assert scripted.calls == ()
    assert scripted.text == NO_REPOSITORY


def test_find_without_the_code_still_searches_the_plan():
    scripted = asked("find booking").answer()

    assert [name for name, _ in scripted.calls] == ["search_project", "search_knowledge"]


def test_the_hits_are_listed_by_file_with_their_lines():
    chat = asked("where is booking implemented?")
    chat.answer()
    hits = [
        {"path": "README.md", "line": 3, "text": "Court booking for the Riverside Tennis Club"},
        {"path": "bookings/models.py", "line": 13, "text": "class Booking(models.Model):"},
        {"path": "bookings/models.py", "line": 14, "text": '    """A member`s one-hour slot."""'},
        {"path": "bookings/views.py", "line": 5, "text": "from bookings.models import Booking, Court"},
    ]
    chat.results(({"repository": "courtside", "ref": "main", "commit": "a" * 40, "hits": hits}, False))

    answer = chat.answer()

    assert answer.calls == ()
    assert answer.text.startswith("3 files in **courtside** (main) match:")
    listed = re.findall(r"^- `([^`]+)`", answer.text, re.MULTILINE)
    assert listed == ["bookings/models.py", "bookings/views.py", "README.md"]  # the code first
    assert "- `bookings/models.py`, line 13: `class Booking(models.Model):`; line 14:" in answer.text
    assert '`"""A member\'s one-hour slot."""`' in answer.text  # a backtick never ends the code
    assert "- `bookings/views.py`, line 5: `from bookings.models import Booking, Court`" in answer.text


def test_no_hit_is_said_plainly():
    chat = asked("where is tournament implemented?")
    chat.answer()
    chat.results(({"repository": "courtside", "ref": "main", "commit": "a" * 40, "hits": []}, False))

    assert chat.answer().text == "Nothing in **courtside** (main) matches: no file holds those words."


@pytest.fixture
def places(settings, tmp_path: Path) -> Path:
    settings.REPOSITORIES_PATH = tmp_path / "mirrors"
    settings.DEMO_REPOSITORY_ROOT = tmp_path / "demo"
    settings.BALLET_REPOSITORIES = RepositoriesTable()
    return tmp_path


@pytest.mark.django_db(transaction=True)
async def test_through_the_runner_the_seeded_repository_answers_where_booking_is(demo_runner, places):  # noqa: F811
    """``make run``'s path with no key: the seeded DEMO and its Courtside repository."""
    await sync(lambda: call_command("seed_demo", "--password", "pw", stdout=StringIO()))()
    owner = await sync(User.objects.get)(username="demo")
    demo = await sync(Project.objects.get)(key="DEMO")
    chat = await sync(session_create)(user=owner, project=demo)

    await runner.send(session_id=chat.pk, user=owner, text="Where is booking implemented?")
    await runner.wait(chat.pk)
    await runner.settle()

    answer = await sync(answer_of)(chat.pk)
    assert "in **courtside** (main) match:" in answer, answer
    assert "- `bookings/models.py`, line " in answer
    assert "`class Booking(models.Model):`" in answer
    assert demo_repository.FAKE_SECRET not in answer
    call = await sync(lambda: ToolCall.objects.get(session=chat, name="repo_search"))()
    assert not call.is_error, call.output
    assert {hit["path"] for hit in call.output["hits"]} >= {"bookings/models.py", "bookings/views.py"}
    assert ".env" not in {hit["path"] for hit in call.output["hits"]}


@pytest.mark.django_db(transaction=True)
async def test_through_the_runner_a_project_without_a_repository_is_told_so(demo_runner, project, owner):  # noqa: F811
    chat = await sync(session_create)(user=owner, project=project)

    await runner.send(session_id=chat.pk, user=owner, text="where is booking implemented?")
    await runner.wait(chat.pk)
    await runner.settle()

    assert await sync(answer_of)(chat.pk) == NO_REPOSITORY
    assert not await sync(ToolCall.objects.filter(session=chat).exists)()
