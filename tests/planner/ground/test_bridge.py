"""What crosses from the database threads to the event loop (docs/architecture.md#one-bridge):
plain data only, checked on every call in the tests, the servers they start and DEBUG."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from django.conf import settings

from planner.domain.selectors import session_tool_context, tool_context_keep
from planner.ground import bridge
from planner.ground.bridge import ModelCrossingError, db, model_inside, off_the_loop
from tests.fakes.servers import Deployment
from tracker.models import Item, Project

pytestmark = pytest.mark.django_db(transaction=True)


@dataclasses.dataclass
class Holder:
    name: str
    inner: object


def test_a_model_is_found_wherever_it_sits(project):
    found = [
        model_inside(project),
        model_inside([1, "a", (2, {"k": project})]),
        model_inside({"rows": [Holder("x", Holder("y", project))]}),
        model_inside({project: 1}),
        model_inside(frozenset({project})),
        model_inside(Project.objects.all()),
    ]
    assert found == [
        "a Project at the result",
        "a Project at the result[2][1]['k']",
        "a Project at the result['rows'][0].inner.inner",
        "a Project at the result (a key)",
        "a Project at the result[0]",
        "a QuerySet at the result",
    ]


def test_plain_data_passes_even_when_it_refers_to_itself():
    loop: list[object] = [1, "two", 3.0, None, uuid.uuid4(), {"k": (b"x", True)}]
    loop.append(loop)
    assert model_inside(loop) is None
    assert model_inside(Holder("a", {"b": [Holder("c", None)]})) is None


async def test_a_call_returning_a_model_fails_with_where_it_sat(project):
    assert settings.BRIDGE_CHECK, "the whole suite checks what crosses the bridge"

    def leaky() -> dict[str, object]:
        return {"project": Project.objects.get(pk=project.pk)}

    with pytest.raises(ModelCrossingError, match=r"leaky returned a Project at the result\['project'\]"):
        await db(leaky)()
    assert await db(lambda: Project.objects.filter(pk=project.pk).values_list("key", flat=True)[0])() == "BAL"


async def test_a_test_builds_its_state_unchecked(project):
    made = await bridge.on_db_threads(lambda: Item.objects.filter(project=project).first())()
    assert made is None
    assert isinstance(await bridge.on_db_threads(lambda: Project.objects.get(pk=project.pk))(), Project)


async def test_code_that_holds_models_refuses_to_run_on_the_loop():
    with pytest.raises(ModelCrossingError, match="ran on the event loop"):
        off_the_loop()
    await db(off_the_loop)()  # on a database thread: fine


def test_the_servers_the_tests_start_check_too(tmp_path, monkeypatch):
    """A server a test starts checks what crosses its bridge; a benchmark's runs as deployed."""
    monkeypatch.setattr(Deployment, "manage", lambda self, *args: "")  # no migrate, no seed
    monkeypatch.setattr("tests.fakes.servers._templates", {})  # and nothing kept to copy
    monkeypatch.setattr("tests.fakes.servers.production_mode", lambda: False)
    under_test = Deployment.create(tmp_path, "http://127.0.0.1:9")
    monkeypatch.delenv("PYTEST_VERSION")
    benchmarked = Deployment.create(tmp_path, "http://127.0.0.1:9")
    assert under_test.env.get("BALLET_BRIDGE_CHECK") == "1"
    assert "BALLET_BRIDGE_CHECK" not in benchmarked.env


def test_a_turns_tools_act_with_what_its_opening_read_or_read_it_again(session, member):
    """The opening keeps the turn's owner and project for its first round of tool calls; a turn
    whose opening this process did not keep (another turn's, or none) reads them again."""
    session.turn_count = 3
    tool_context_keep(session=session)
    kept = session_tool_context(session_id=session.pk, turn=3, focus={"BAL-1"})
    again = session_tool_context(session_id=session.pk, turn=3, focus=set())
    tool_context_keep(session=session)
    other_turn = session_tool_context(session_id=session.pk, turn=4, focus=set())

    assert (kept.user, kept.project, kept.focus) == (member, session.project, {"BAL-1"})
    assert kept.user is session.user  # no second read
    assert again.user == member
    assert again.user is not session.user
    assert other_turn.user is not session.user
