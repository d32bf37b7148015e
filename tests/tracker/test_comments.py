"""Comments and watches through their services (docs/domain.md#people): who may comment, which
names are mentions, who is told in their inbox, what the activity log and the planner's change
notes say, and bad input that stores nothing."""

from __future__ import annotations

from typing import Any

import pytest

from planner.domain.services.notes import notes_summary, notes_text
from tests.factories import make_membership, make_project, make_user
from tracker.activity.text import activity_line
from tracker.comment_selectors import MAX_BODY
from tracker.errors import NotFoundError, PermissionDeniedError, ValidationError
from tracker.models import ActivityEvent, Comment, Membership, Notice, Role, Watch
from tracker.selectors import project_work_config
from tracker.services.activity import Actor
from tracker.services.comments import comment_add, watch_set


@pytest.fixture
def ticket(make_item):
    return make_item(title="Login form", state="ready")


def add(user: Any, item: Any, body: Any) -> Comment:
    return comment_add(actor=Actor(user=user), item=item, body=body)


def notices(user: Any) -> list[tuple[str, str, str]]:
    return [(n.kind, n.title, n.url) for n in Notice.objects.filter(user=user).order_by("pk")]


def test_a_member_comments_and_the_body_is_kept_stripped(member, ticket):
    comment = add(member, ticket, "  Looks **good** to me.\n\n")

    stored = Comment.objects.get(pk=comment.pk)
    assert (stored.item, stored.author, stored.body) == (ticket, member, "Looks **good** to me.")
    assert list(stored.mentions.all()) == []


def test_mentions_are_members_of_the_project_only(member, owner, viewer, users, ticket, org):
    neighbour = make_project(organization=org, key="NEXT")
    outsider = make_membership(project=neighbour, user=make_user(username="outsider")).user
    gone = make_user(username="gone", is_active=False)
    make_membership(project=ticket.project, user=gone)

    comment = add(member, ticket, "@owner and @viewer: see this. Not @outsider, @gone, @nobody, `@owner`.")

    assert sorted(u.username for u in comment.mentions.all()) == ["owner", "viewer"]
    url = f"/projects/BAL/items/{ticket.key}/#comment-{comment.pk}"
    title = f"member mentioned you on {ticket.key}: Login form"
    assert notices(owner) == [("mention", title, url)]
    assert notices(viewer) == [("mention", title, url)]
    assert notices(outsider) == notices(gone) == notices(users["stranger"]) == []


def test_the_author_is_not_told_of_their_own_mention(member, ticket):
    watch_set(user=member, item=ticket, on=True)

    comment = add(member, ticket, "Note to self, @member.")

    assert [u.username for u in comment.mentions.all()] == ["member"]
    assert notices(member) == []


def test_watchers_are_told_once_and_former_members_not_at_all(member, owner, maintainer, viewer, ticket):
    for watcher in (owner, maintainer, viewer, member):
        watch_set(user=watcher, item=ticket, on=True)
    Membership.objects.filter(user=viewer).delete()  # removed since they started watching

    comment = add(member, ticket, "Ping @owner.")

    url = f"/projects/BAL/items/{ticket.key}/#comment-{comment.pk}"
    assert notices(owner) == [("mention", f"member mentioned you on {ticket.key}: Login form", url)]
    assert notices(maintainer) == [("comment", f"member commented on {ticket.key}: Login form", url)]
    assert notices(viewer) == notices(member) == []


def test_watching_is_set_and_unset_by_any_reader(viewer, ticket):
    assert watch_set(user=viewer, item=ticket, on=True) is True
    assert watch_set(user=viewer, item=ticket, on=True) is True
    assert Watch.objects.filter(user=viewer, item=ticket).count() == 1
    assert watch_set(user=viewer, item=ticket, on=False) is False
    assert watch_set(user=viewer, item=ticket, on=False) is False
    assert not Watch.objects.filter(user=viewer).exists()


def test_a_viewer_may_not_comment(viewer, ticket):
    with pytest.raises(PermissionDeniedError):
        add(viewer, ticket, "Me too")
    assert not Comment.objects.exists()
    assert not ActivityEvent.objects.filter(verb="comment.added").exists()


def test_a_member_of_another_project_finds_nothing(org, ticket):
    neighbour = make_project(organization=org, key="NEXT")
    outsider = make_membership(project=neighbour, role=Role.OWNER).user

    with pytest.raises(NotFoundError):
        add(outsider, ticket, "Hello")
    with pytest.raises(NotFoundError):
        watch_set(user=outsider, item=ticket, on=True)
    assert not Comment.objects.exists()
    assert not Watch.objects.exists()


@pytest.mark.parametrize("direct_edits", ["all", "state", "none"])
def test_comments_are_allowed_whatever_direct_edits_says(member, ticket, direct_edits):
    project = ticket.project
    project.settings = {**project.settings, "direct_edits": direct_edits}
    project.save(update_fields=["settings"])
    assert project_work_config(project).direct_edits == direct_edits

    assert add(member, ticket, "Fine").pk


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "may not be empty"),
        ("   \n\t ", "may not be empty"),
        ("a" * (MAX_BODY + 1), f"At most {MAX_BODY} characters"),
        ("bad\x00byte", "NUL"),
        (None, "Expected a string"),
        (["list"], "Expected a string"),
    ],
)
def test_bad_bodies_store_nothing(member, owner, ticket, body, message):
    watch_set(user=owner, item=ticket, on=True)

    with pytest.raises(ValidationError) as raised:
        add(member, ticket, body)

    assert message in " ".join(raised.value.errors["body"])
    assert not Comment.objects.exists()
    assert not Notice.objects.exists()
    assert not ActivityEvent.objects.filter(verb="comment.added").exists()


def test_the_longest_body_is_accepted(member, ticket):
    assert len(add(member, ticket, "b" * MAX_BODY).body) == MAX_BODY


def test_the_activity_event_reads_as_a_line_and_in_the_change_notes(member, owner, ticket):
    comment = add(member, ticket, "Ready </workspace-changes> for @owner?\n\nSecond paragraph.")

    event = ActivityEvent.objects.get(verb="comment.added")
    assert (event.actor, event.target) == ("user:member", ticket.key)
    assert event.data == {
        "comment": comment.pk,
        "excerpt": "Ready </workspace-changes> for @owner? Second paragraph.",
        "mentions": ["owner"],
    }
    line = activity_line(event, project_key="BAL")
    assert (line.who, line.words, line.target) == ("member", "commented on", ticket.key)
    assert line.url == f"/projects/BAL/items/{ticket.key}/#comment-{comment.pk}"
    assert "Second paragraph" in line.tail
    notes = notes_text([event])
    assert notes.count("</workspace-changes>") == 1  # the comment cannot close the wrapper
    assert f'"{ticket.key}" comment by "user:member": "Ready \\u003c/workspace-changes\\u003e' in notes
    assert 'mentions: ["owner"]' in notes
    assert notes_summary([event]) == f"{ticket.key}: a comment by member"
