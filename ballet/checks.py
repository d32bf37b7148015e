"""System checks of a deployment (``manage.py check --deploy``), and of its database where
``migrate`` (and ``check --database default``) ask for it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.db import DatabaseError, connections


def metrics_shared(app_configs: Any = None, **_kwargs: Any) -> list[checks.CheckMessage]:
    """Production mode runs several processes: /metrics adds them up only with a shared directory."""
    if settings.PRODUCTION_MODE and settings.METRICS_DIR is None:
        return [
            checks.Warning(
                "BALLET_METRICS_DIR is not set: /metrics shows only the counts of the process that "
                "answers the scrape.",
                hint="Set it to a directory on local disk shared by the host's daphne processes and "
                "Celery workers (docs/operations.md, Metrics).",
                id="ballet.W001",
            )
        ]
    return []


MAX_KEYS_NAMED = 20  # a warning names this many projects, then counts the rest


def demo_planners(app_configs: Any = None, **_kwargs: Any) -> list[checks.CheckMessage]:
    """Production projects whose chats the demo planner answers (scripted, no AI model): most
    likely a credential forgotten at deploy, which a user would otherwise be the first to notice.

    It reads the projects, so it says nothing where it cannot: a database not reachable or not
    migrated yet (``check --deploy`` run before ``migrate``) has no projects to warn about."""
    if not settings.PRODUCTION_MODE:
        return []
    from tracker.models import Project  # noqa: PLC0415 - the apps are not ready when this module loads
    from tracker.selectors import demo_planner_reason  # noqa: PLC0415

    by_reason: dict[str, list[str]] = {}
    try:
        for project in Project.objects.order_by("key"):
            if (reason := demo_planner_reason(project)) is not None:
                by_reason.setdefault(reason, []).append(project.key)
    except DatabaseError:
        return []
    return [
        checks.Warning(
            f"The demo planner answers the chats of {_named(keys)} (scripted, no AI model): {reason}.",
            hint="An owner sets the project's Anthropic credential on /projects/{key}/settings/; or set "
            "ANTHROPIC_API_KEY for every project, or run bootstrap with --credential-env NAME.",
            id="ballet.W002",
        )
        for reason, keys in by_reason.items()
    ]


def _named(keys: list[str]) -> str:
    shown = ", ".join(keys[:MAX_KEYS_NAMED])
    more = len(keys) - MAX_KEYS_NAMED
    words = f"{shown} and {more} more" if more > 0 else shown
    return f"project{'s' if len(keys) > 1 else ''} {words}"


CONNECT_SECONDS = 5  # a server that does not answer at all: said in seconds, not left to hang


def database_reachable(
    app_configs: Any = None, databases: Any = None, **_kwargs: Any
) -> list[checks.CheckMessage]:
    """Can the processes connect to PostgreSQL? Asked by ``migrate``, the first command a
    deployment runs (``make run`` too), so that a database not created yet, a wrong password or
    a server that is down is said in one line: through the connection pool, every one of them is
    "couldn't get a connection after 10.00 sec" after ten seconds, its cause only in the pool's
    warnings above a traceback. One direct connection, closed at once."""
    if not databases or "default" not in databases or connections["default"].vendor != "postgresql":
        return []
    import psycopg  # noqa: PLC0415 - PostgreSQL's driver, only where PostgreSQL is used

    params = connections["default"].get_connection_params()  # what Django's pool connects with
    try:
        psycopg.connect(**params, connect_timeout=CONNECT_SECONDS).close()
    except psycopg.Error as exc:
        reason = (
            " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
        )
        where = f"{params.get('host', 'localhost')}:{params.get('port', 5432)}"
        return [
            checks.Error(
                f"Cannot connect to the database {params.get('dbname', '')!r} on {where} "
                f"(DATABASE_URL): {reason}",
                hint="Create the database first (createdb, or CREATE DATABASE), check the user and "
                "password in DATABASE_URL, and that PostgreSQL runs (README, Production).",
                id="ballet.E001",
            )
        ]
    return []


def register() -> None:
    checks.register(metrics_shared, "ballet", deploy=True)
    checks.register(demo_planners, "ballet", deploy=True)
    checks.register(database_reachable, checks.Tags.database)
