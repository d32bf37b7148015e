"""A deployment's first superuser, organization and project (docs/operations.md#from-nothing).

:func:`bootstrap` is what ``manage.py bootstrap`` runs on a fresh database: all of it in one
transaction, each part created only if missing, so running it again changes nothing. What
exists already must agree with what is asked (the user a superuser, the project in the
organization, the user its owner), else nothing is written and the error says what differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.utils.text import slugify

from tracker.errors import ValidationError
from tracker.inputs import refuse_nul
from tracker.models import Membership, Organization, Project, Role
from tracker.models.access import PROJECT_KEY_VALIDATOR
from tracker.services.activity import Actor, activity_record
from tracker.services.projects import project_update


@dataclass(frozen=True)
class BootstrapResult:
    """What was created (True) or found already there (False)."""

    user: User
    project: Project
    user_created: bool
    organization_created: bool
    project_created: bool
    membership_created: bool
    credential_set: bool


@transaction.atomic
def bootstrap(
    *,
    username: str,
    email: str,
    password: str | None,
    organization_name: str,
    project_key: str,
    project_name: str,
    credential: str | None = None,
) -> BootstrapResult:
    """Ensure the superuser ``username`` (``password`` sets a new one's; an existing user keeps
    theirs), the organization, the project with the superuser as its owner and, if given, the
    project's credential (stored encrypted by :func:`project_update`)."""
    refuse_nul(
        username=username, email=email, organization=organization_name, key=project_key, name=project_name
    )
    _check_project_fields(project_key, project_name, organization_name)
    user, user_created = _superuser_ensure(username, email, password)
    organization, organization_created = Organization.objects.get_or_create(
        slug=slugify(organization_name), defaults={"name": organization_name.strip()}
    )
    project, project_created = _project_ensure(organization, project_key, project_name)
    membership_created = _owner_ensure(user, project)
    if credential is not None:
        project_update(actor=Actor(user=user), project=project, credential=credential)
    return BootstrapResult(
        user=user,
        project=project,
        user_created=user_created,
        organization_created=organization_created,
        project_created=project_created,
        membership_created=membership_created,
        credential_set=credential is not None,
    )


def _check_project_fields(key: str, name: str, organization_name: str) -> None:
    errors: dict[str, list[str]] = {}
    try:
        PROJECT_KEY_VALIDATOR(key)
    except DjangoValidationError as exc:
        errors["project_key"] = [f"{key!r}: {message}" for message in exc.messages]
    if not name.strip() or len(name) > 200:
        errors["project_name"] = ["Expected 1 to 200 characters."]
    if not slugify(organization_name) or len(organization_name) > 200:
        errors["organization"] = ["Expected 1 to 200 characters, some of them letters or digits."]
    if errors:
        raise ValidationError(errors, next(iter(errors.values()))[0])


def _superuser_ensure(username: str, email: str, password: str | None) -> tuple[User, bool]:
    user = User.objects.filter(username=username).first()
    if user is not None:
        if not (user.is_superuser and user.is_active):
            message = (
                f"A user named {username!r} exists and is not an active superuser; choose another username."
            )
            raise ValidationError({"username": [message]}, message)
        return user, False
    if not username.strip() or len(username) > 150:
        raise ValidationError(
            {"username": ["Expected 1 to 150 characters."]}, "The username is empty or too long."
        )
    if not password:
        raise ValidationError(
            {"password": ["A new superuser needs a password."]}, "A new superuser needs a password."
        )
    candidate = User(username=username, email=email)
    try:
        validate_password(password, candidate)
    except DjangoValidationError as exc:
        raise ValidationError({"password": list(exc.messages)}, " ".join(exc.messages)) from exc
    return User.objects.create_superuser(username=username, email=email, password=password), True


def _project_ensure(organization: Organization, key: str, name: str) -> tuple[Project, bool]:
    project = Project.objects.filter(key=key).first()
    if project is None:
        return Project.objects.create(organization=organization, key=key, name=name.strip()), True
    if project.organization_id != organization.pk:
        message = f"Project {key} exists in another organization ({project.organization.name})."
        raise ValidationError({"project_key": [message]}, message)
    return project, False


def _owner_ensure(user: User, project: Project) -> bool:
    membership = Membership.objects.filter(project=project, user=user).first()
    if membership is not None:
        if membership.role != Role.OWNER:
            message = f"{user.get_username()} is a {membership.role} of {project.key}, not its owner."
            raise ValidationError({"username": [message]}, message)
        return False
    # The first owner: nobody may grant it through membership_set yet.
    Membership.objects.create(project=project, user=user, role=Role.OWNER)
    activity_record(
        actor=Actor(user=user),
        organization_id=project.organization_id,
        project=project,
        verb="membership.set",
        target=f"user:{user.get_username()}",
        data={"role": Role.OWNER},
    )
    return True
