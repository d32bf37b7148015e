"""Who an ``Authorization`` header says the caller is, and what an API key lets it do.

REST (``tracker/web/authentication.py``) and MCP (``planner/mcp_server/app.py``) read
the header here: ``Bearer``, ``Token`` or ``Api-Key`` followed by an API key
(``ballet_<prefix>.<secret>``) or a legacy REST token (40 letters and digits,
which keeps its user's full access until ``LEGACY_TOKEN_SUNSET``). A key acts as
its user, only within its scopes and, bound to projects, only there; the one
permission check (``tracker/trust/permissions.py``) still decides what the
user's roles allow. ``docs/api-keys.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Final

from django.contrib.auth.models import User
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.utils.http import http_date
from rest_framework.authtoken.models import Token

from tracker.errors import CredentialError, MissingScopeError
from tracker.models import ApiKey, Scope
from tracker.services.keys import KEY_PREFIX, PREFIX_CHARS, SECRET_CHARS, key_used, secret_hash
from tracker.trust.permissions import key_bind

SCHEMES: Final = frozenset({"bearer", "token", "api-key"})
MAX_CREDENTIAL: Final = 200  # longer than any key or token: refused before any lookup
KEY_PATTERN: Final = re.compile(
    rf"{re.escape(KEY_PREFIX)}([A-Za-z0-9]{{{PREFIX_CHARS}}})\.([A-Za-z0-9]{{{SECRET_CHARS}}})"
)
TOKEN_CHARS: Final = Token._meta.get_field("key").max_length or 40
INACTIVE: Final = "User inactive or deleted."
KEYS_PAGE: Final = "/keys/"


def credential_of(authorization: str | None) -> str | None:
    """The credential of ``Bearer X``, ``Token X`` or ``Api-Key X``; None for any other header
    (another scheme, no credential or more than one word, too long, not printable ASCII)."""
    parts = (authorization or "").split()
    if len(parts) != 2 or parts[0].lower() not in SCHEMES:
        return None
    credential = parts[1]
    if len(credential) > MAX_CREDENTIAL or not (credential.isascii() and credential.isprintable()):
        return None
    return credential


# Legacy tokens (POST /api/v1/auth/token/) work through this day (UTC) and are refused after it
# (docs/api-keys.md#legacy-tokens); until then their answers carry Deprecation and Sunset headers.
LEGACY_TOKEN_SUNSET: Final = date(2027, 6, 30)
_SUNSET_END: Final = datetime.combine(LEGACY_TOKEN_SUNSET, time(23, 59, 59), tzinfo=UTC)
LEGACY_TOKEN_HEADERS: Final = {"Deprecation": "true", "Sunset": http_date(_SUNSET_END.timestamp())}
LEGACY_TOKEN_GONE: Final = (
    f"Legacy API tokens stopped working after {LEGACY_TOKEN_SUNSET.isoformat()}; "
    f"create an API key at {KEYS_PAGE} and send it as Authorization: Bearer KEY."
)


def legacy_tokens_retired(now: datetime | None = None) -> bool:
    """Whether the deprecation window of legacy tokens is over."""
    return (now or timezone.now()) > _SUNSET_END


def credential_authenticate(credential: str) -> tuple[User, ApiKey | Token]:
    """The active user ``credential`` belongs to, and the key or legacy token it is; CredentialError
    with a readable message otherwise. A key bound to projects binds the user it returns to them
    (``tracker.trust.permissions.key_bind``): every check of the request sees only those."""
    if credential.startswith(KEY_PREFIX):
        key = _key(credential)
        bound = frozenset(key.projects.values_list("pk", flat=True))
        key.bound_project_ids = bound  # type: ignore[attr-defined]  # read by KeyScopes.of
        return key_bind(key.user, bound), key
    shaped = len(credential) <= TOKEN_CHARS and credential.isalnum()
    token = Token.objects.select_related("user").filter(key=credential).first() if shaped else None
    if token is None:
        raise CredentialError("Invalid token.")
    if legacy_tokens_retired():
        raise CredentialError(LEGACY_TOKEN_GONE)
    if not token.user.is_active:
        raise CredentialError(INACTIVE)
    return token.user, token


def _key(credential: str) -> ApiKey:
    match = KEY_PATTERN.fullmatch(credential)
    key = ApiKey.objects.select_related("user").filter(prefix=match[1]).first() if match else None
    if match is None or key is None or not constant_time_compare(key.secret_hash, secret_hash(match[2])):
        raise CredentialError("Invalid API key.")
    which = f"The API key {key.prefix} ({key.name})"
    if key.revoked_at is not None:
        raise CredentialError(f"{which} was revoked; create another at {KEYS_PAGE}.")
    if key.expires_at is not None and key.expired:
        when = key.expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        raise CredentialError(f"{which} expired at {when}; create another at {KEYS_PAGE}.")
    if not key.user.is_active:
        raise CredentialError(INACTIVE)
    key_used(key=key)
    return key


@dataclass(frozen=True)
class KeyScopes:
    """What :func:`scope_require` reads of an API key, as plain data: what a request served on the
    event loop holds of its key (``planner/mcp_server/app.py``)."""

    scopes: tuple[str, ...]
    projects: frozenset[int] = frozenset()  # bound to these projects; none: unbound

    @classmethod
    def of(cls, key: ApiKey) -> KeyScopes:
        return cls(tuple(key.scopes), getattr(key, "bound_project_ids", frozenset()))


def scope_require(auth: object, scope: Scope | None, what: str) -> None:
    """Raise MissingScopeError unless the request's ``auth`` may use ``what`` (``POST /api/v1/…``,
    ``the tool ask_question``): an API key (or its :class:`KeyScopes`) needs ``scope``, and None
    means no key may; a session or a legacy token is not restricted by scopes."""
    if not isinstance(auth, ApiKey | KeyScopes):
        return
    if scope is None:
        raise MissingScopeError(
            f"An API key cannot be used for {what}: sign in, or use the token of POST /api/v1/auth/token/."
        )
    if scope in auth.scopes:
        return
    held = ", ".join(auth.scopes) or "none"
    raise MissingScopeError(
        f"This API key lacks the {scope} scope, which {what} needs (it has {held}); "
        f"create a key with {scope} at {KEYS_PAGE}."
    )
