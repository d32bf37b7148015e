"""factory_boy factories for rows the tests need as given; changes go through services."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from tracker.models import Membership, Organization, Project, Role


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("pw-for-tests")


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Org {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project
        django_get_or_create = ("key",)

    organization = factory.SubFactory(OrganizationFactory)
    key = factory.Sequence(lambda n: f"P{n}X")
    name = factory.Sequence(lambda n: f"Project {n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    project = factory.SubFactory(ProjectFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.MEMBER
