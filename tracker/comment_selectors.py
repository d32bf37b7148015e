"""Reads about the talk around an item (docs/domain.md#people): its comments, who watches it, the
names a comment may mention, and a comment's Markdown as the pages and the REST API show it.

A comment's body is a person's text: it is shown only through :func:`ballet.markdown.render`
(sanitized), with the item keys of the comment's project linked where such an item exists and
``@name`` marked where ``name`` is a member of the project.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils.safestring import SafeString, mark_safe

from ballet.markdown import KEY, render
from tracker.inputs import ascii_number
from tracker.models import Comment, Item, Membership, Project, Watch
from tracker.page_links import item_url
from tracker.repos.refs import code_links, linked_html
from tracker.trust.permissions import TRACKER_WRITE, has_permission

MAX_BODY = 20_000  # a comment's characters, once stripped (tracker.services.comments checks it)


def comment_list(*, item: Item) -> QuerySet[Comment]:
    """``item``'s comments, oldest first, with their authors and mentions (two queries a page)."""
    return (
        Comment.objects.filter(item=item)
        .select_related("author")
        .prefetch_related("mentions")
        .order_by("created_at", "pk")
    )


def member_names(*, project: Project) -> frozenset[str]:
    """The usernames of ``project``'s active members: the names an ``@name`` may mention there."""
    names = Membership.objects.filter(project=project, user__is_active=True).values_list(
        "user__username", flat=True
    )
    return frozenset(names)


def members_named(*, project: Project, names: Iterable[str]) -> list[User]:
    """The active members of ``project`` among ``names`` (unknown names and strangers left out)."""
    wanted = set(names)
    if not wanted:
        return []
    return list(
        User.objects.filter(username__in=wanted, is_active=True, memberships__project=project).order_by(
            "username"
        )
    )


def watching(*, user: User, item: Item) -> bool:
    """Whether ``user`` watches ``item``."""
    return Watch.objects.filter(item=item, user=user).exists()


def watcher_ids(*, item: Item) -> list[int]:
    """The ids of the users watching ``item``, in the order they started."""
    return list(Watch.objects.filter(item=item).order_by("pk").values_list("user_id", flat=True))


def existing_keys(*, project: Project, texts: Iterable[str]) -> frozenset[str]:
    """The keys of ``project``'s items named in ``texts`` that exist (one query): a comment links
    only those, never a key that would lead to a "not found"."""
    prefix = f"{project.key}-"
    numbers = {
        number
        for text in texts
        for key in KEY.findall(text)
        if key.startswith(prefix) and (number := ascii_number(key[len(prefix) :])) is not None
    }
    if not numbers:
        return frozenset()
    found = Item.objects.filter(project=project, number__in=numbers).values_list("number", flat=True)
    return frozenset(f"{prefix}{number}" for number in found)


def comment_html(*, body: str, project: Project, keys: frozenset[str], names: frozenset[str]) -> SafeString:
    """``body`` as sanitized HTML: ``keys`` (:func:`existing_keys`) linked to their pages, ``names``
    (:func:`member_names`) marked as mentions."""
    return render(
        body,
        link_key=lambda key: item_url(project.key, key) if key in keys else None,
        mentions=names,
    )


@dataclass(frozen=True)
class CommentShown:
    comment: Comment
    html: SafeString


@dataclass(frozen=True)
class CommentThread:
    """What the ticket page shows of the talk around an item, for one reader."""

    comments: list[CommentShown]
    can_comment: bool
    watching: bool
    draft: str  # a comment of the reader's that was refused, given back to fix
    max_body: int = MAX_BODY


def comment_thread(*, user: User, project: Project, item: Item, draft: str = "") -> CommentThread:
    """``item``'s comments rendered for ``user`` (the project's existing item keys, commits and
    repository files linked, its members' mentions marked), and whether they may comment
    (``tracker.write``) and watch it."""
    comments = list(comment_list(item=item))
    keys = existing_keys(project=project, texts=[c.body for c in comments])
    names = member_names(project=project) if comments else frozenset()
    code = code_links(project=project, texts=[c.body for c in comments])  # commits, files: one git each
    return CommentThread(
        comments=[
            CommentShown(
                c,
                mark_safe(  # noqa: S308 - sanitized HTML, with links of the server's own addresses
                    linked_html(comment_html(body=c.body, project=project, keys=keys, names=names), code)
                ),
            )
            for c in comments
        ],
        can_comment=has_permission(user, project, TRACKER_WRITE),
        watching=watching(user=user, item=item),
        draft=draft,
    )


def draft_key(item: Item) -> str:
    """Where the session keeps a refused comment on ``item`` until the page gives it back."""
    return f"comment-draft-{item.pk}"
