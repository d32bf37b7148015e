"""Who reaches a session's knowledge drafts over REST (docs/domain.md#drafts): its owner while they
may read the project, and nobody else, whatever the draft id they send."""

from __future__ import annotations

import pytest

from knowledge.models import KnowledgeEntry
from planner.domain.services.sessions import session_create
from planner.models import DraftStatus, KnowledgeDraft
from tests.factories import MembershipFactory, UserFactory
from tests.planner.domain.test_drafts import _drafted, _url, refused_everything
from tracker.models import Membership, Role

pytestmark = pytest.mark.django_db


@pytest.fixture
def plan(make_item):
    return make_item(kind="epic", title="Payments"), make_item(title="Guest fee by card")


@pytest.fixture
def chat(project, member):
    return session_create(user=member, project=project, title="Payments replan")


def test_another_member_of_the_project_reaches_none_of_a_chats_drafts(chat, plan, project, client_for):
    (draft, *_) = _drafted(chat, plan)
    colleague = UserFactory(username="colleague")
    MembershipFactory(project=project, user=colleague, role=Role.MEMBER)
    refused_everything(client_for(colleague), chat, draft)


def test_a_member_of_another_project_reaches_none_of_a_chats_drafts(chat, plan, other_project, client_for):
    (draft, *_) = _drafted(chat, plan)
    outsider = UserFactory(username="outsider")
    MembershipFactory(project=other_project, user=outsider, role=Role.OWNER)
    refused_everything(client_for(outsider), chat, draft)


def test_an_owner_removed_from_the_project_reaches_their_chats_drafts_no_more(chat, plan, member, client_for):
    (draft, *_) = _drafted(chat, plan)
    Membership.objects.filter(user=member, project=chat.project).delete()
    refused_everything(client_for(member), chat, draft)


def test_a_draft_is_reached_only_through_its_own_chat(chat, plan, project, member, client_for):
    (draft, *_) = _drafted(chat, plan)
    mine = session_create(user=member, project=project)
    client = client_for(member)
    assert client.post(_url(mine, f"{draft.pk}/publish/"), {}, format="json").status_code == 404
    assert client.post(_url(mine, f"{draft.pk}/discard/")).status_code == 404
    assert client.get(_url(mine)).json() == []
    assert {d.status for d in KnowledgeDraft.objects.all()} == {DraftStatus.PENDING}
    assert not KnowledgeEntry.objects.exists()
