"""``check --deploy`` warns of the production projects the demo planner answers (ballet.W002), and
says nothing in the embedded mode or where it cannot read the projects."""

from __future__ import annotations

import dataclasses

import pytest
from django.core import checks
from django.db import connection

from ballet.checks import MAX_KEYS_NAMED, demo_planners
from tests.factories import ProjectFactory
from tracker.services.activity import Actor
from tracker.services.projects import project_update

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def production(settings):
    settings.PRODUCTION_MODE = True
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key=None)


def test_projects_without_a_credential_are_named(project, other_project, owner):
    warnings = demo_planners()
    assert [w.id for w in warnings] == ["ballet.W002"]
    assert isinstance(warnings[0], checks.Warning)
    assert (
        "The demo planner answers the chats of projects BAL, OTH (scripted, no AI model)" in warnings[0].msg
    )
    assert "no Anthropic credential" in warnings[0].msg
    assert "/projects/{key}/settings/" in str(warnings[0].hint)
    project_update(actor=Actor(user=owner), project=project, credential="sk-ant-0123456789")
    assert "of project OTH (" in demo_planners()[0].msg


def test_a_project_set_to_the_demo_is_a_warning_of_its_own(project, other_project, owner):
    project_update(actor=Actor(user=owner), project=project, credential="sk-ant-0123456789")
    project_update(actor=Actor(user=owner), project=project, settings={"provider": "demo"})
    messages = sorted(w.msg for w in demo_planners())
    assert len(messages) == 2
    assert "project BAL (scripted, no AI model): its provider setting" in messages[0]
    assert "project OTH (scripted, no AI model): it has no Anthropic credential" in messages[1]


def test_many_projects_are_counted_past_the_first(org):
    for n in range(MAX_KEYS_NAMED + 3):
        ProjectFactory(organization=org, key=f"P{n:03d}", name=f"P{n}")
    (warning,) = demo_planners()
    assert "P019 and 3 more (" in warning.msg
    assert "P020" not in warning.msg


def test_nothing_with_the_servers_key_or_in_the_embedded_mode(project, settings):
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key="sk-ant-server")
    assert demo_planners() == []
    settings.SERVER = dataclasses.replace(settings.SERVER, anthropic_api_key=None)
    assert demo_planners() != []
    settings.PRODUCTION_MODE = False
    assert demo_planners() == []


def test_a_database_without_the_projects_table_is_no_error(project):
    with connection.cursor() as cursor:  # undone with the test's transaction
        cursor.execute("ALTER TABLE tracker_project RENAME TO tracker_project_gone")
    assert demo_planners() == []


def test_it_runs_with_check_deploy_only(project):
    deploy = checks.run_checks(include_deployment_checks=True, tags=["ballet"])
    assert "ballet.W002" in [m.id for m in deploy]
    assert "ballet.W002" not in [m.id for m in checks.run_checks(tags=["ballet"])]
