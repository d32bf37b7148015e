"""Schemathesis over /api/schema/, in-process as a project owner with data present: no 5xx, no
response that breaks the schema. Bounded: a few examples per operation, no deadline, no shrinking."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, settings
from rest_framework.authtoken.models import Token
from schemathesis import checks

from knowledge.services import knowledge_create
from planner.domain.services.sessions import session_create
from tracker.services.activity import Actor
from tracker.services.changesets import changeset_propose
from tracker.services.skills import skill_version_create

# Committed: the planner's async endpoints read on the runner's database threads, whose
# connections see only what is committed.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owner_token(project, users, make_item) -> str:
    owner = users["owner"]
    epic = make_item(kind="epic", title="Accounts")
    make_item(title="Login", state="ready", epic=epic)
    changeset_propose(
        actor=Actor(user=users["member"]),
        project=project,
        title="Add an epic",
        operations=[{"op": "create", "kind": "epic", "fields": {"title": "E"}}],
    )
    skill_version_create(actor=Actor(user=owner), project=project, name="planner", body="# Plan")
    knowledge_create(actor=Actor(user=owner), kind="note", title="Note", body="Body", projects=[project])
    session_create(user=owner, project=project, title="Chat")
    return Token.objects.create(user=owner).key


# The schema /api/schema/ serves, built at collection (no request, no database needed).
schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
schema.app = get_wsgi_application()


@schema.parametrize()
@settings(
    max_examples=50,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_the_api_answers_every_generated_request_without_a_server_error(case, owner_token):
    # A schema-valid request may still name what does not exist (a project, an item): refusing it is right.
    case.call_and_validate(
        headers={"Authorization": f"Token {owner_token}"}, excluded_checks=[checks.positive_data_acceptance]
    )
