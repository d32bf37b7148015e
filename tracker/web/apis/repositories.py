"""A project's linked Git repositories over REST (SPEC § 16): list and read (the project's readers:
status, never the credential), link, change, unlink and fetch now (owners, ``project.admin``).

404 for whoever cannot read the project, 403 for a reader who is no owner. A read key reads the
list; no API key links, changes or fetches one (``scopes``: None), as none manages webhooks: a
repository's source and credential are the owners' to set.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.models import Scope
from tracker.repos.selectors import repositories_of, repository_get
from tracker.services.repositories import (
    repository_fetch_request,
    repository_link,
    repository_unlink,
    repository_update,
)
from tracker.trust.permissions import PROJECT_ADMIN, TRACKER_READ
from tracker.web.apis.base import (
    READ_ERRORS,
    WRITE_ERRORS,
    BalletApi,
    actor_for,
    parse,
    project_for,
    with_errors,
)
from tracker.web.repository_serializers import (
    RepositoryLinkSerializer,
    RepositorySerializer,
    RepositoryUpdateSerializer,
)

OWNERS = "Needs project.admin."


class RepositoryListApi(BalletApi):
    scopes = {"GET": Scope.READ, "POST": None}

    @extend_schema(
        summary="The project's linked repositories and how their mirrors stand (never a credential)",
        responses=with_errors({200: RepositorySerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, TRACKER_READ)
        return self.paginated(repositories_of(project), RepositorySerializer)

    @extend_schema(
        summary="Link a repository: an https or ssh URL, or a local path under [repositories] local_roots",
        description=f"{OWNERS} Its first fetch is queued; the credential is never shown again.",
        request=RepositoryLinkSerializer,
        responses=with_errors({201: RepositorySerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        data = parse(RepositoryLinkSerializer, request.data)
        repo = repository_link(actor=actor_for(request), project=project, **data)
        return Response(RepositorySerializer(repo).data, status=status.HTTP_201_CREATED)


class RepositoryDetailApi(BalletApi):
    scopes = {"GET": Scope.READ, "PATCH": None, "DELETE": None}

    @extend_schema(
        summary="A linked repository and how its mirror stands (never its credential)",
        responses=with_errors({200: RepositorySerializer}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str, repository_id: int) -> Response:
        project = project_for(request, key, TRACKER_READ)
        return Response(
            RepositorySerializer(repository_get(project=project, repository_id=repository_id)).data
        )

    @extend_schema(
        summary="Change a repository's default branch or credential",
        description=f"{OWNERS} A fetch is queued.",
        request=RepositoryUpdateSerializer,
        responses=with_errors({200: RepositorySerializer}, *WRITE_ERRORS),
    )
    def patch(self, request: Request, key: str, repository_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        data = parse(RepositoryUpdateSerializer, request.data)
        repo = repository_update(
            actor=actor_for(request), project=project, repository_id=repository_id, **data
        )
        return Response(RepositorySerializer(repo).data)

    @extend_schema(
        summary="Unlink a repository; its mirror is removed",
        description=OWNERS,
        responses=with_errors({204: None}, *WRITE_ERRORS),
    )
    def delete(self, request: Request, key: str, repository_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        repository_unlink(actor=actor_for(request), project=project, repository_id=repository_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RepositoryFetchApi(BalletApi):
    scopes = {"POST": None}

    @extend_schema(
        summary="Fetch a repository's mirror now",
        description=f"{OWNERS} The worker (embedded: the server) fetches it shortly; the repository's "
        "last_fetch_at, last_commit and last_error say how it went.",
        request=None,
        responses=with_errors({202: RepositorySerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request, key: str, repository_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        repo = repository_fetch_request(
            actor=actor_for(request), project=project, repository_id=repository_id
        )
        return Response(RepositorySerializer(repo).data, status=status.HTTP_202_ACCEPTED)
