"""Open planner sockets and running turns lose access the moment their human does (SPEC § 12.1).

Each socket and each turn running in this process holds a :class:`Grant`: who,
in which project, and (for a socket) through which login session. One task per
process re-reads every few seconds, in three queries for all of them, whether
each login session still exists and still belongs to its user, whether the user
is active, and whether they may still chat in the project. A grant that no
longer holds is revoked: a socket is closed with the code that says why (4401
logged out or deactivated, 4404 no longer a reader of the project, 4403 no
longer allowed to chat), a turn is stopped. A frame is acted on only with the
access its user has when it arrives (the runner reads it); a consumer whose frame
is refused checks its grant at once and closes, even between two sweeps.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session as LoginSession
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from planner.live.background import running_here
from tracker.permissions import PLANNER_CHAT, TRACKER_READ, access_load, access_scope, has_permission

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 2.0
NOT_LOGGED_IN = 4401
FORBIDDEN = 4403
NOT_FOUND = 4404


@dataclass(eq=False)
class Grant:
    """A user's standing access to chat in a project, held by a socket or a running turn."""

    user_id: int
    project_id: int
    # The Django session a socket logged in with; None for a turn (it acts for its human
    # whether or not they are still logged in somewhere) or a socket authenticated otherwise.
    login_key: str | None
    revoke: Callable[[int], Awaitable[None] | None]


_grants: set[Grant] = set()
_sweeper: asyncio.Task[None] | None = None


def hold(grant: Grant) -> None:
    """Check ``grant`` from now on, until :func:`release`."""
    global _sweeper  # noqa: PLW0603 - one sweeper per process
    _grants.add(grant)
    if not running_here(_sweeper):
        _sweeper = asyncio.get_running_loop().create_task(_sweep_forever(), context=contextvars.Context())


def release(grant: Grant) -> None:
    _grants.discard(grant)


def refusals(grants: Iterable[Grant]) -> dict[Grant, int]:
    """The grants that no longer hold, each with the close code that says why."""
    grants = list(grants)
    logins = _logins({g.login_key for g in grants if g.login_key})
    user_ids = {g.user_id for g in grants}
    hashes = {u.pk: u.get_session_auth_hash() for u in User.objects.filter(pk__in=user_ids)}
    refused: dict[Grant, int] = {}
    with access_scope():
        access = access_load(user_ids)
        for grant in grants:
            code = _refusal(grant, logins, hashes, access[grant.user_id].active)
            if code is not None:
                refused[grant] = code
    return refused


def _refusal(
    grant: Grant, logins: dict[str, dict[str, Any]], hashes: dict[int, str], active: bool
) -> int | None:
    if not active:
        return NOT_LOGGED_IN
    if grant.login_key is not None and not _logged_in(logins.get(grant.login_key), grant.user_id, hashes):
        return NOT_LOGGED_IN
    return chat_refusal(User(pk=grant.user_id), grant.project_id)  # access is read from the database


def chat_refusal(user: User, project_id: int) -> int | None:
    """None if ``user`` may chat in the project, else the close code that says why not."""
    if has_permission(user, project_id, PLANNER_CHAT):
        return None
    return FORBIDDEN if has_permission(user, project_id, TRACKER_READ) else NOT_FOUND


def _logged_in(data: dict[str, Any] | None, user_id: int, hashes: dict[int, str]) -> bool:
    """Does this login session still log ``user_id`` in (not flushed, expired or outdated by a
    password change), as Django's ``get_user`` decides?"""
    if data is None or str(data.get(SESSION_KEY)) != str(user_id) or user_id not in hashes:
        return False
    return constant_time_compare(str(data.get(HASH_SESSION_KEY, "")), hashes[user_id])


def _logins(keys: set[str]) -> dict[str, dict[str, Any]]:
    """The data of the login sessions among ``keys`` that still exist."""
    store_class = import_module(settings.SESSION_ENGINE).SessionStore
    if settings.SESSION_ENGINE != "django.contrib.sessions.backends.db":
        return {key: data for key in keys if (data := store_class(key).load())}
    rows = LoginSession.objects.filter(session_key__in=keys, expire_date__gt=timezone.now())
    decoder = store_class()
    return {row.session_key: decoder.decode(row.session_data) for row in rows}


async def check(grant: Grant) -> int | None:
    """The close code if ``grant`` no longer holds (for a frame that was refused)."""
    refused = await database_sync_to_async(refusals)([grant])
    return refused.get(grant)


async def sweep() -> None:
    """Revoke every grant of this process that no longer holds."""
    if not _grants:
        return
    refused = await database_sync_to_async(refusals)(list(_grants))
    for grant, code in refused.items():
        if grant not in _grants:
            continue  # released meanwhile
        release(grant)
        try:
            outcome = grant.revoke(code)
            if outcome is not None:
                await outcome
        except Exception:  # one socket that fails to close must not keep the others open
            logger.exception("could not revoke the access of user %s", grant.user_id)


async def _sweep_forever() -> None:
    while _grants:
        await asyncio.sleep(SWEEP_SECONDS)
        try:
            await sweep()
        except Exception:
            logger.exception("could not re-check the access of %d sockets and turns", len(_grants))
