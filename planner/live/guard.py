"""Open planner sockets and running turns lose access the moment their human does (docs/trust.md).

Each socket and each turn running in this process holds a :class:`Grant`: who,
in which project, and (for a socket) through which login session. The hub's
:class:`Guard` re-reads every few seconds, in three queries for all of them, whether
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
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session as LoginSession
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from planner.ground.bridge import db
from tracker.trust.permissions import PLANNER_CHAT, TRACKER_READ, access_load, access_scope, has_permission

logger = logging.getLogger(__name__)

SWEEP_SECONDS = 2.0
NOT_LOGGED_IN = 4401
FORBIDDEN = 4403
NOT_FOUND = 4404


@dataclass(eq=False, slots=True)
class Grant:
    """A user's standing access to chat in a project, held by a socket or a running turn."""

    user_id: int
    project_id: int
    # The Django session a socket logged in with; None for a turn (it acts for its human
    # whether or not they are still logged in somewhere) or a socket authenticated otherwise.
    login_key: str | None
    revoke: Callable[[int], Awaitable[None] | None]


def refusals(grants: Iterable[Grant]) -> dict[Grant, int]:
    """The grants that no longer hold, each with the close code that says why."""
    grants = list(grants)
    logins = _logins({g.login_key for g in grants if g.login_key})
    user_ids = {g.user_id for g in grants}
    hashes = {u.pk: u.get_session_auth_hash() for u in User.objects.filter(pk__in=user_ids)}
    refused: dict[Grant, int] = {}
    # Grants alike (a user's tabs, their turns) get one verdict: a sweep of hundreds of sockets
    # holds the interpreter for as many checks as there are users, not sockets.
    verdicts: dict[tuple[int, int, str | None], int | None] = {}
    with access_scope():
        access = access_load(user_ids)
        for grant in grants:
            alike = (grant.user_id, grant.project_id, grant.login_key)
            if alike not in verdicts:
                verdicts[alike] = _refusal(grant, logins, hashes, access[grant.user_id].active)
            code = verdicts[alike]
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


class Guard:
    """The grants of this process's sockets and turns, and their sweep (the hub runs it)."""

    def __init__(self) -> None:
        self._grants: set[Grant] = set()

    def hold(self, grant: Grant) -> None:
        """Check ``grant`` from now on, until :meth:`release`."""
        self._grants.add(grant)

    def release(self, grant: Grant) -> None:
        self._grants.discard(grant)

    def holds(self, grant: Grant) -> bool:
        return grant in self._grants

    async def check(self, grant: Grant) -> int | None:
        """The close code if ``grant`` no longer holds (for a frame that was refused)."""
        refused = await db(refusals)([grant])
        return refused.get(grant)

    async def sweep(self) -> None:
        """Revoke every grant of this process that no longer holds."""
        if not self._grants:
            return
        refused = await db(refusals)(list(self._grants))
        for grant, code in refused.items():
            if grant not in self._grants:
                continue  # released meanwhile
            self.release(grant)
            try:
                outcome = grant.revoke(code)
                if outcome is not None:
                    await outcome
            except Exception:  # one socket that fails to close must not keep the others open
                logger.exception("could not revoke the access of user %s", grant.user_id)

    async def run(self) -> None:
        """Sweep every ``SWEEP_SECONDS``, for as long as the hub runs."""
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await self.sweep()
            except Exception:
                logger.exception("could not re-check the access of %d sockets and turns", len(self._grants))
