"""Shared fixtures: an organization with a project and one user per role."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import override_settings
from rest_framework.test import APIClient

from ballet import lifespan
from planner.ground.bridge import close_db_connections
from tests import cache_keys
from tests.factories import MembershipFactory, OrganizationFactory, ProjectFactory, UserFactory
from tracker.models import Item, Project, Role
from tracker.services.activity import Actor
from tracker.services.items import item_create

ROLES = ("viewer", "member", "maintainer", "owner")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The two modes split the browser's page tests: what a page shows and does is the same in
    both (marker ``pages``), so the embedded mode runs them and production mode, which runs
    everything that depends on PostgreSQL, Redis and several processes, deselects them. So with
    the tests of the embedded mode alone (marker ``embedded``)."""
    from django.conf import settings  # noqa: PLC0415 - read once pytest-django has configured it

    if not settings.PRODUCTION_MODE:
        return

    def embedded_only(item: pytest.Item) -> bool:
        return any(item.get_closest_marker(name) is not None for name in ("pages", "embedded"))

    deselected = [item for item in items if embedded_only(item)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if not embedded_only(item)]


@pytest.fixture
def org(db):
    return OrganizationFactory(name="Acme", slug="acme")


@pytest.fixture
def project(org):
    return ProjectFactory(organization=org, key="BAL", name="Ballet")


@pytest.fixture
def other_project(db):
    """A project of another organization that none of the role users belongs to."""
    other_org = OrganizationFactory(name="Other", slug="other")
    return ProjectFactory(organization=other_org, key="OTH", name="Other project")


@pytest.fixture
def users(project) -> dict[str, Any]:
    """One user per role in ``project``, plus ``stranger`` with no membership."""
    result: dict[str, Any] = {}
    for role in ROLES:
        user = UserFactory(username=role)
        MembershipFactory(project=project, user=user, role=Role(role))
        result[role] = user
    result["stranger"] = UserFactory(username="stranger")
    return result


@pytest.fixture
def staff(users) -> dict[str, Any]:
    """The role users, allowed into the admin (what they see there is up to their role)."""
    for user in users.values():
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    return users


@pytest.fixture
def superuser(db):
    return UserFactory(username="root", is_staff=True, is_superuser=True)


@pytest.fixture
def owner(users):
    return users["owner"]


@pytest.fixture
def maintainer(users):
    return users["maintainer"]


@pytest.fixture
def member(users):
    return users["member"]


@pytest.fixture
def viewer(users):
    return users["viewer"]


@pytest.fixture
def make_item(project, owner) -> Callable[..., Item]:
    """Create an item through the service, as the owner."""

    def make(
        kind: str = "ticket", title: str = "A ticket", target: Project | None = None, **fields: Any
    ) -> Item:
        return item_create(
            actor=Actor(user=owner), project=target or project, kind=kind, fields={"title": title, **fields}
        )

    return make


@pytest.fixture
def indexed(django_capture_on_commit_callbacks) -> Callable[[], AbstractContextManager[Any]]:
    """``with indexed(): ...`` runs the on-commit search indexing of the writes inside, as a commit would.

    Tests run in a transaction that never commits, so on-commit work runs only where a test asks.
    """
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def client_for(api_client) -> Callable[[Any], APIClient]:
    """An API client logged in as ``user`` (None: anonymous)."""

    def make(user: Any) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make


@pytest.fixture
async def live_side() -> AsyncIterator[None]:
    """The process's live side (the hub, the MCP session manager) on the test's event loop, as
    it runs on a server's for its lifetime."""
    async with lifespan.serving():
        yield


@pytest.fixture(autouse=True)
def _live_side_for_async_tests(request: pytest.FixtureRequest) -> None:
    """An async test runs an event loop of its own: the live side runs on it. A sync test gets
    none (a browser test's Playwright runs a loop of its own in the test's thread)."""
    if inspect.iscoroutinefunction(request.function):
        request.getfixturevalue("live_side")


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Rate limits and lockouts counted by one test do not reach the next."""
    cache_keys.next_generation()


@pytest.fixture(scope="session", autouse=True)
def _repositories_elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Mirrors and the demo's repository (seed_demo) in a temporary folder, never the checkout's db/."""
    where = tmp_path_factory.mktemp("repositories")
    with override_settings(REPOSITORIES_PATH=where / "mirrors", DEMO_REPOSITORY_ROOT=where / "demo"):
        yield


@pytest.fixture(scope="session", autouse=True)
def _close_thread_connections(django_db_setup):
    """Threads that ran ORM code (the runner's, asgiref's) keep connections: close them
    before the test database is dropped."""
    yield
    close_db_connections()
    asyncio.run(sync_to_async(connections.close_all)())
