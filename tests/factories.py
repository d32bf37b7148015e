"""factory_boy factories for rows the tests need as given; changes go through services."""

from __future__ import annotations

from typing import cast

import factory
from django.contrib.auth.models import User

from tracker.models import Membership, Organization, Project, Role, Scope
from tracker.services.keys import key_create


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("pw-for-tests")


class OrganizationFactory(factory.django.DjangoModelFactory[Organization]):
    class Meta:
        model = Organization
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Org {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")


class ProjectFactory(factory.django.DjangoModelFactory[Project]):
    class Meta:
        model = Project
        django_get_or_create = ("key",)

    organization = factory.SubFactory(OrganizationFactory)
    key = factory.Sequence(lambda n: f"P{n}X")
    name = factory.Sequence(lambda n: f"Project {n}")


class MembershipFactory(factory.django.DjangoModelFactory[Membership]):
    class Meta:
        model = Membership

    project = factory.SubFactory(ProjectFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.MEMBER


def make_user(**kwargs: object) -> User:
    return cast(User, UserFactory(**kwargs))


def make_project(**kwargs: object) -> Project:
    return cast(Project, ProjectFactory(**kwargs))


def make_membership(**kwargs: object) -> Membership:
    return cast(Membership, MembershipFactory(**kwargs))


def make_key(user: User, *scopes: str, name: str = "agent", expires_in_days: int | None = None) -> str:
    """A new API key of ``user`` (every scope unless named), made by the service: the key string."""
    return key_create(user=user, name=name, scopes=scopes or Scope.values, expires_in_days=expires_in_days)[1]
