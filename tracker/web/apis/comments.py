"""Talk around an item over REST (docs/domain.md#people): an item's comments (GET lists them oldest
first, POST adds one with ``@name`` mentions) and watching it (POST starts, DELETE stops)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.comment_selectors import (
    MAX_BODY,
    comment_html,
    comment_list,
    existing_keys,
    member_names,
    watching,
)
from tracker.models import Comment, Project, Scope
from tracker.selectors import item_get
from tracker.services.comments import comment_add, watch_set
from tracker.trust.permissions import TRACKER_READ, TRACKER_WRITE
from tracker.web.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    actor_for,
    caller,
    parse,
    project_for,
    with_errors,
)
from tracker.web.serializers import NoInputSerializer, StrictCharField, StrictSerializer

ITEM_KEY = OpenApiParameter("item_key", str, OpenApiParameter.PATH, description="The item's key (BAL-12).")


class CommentSerializer(serializers.Serializer[Comment]):
    id = serializers.IntegerField()
    author = serializers.CharField(source="author.username")
    body = serializers.CharField(help_text="Markdown, as the author wrote it (stripped).")
    body_html = serializers.SerializerMethodField(
        help_text="The body rendered and sanitized: the project's item keys linked, mentions marked."
    )
    mentions = serializers.SerializerMethodField(help_text="The usernames of the members it mentions.")
    created_at = serializers.DateTimeField()

    def get_body_html(self, comment: Comment) -> str:
        context = self.context
        return str(
            comment_html(
                body=comment.body, project=context["project"], keys=context["keys"], names=context["names"]
            )
        )

    def get_mentions(self, comment: Comment) -> list[str]:
        return sorted(user.get_username() for user in comment.mentions.all())


class CommentCreateSerializer(StrictSerializer):
    body = StrictCharField(max_length=MAX_BODY, help_text="Markdown; @name mentions a member of the project.")


class WatchingSerializer(serializers.Serializer[Any]):
    watching = serializers.BooleanField(help_text="Whether the caller watches the item now.")


def _rendering(project: Project, comments: list[Comment]) -> dict[str, Any]:
    """What :class:`CommentSerializer` needs to render ``comments``, read once for all of them."""
    return {
        "project": project,
        "keys": existing_keys(project=project, texts=[c.body for c in comments]),
        "names": member_names(project=project),
    }


class CommentListApi(BalletApi):
    scopes = {"GET": Scope.READ, "POST": Scope.PLAN}

    @extend_schema(
        summary="List an item's comments, oldest first",
        parameters=[ITEM_KEY],
        responses=with_errors({200: CommentSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, item_key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        item = item_get(project=project, key=item_key)
        return self.paginated(
            comment_list(item=item), CommentSerializer, lambda page: _rendering(project, page)
        )

    @extend_schema(
        summary="Comment on an item; @name mentions a member of the project (their inbox tells them)",
        description=(
            "Needs tracker.write, whatever the project's direct edits allow. The body is Markdown of "
            f"1 to {MAX_BODY} characters once stripped. Watchers of the item are told in their inbox."
        ),
        parameters=[ITEM_KEY],
        request=CommentCreateSerializer,
        responses=with_errors({201: CommentSerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request, key: str, item_key: str) -> Response:
        project = project_for(request, key, TRACKER_WRITE)
        item = item_get(project=project, key=item_key)
        data = parse(CommentCreateSerializer, request.data)
        comment = comment_add(actor=actor_for(request), item=item, body=data["body"])
        context = _rendering(project, [comment])
        return Response(CommentSerializer(comment, context=context).data, status=status.HTTP_201_CREATED)


class WatchApi(BalletApi):
    scopes = {"GET": Scope.READ, "POST": Scope.PLAN, "DELETE": Scope.PLAN}

    @extend_schema(
        summary="Whether the caller watches an item",
        parameters=[ITEM_KEY],
        responses=with_errors({200: WatchingSerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, item_key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        item = item_get(project=project, key=item_key)
        return Response({"watching": watching(user=caller(request), item=item)})

    @extend_schema(
        summary="Watch an item: its comments reach the caller's inbox",
        description="Needs tracker.read. Watching an item already watched changes nothing.",
        parameters=[ITEM_KEY],
        request=NoInputSerializer,
        responses=with_errors({200: WatchingSerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request, key: str, item_key: str) -> Response:
        return self._set(request, key, item_key, on=True)

    @extend_schema(
        summary="Stop watching an item",
        description="Needs tracker.read. Stopping when not watching changes nothing.",
        parameters=[ITEM_KEY],
        responses=with_errors({200: WatchingSerializer}, *WRITE_ERRORS),
    )
    def delete(self, request: Request, key: str, item_key: str) -> Response:
        return self._set(request, key, item_key, on=False)

    def _set(self, request: Request, key: str, item_key: str, *, on: bool) -> Response:
        project = project_for(request, key, TRACKER_READ)
        item = item_get(project=project, key=item_key)
        if on:
            parse(NoInputSerializer, request.data)
        return Response({"watching": watch_set(user=caller(request), item=item, on=on)})
