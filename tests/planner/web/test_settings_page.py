"""The project's settings page: every per-project setting shown with its effective value and whose it
is, saved through ``project_update`` with the configuration file's validation and messages, nothing
saved when a field is bad, owners only (docs/architecture.md#the-demo-planner for the credential)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from ballet.env import PROJECT_SETTINGS
from planner.domain.tools import TOOLS
from tests.factories import MembershipFactory, UserFactory
from tracker.models import Project, Role
from tracker.selectors import project_planner_config, project_work_config
from tracker.services.activity import Actor
from tracker.services.projects import project_update

SETTINGS = "/projects/BAL/settings/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form(project: Project, **fields: Any) -> dict[str, Any]:
    """What the page's form sends untouched (every setting at its default), with ``fields`` over it."""
    return {"section": "settings", "name": project.name, "description": project.description, **fields}


def stored(project: Project) -> Project:
    return Project.objects.get(pk=project.pk)


def test_every_setting_has_a_labelled_control_showing_the_default(project, owner):
    page = signed_in(owner).get(SETTINGS)
    assert page.status_code == 200
    assert "script-src 'self'" in page["Content-Security-Policy"]
    html = page.content.decode()
    for name in PROJECT_SETTINGS:
        assert f'id="setting-{name}"' in html, name
    assertContains(page, '<label for="field-max_rounds">Rounds per turn at most</label>', html=True)
    assertContains(page, 'placeholder="25"')
    assertContains(page, '<option value="" selected>Default (all)</option>', html=True)
    for tool in TOOLS:
        assertContains(page, f'value="{tool}"')
    assert html.count("the default</span>") == len(PROJECT_SETTINGS)
    assertNotContains(page, "this project's own</span>")


def test_an_owner_saves_every_setting(project, owner):
    tool = next(iter(TOOLS))
    client = signed_in(owner)
    sent = form(
        project,
        name="Ballet renamed",
        description="What we build.",
        provider="demo",
        model="claude-test-1",
        title_model="claude-title-1",
        compaction_model="claude-compact-1",
        compact_at_tokens="5000",
        max_rounds="7",
        max_output_tokens="1024",
        max_subchats="2",
        daily_token_budget="123456",
        four_eyes="on",
        skill="planning",
        approve_tools__source="own",
        approve_tools=[tool],
        claim_minutes="45",
        reuse_threshold="0.95",
        reuse_judge_floor="0.6",
        direct_edits="state",
        labels__source="own",
        labels="Bug, ui ,bug",
    )
    saved = client.post(SETTINGS, sent)
    assert (saved.status_code, saved["Location"]) == (302, SETTINGS)
    project = stored(project)
    assert (project.name, project.description) == ("Ballet renamed", "What we build.")
    planner, work = project_planner_config(project), project_work_config(project)
    assert (planner.provider, planner.model, planner.title_model, planner.compaction_model) == (
        "demo",
        "claude-test-1",
        "claude-title-1",
        "claude-compact-1",
    )
    assert (planner.compact_at_tokens, planner.max_rounds, planner.max_output_tokens) == (5000, 7, 1024)
    assert planner.max_subchats == 2
    assert (planner.daily_token_budget, planner.four_eyes, planner.skill) == (123456, True, "planning")
    assert planner.approve_tools == (tool,)
    assert (work.claim_minutes, work.reuse_threshold, work.direct_edits) == (45, 0.95, "state")
    assert work.reuse_judge_floor == 0.6
    assert work.labels == ("bug", "ui")
    assert set(project.settings) == set(PROJECT_SETTINGS)
    page = client.get(SETTINGS)
    assertContains(page, "The settings were saved.")
    assert page.content.decode().count("this project's own</span>") == len(PROJECT_SETTINGS)
    assertContains(page, 'value="7"')
    assertContains(page, '<option value="on" selected>On</option>', html=True)
    assertContains(page, '<option value="state" selected>state</option>', html=True)


def test_back_to_the_defaults(project, owner):
    project_update(
        actor=Actor(user=owner),
        project=project,
        settings={"max_rounds": 3, "four_eyes": True, "labels": ["x"], "approve_tools": ["create_item"]},
    )
    page = signed_in(owner).get(SETTINGS)
    assert page.content.decode().count("this project's own</span>") == 4
    saved = signed_in(owner).post(SETTINGS, form(project, labels="x", labels__source="default"))
    assert saved.status_code == 302
    assert stored(project).settings == {}
    assert project_planner_config(stored(project)).max_rounds == 25


def test_an_empty_list_is_a_value_of_its_own(project, owner):
    project_update(actor=Actor(user=owner), project=project, settings={"approve_tools": ["create_item"]})
    saved = signed_in(owner).post(SETTINGS, form(project, approve_tools__source="own"))
    assert saved.status_code == 302
    assert stored(project).settings == {"approve_tools": []}


@pytest.mark.parametrize(
    ("fields", "where", "message"),
    [
        ({"max_rounds": "-1"}, "max_rounds", "max_rounds: must be positive, got -1"),
        ({"max_rounds": "abc"}, "max_rounds", "max_rounds: expected an integer, got &#x27;abc&#x27;"),
        ({"claim_minutes": "0"}, "claim_minutes", "claim_minutes: must be positive, got 0"),
        ({"reuse_threshold": "1.5"}, "reuse_threshold", "reuse_threshold: must be at most 1, got 1.5"),
        ({"provider": "openai"}, "provider", "provider: expected anthropic or demo, got &#x27;openai&#x27;"),
        ({"direct_edits": "some"}, "direct_edits", "direct_edits: Input should be"),
        ({"four_eyes": "maybe"}, "four_eyes", "Choose on, off or the default."),
        ({"labels__source": "own", "labels": "ok, Not OK!"}, "labels", "labels[1]"),
        ({"model": "m\x00"}, "model", "NUL"),
        ({"model": "m" * 201}, "model", "At most 200 characters."),
        ({"labels__source": "own", "labels": "a," * 1001}, "labels", "At most 2000 characters."),
        ({"approve_tools__source": "own", "approve_tools": ["x\x00"]}, "approve_tools", "NUL"),
    ],
)
def test_a_bad_value_is_shown_by_its_field_and_nothing_is_saved(project, owner, fields, where, message):
    before = {"claim_minutes": 20}
    project_update(actor=Actor(user=owner), project=project, settings=before)
    sent = form(project, name="Not saved", max_output_tokens="99", **fields)
    page = signed_in(owner).post(SETTINGS, sent)
    assert page.status_code == 400
    html = page.content.decode()
    errors = html[html.index(f'id="{where}-errors"') :]
    assert message in errors[: errors.index("</div>")]
    assertContains(page, "Nothing was saved", status_code=400)
    assertContains(page, 'value="99"', status_code=400)  # what was typed is kept
    project = stored(project)
    assert (project.name, project.settings) == ("Ballet", before)


def test_every_error_at_once(project, owner):
    page = signed_in(owner).post(SETTINGS, form(project, name="", max_rounds="0", claim_minutes="x"))
    assert page.status_code == 400
    for where in ("name", "max_rounds", "claim_minutes"):
        assertContains(page, f'id="{where}-errors"', status_code=400)


def test_a_bad_name_or_description_saves_nothing(project, owner):
    client = signed_in(owner)
    for fields in ({"name": "x" * 201}, {"name": "a\x00b"}, {"description": "d\x00"}, {"name": "  "}):
        page = client.post(SETTINGS, form(project, max_rounds="3", **fields))
        assert page.status_code == 400, fields
    assert stored(project).settings == {}
    assert stored(project).name == "Ballet"


def test_only_owners_see_or_change_the_settings(client, project, users, other_project):
    sent = form(project, max_rounds="3")
    assert client.post(SETTINGS, sent).status_code == 302  # anonymous: to the login page
    for role in ("maintainer", "member", "viewer"):
        assert signed_in(users[role]).post(SETTINGS, sent).status_code == 403, role
        assert signed_in(users[role]).get(SETTINGS).status_code == 403, role
    assert signed_in(users["stranger"]).post(SETTINGS, sent).status_code == 404
    elsewhere = UserFactory(username="elsewhere")
    MembershipFactory(project=other_project, user=elsewhere, role=Role.OWNER)
    assert signed_in(elsewhere).post(SETTINGS, sent).status_code == 404
    assert stored(project).settings == {}


def test_the_settings_form_needs_its_csrf_token(project, owner):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    assert strict.post(SETTINGS, form(project, max_rounds="3")).status_code == 403
    assert stored(project).settings == {}


def test_the_default_comes_from_the_configuration(project, owner, settings):
    settings.BALLET_PLANNER = dataclasses.replace(settings.BALLET_PLANNER, max_rounds=12)
    page = signed_in(owner).get(SETTINGS)
    assertContains(page, 'placeholder="12"')
    assertContains(page, "In use: <strong>12</strong>")
