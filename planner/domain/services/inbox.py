"""The inbox's one write: a user puts an entry away (docs/domain.md#the-inbox)."""

from __future__ import annotations

import re
from typing import Any, Final

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from planner.domain.inbox import inbox_entry_exists
from tracker.errors import NotFoundError
from tracker.models import Dismissal

# An entry's id: its source's prefix, then letters, digits and hyphens (``changeset-DEMO-12``).
ENTRY_ID: Final = re.compile(r"[a-z_]+-[A-Za-z0-9-]{1,90}")
NOT_FOUND: Final = "No such entry in your inbox."


def inbox_dismiss(*, user: User, entry_id: Any) -> None:
    """Put away ``entry_id``, an entry of the user's inbox now: never shown to them again (a new id,
    such as a ticket in review edited since, shows again). Dismissing twice changes nothing; an id
    that names no entry of theirs (unknown, malformed, another user's) is a NotFoundError."""
    if not isinstance(entry_id, str) or not ENTRY_ID.fullmatch(entry_id):
        raise NotFoundError(NOT_FOUND)
    if not inbox_entry_exists(user=user, entry_id=entry_id):
        raise NotFoundError(NOT_FOUND)
    try:
        with transaction.atomic():
            Dismissal.objects.get_or_create(user=user, entry=entry_id)
    except IntegrityError:  # dismissed at the same moment elsewhere: it is put away all the same
        pass
