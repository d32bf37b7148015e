"""Fixtures for planner tests: a runner on a scripted model, and a session to drive."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from planner.runner import Runner
from planner.services import session_create
from tests.fakes.scripted import ScriptedGateway
from tracker.services.activity import Actor
from tracker.services.projects import project_update


@pytest.fixture
def model() -> ScriptedGateway:
    return ScriptedGateway()


@pytest.fixture
def planner(model) -> Runner:
    return Runner(gateway=model)


@pytest.fixture
def chat_project(project, owner):
    project_update(actor=Actor(user=owner), project=project, credential="sk-test")
    return project


@pytest.fixture
def session(chat_project, member):
    return session_create(user=member, project=chat_project)


async def drive(planner: Runner, session, user, text: str):
    """Send ``text`` and wait for the turn to end."""
    begin = await planner.send(session_id=session.pk, user=user, text=text)
    await planner.wait(session.pk)
    return begin


def sync(fn):
    return database_sync_to_async(fn)
