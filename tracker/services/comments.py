"""Comments on items and watching them (docs/domain.md#people).

A comment is a person's Markdown note on an item. Writing one needs ``tracker.write`` in the item's
project whatever ``[tracker] direct_edits`` says (a comment changes nothing in the plan). Its
``@name`` mentions are the project's active members it names; anyone else named is just text. The
comment, its mentions and an activity event (``comment.added``: the pages' activity and the planner's
change notes tell it) are stored in one transaction, and so is what the event causes
(``tracker/services/notify_audience.py``): a mention for each member named, a ``comment`` notice for
each watcher or claim holder who may still read the project (the author is never told of their own
comment, and nobody twice), and their mail.
"""

from __future__ import annotations

from typing import Any, Final

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from ballet.markdown import mentioned_names
from tracker.comment_selectors import MAX_BODY, members_named
from tracker.errors import ValidationError
from tracker.inputs import NUL_MESSAGE, one_line
from tracker.models import Comment, Item, Watch
from tracker.services.activity import Actor, activity_record
from tracker.trust.permissions import TRACKER_READ, TRACKER_WRITE, require

EXCERPT: Final = 200  # how much of a comment its activity event carries
COMMENT_VERB: Final = "comment.added"


def comment_body(body: Any) -> str:
    """``body`` checked and stripped: a string of 1..MAX_BODY characters without NUL."""
    if not isinstance(body, str):
        raise ValidationError({"body": ["Expected a string of Markdown."]})
    if "\x00" in body:
        raise ValidationError({"body": [NUL_MESSAGE]})
    text = body.strip()
    if not text:
        raise ValidationError({"body": ["Write something: a comment may not be empty."]})
    if len(text) > MAX_BODY:
        raise ValidationError({"body": [f"At most {MAX_BODY} characters (this one has {len(text)})."]})
    return text


def comment_add(*, actor: Actor, item: Item, body: Any) -> Comment:
    """``actor`` comments on ``item``: the comment, its mentions, the activity event and the inbox
    notices it causes, all or nothing. NotFoundError for whoever cannot read the project,
    PermissionDeniedError for a reader without ``tracker.write``, ValidationError for a bad body."""
    project = item.project
    require(actor.user, project, TRACKER_WRITE)
    text = comment_body(body)
    author = actor.user
    with transaction.atomic():
        comment = Comment.objects.create(item=item, author=author, body=text)
        mentioned = members_named(project=project, names=mentioned_names(text))
        if mentioned:
            comment.mentions.set(mentioned)
        activity_record(
            actor=actor,
            organization_id=project.organization_id,
            project=project,
            verb=COMMENT_VERB,
            target=item.key,
            data={
                "comment": comment.pk,
                "excerpt": one_line(text, EXCERPT),
                "mentions": [user.get_username() for user in mentioned],
            },
        )
    return comment


def watch_set(*, user: User, item: Item, on: bool) -> bool:
    """``user`` starts (``on``) or stops watching ``item``; whether they watch it now. Needs
    ``tracker.read``; starting twice or stopping when not watching changes nothing."""
    require(user, item.project, TRACKER_READ)
    if not on:
        Watch.objects.filter(item=item, user=user).delete()
        return False
    try:
        with transaction.atomic():  # a concurrent first watch: the unique constraint keeps one row
            Watch.objects.get_or_create(item=item, user=user)
    except IntegrityError:
        pass
    return True
