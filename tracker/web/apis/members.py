"""Invitations and agents over REST (docs/api-keys.md#agents, SPEC § 9 members).

An owner invites by username or e-mail; only the invited user accepts or declines
(anyone else is told the invitation does not exist). An owner makes an agent and
its first key, bound to the project, in one call: the answer holds the key, once.
No API key manages members, invitations or agents (``scopes``: None).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from tracker.member_selectors import agent_list, invitation_list_of_project, invitation_of_user
from tracker.models import Invitation, Role, Scope
from tracker.services.keys import MAX_EXPIRY_DAYS
from tracker.services.keys import MAX_NAME as MAX_KEY_NAME
from tracker.services.members import (
    AGENT_ROLES,
    MAX_EMAIL,
    MAX_USERNAME,
    agent_create,
    invitation_accept,
    invitation_cancel,
    invitation_create,
    invitation_decline,
)
from tracker.trust.permissions import PROJECT_ADMIN
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
from tracker.web.key_serializers import KeySerializer
from tracker.web.serializers import (
    MembershipSerializer,
    StrictCharField,
    StrictIntegerField,
    StrictSerializer,
)


class InvitationSerializer(serializers.Serializer[Invitation]):
    id = serializers.IntegerField()
    project = serializers.CharField(source="project.key")
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=Role.choices)
    status = serializers.CharField()
    invited_by = serializers.CharField(source="invited_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class InvitationCreateSerializer(StrictSerializer):
    username = StrictCharField(max_length=MAX_USERNAME, required=False)
    email = StrictCharField(max_length=MAX_EMAIL, required=False)
    role = serializers.ChoiceField(choices=Role.choices)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("username" in attrs) == ("email" in attrs):
            raise serializers.ValidationError(
                {"username": ["Give a username or an e-mail address, not both."]}
            )
        return attrs


class AgentSerializer(serializers.Serializer[Any]):
    username = serializers.CharField(source="agent.user.username")
    name = serializers.CharField(source="agent.user.first_name")
    role = serializers.ChoiceField(choices=Role.choices)
    keys = KeySerializer(many=True, help_text="Its keys bound to this project (never their secrets).")
    active_claims = serializers.IntegerField()
    last_activity = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField(source="agent.created_at")


class AgentCreateSerializer(StrictSerializer):
    name = StrictCharField(max_length=MAX_KEY_NAME)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=Scope.values), min_length=1, max_length=len(Scope.values)
    )
    role = serializers.ChoiceField(
        choices=Role.choices,
        required=False,
        help_text=f"One of {', '.join(AGENT_ROLES)} (an agent never owns a project); default member.",
    )
    expires_in_days = StrictIntegerField(
        min_value=1, max_value=MAX_EXPIRY_DAYS, required=False, allow_null=True, help_text="None: never."
    )


class AgentCreatedSerializer(serializers.Serializer[Any]):
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=Role.choices)
    key_id = serializers.IntegerField()
    prefix = serializers.CharField()
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=Scope.values))
    key = serializers.CharField(help_text="Send it as Authorization: Bearer KEY. Shown here only, once.")


class InvitationListApi(BalletApi):
    scopes = {"GET": None, "POST": None}  # who may join: not with an API key

    @extend_schema(
        summary="A project's pending invitations",
        description="Needs project.admin.",
        responses=with_errors({200: InvitationSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        return self.paginated(invitation_list_of_project(project=project), InvitationSerializer)

    @extend_schema(
        summary="Invite a user by username or e-mail; they join only by accepting",
        description="Needs project.admin. The user finds the invitation in their inbox.",
        request=InvitationCreateSerializer,
        responses=with_errors({201: InvitationSerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        data = parse(InvitationCreateSerializer, request.data)
        invitation = invitation_create(actor=actor_for(request), project=project, **data)
        return Response(InvitationSerializer(invitation).data, status=status.HTTP_201_CREATED)


class InvitationDetailApi(BalletApi):
    scopes = {"DELETE": None}

    @extend_schema(
        summary="Cancel a pending invitation (again: 204)",
        description="Needs project.admin.",
        responses=with_errors({204: None}, *WRITE_ERRORS, 409),
    )
    def delete(self, request: Request, key: str, invitation_id: int) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        invitation_cancel(actor=actor_for(request), project=project, invitation_id=invitation_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationAcceptApi(BalletApi):
    scopes = {"POST": None}

    @extend_schema(
        summary="Accept your invitation: you become a member with its role (again: the same)",
        request=None,
        responses=with_errors({200: MembershipSerializer}, *WRITE_ERRORS, 409),
    )
    def post(self, request: Request, invitation_id: int) -> Response:
        user = caller(request)
        invitation = invitation_of_user(user=user, invitation_id=invitation_id)
        membership = invitation_accept(user=user, invitation=invitation)
        return Response(MembershipSerializer(membership).data)


class InvitationDeclineApi(BalletApi):
    scopes = {"POST": None}

    @extend_schema(
        summary="Decline your invitation (again: the same)",
        request=None,
        responses=with_errors({200: InvitationSerializer}, *WRITE_ERRORS, 409),
    )
    def post(self, request: Request, invitation_id: int) -> Response:
        user = caller(request)
        invitation = invitation_of_user(user=user, invitation_id=invitation_id)
        return Response(InvitationSerializer(invitation_decline(user=user, invitation=invitation)).data)


class AgentListApi(BalletApi):
    scopes = {"GET": None, "POST": None}

    @extend_schema(
        summary="A project's agents with their keys, claims held and last activity",
        description="Needs project.admin.",
        responses=with_errors({200: AgentSerializer(many=True)}, *READ_ERRORS),
    )
    def get(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        return self.paginated(agent_list(project=project), AgentSerializer)

    @extend_schema(
        summary="Make an agent and its key, bound to this project: the answer holds the key, once",
        description="Needs project.admin. The agent is a member with role (default member) who cannot "
        "sign in to the pages; its key acts only in this project, within its scopes.",
        request=AgentCreateSerializer,
        responses=with_errors({201: AgentCreatedSerializer}, *WRITE_ERRORS),
    )
    def post(self, request: Request, key: str) -> Response:
        project = project_for(request, key, PROJECT_ADMIN)
        data = parse(AgentCreateSerializer, request.data)
        agent, made, secret = agent_create(actor=actor_for(request), project=project, **data)
        body = {
            "username": agent.user.username,
            "role": data.get("role", Role.MEMBER),
            "key_id": made.pk,
            "prefix": made.prefix,
            "scopes": made.scopes,
            "key": secret,
        }
        return Response(body, status=status.HTTP_201_CREATED)
