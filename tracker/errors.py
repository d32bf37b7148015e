"""Ballet's exceptions: every error a service raises is a :class:`BalletError`.

Interfaces (REST, admin, planner tools) turn them into their own answers;
``status`` is the HTTP status the REST API uses.
"""

from __future__ import annotations

from typing import Any


class BalletError(Exception):
    """Base of every domain error: a stable ``code`` and a readable message."""

    code = "error"
    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFoundError(BalletError):
    """The object does not exist, or the caller may not know that it does."""

    code = "not_found"
    status = 404


class PermissionDeniedError(BalletError):
    """The caller sees the object but lacks the permission for this action."""

    code = "permission_denied"
    status = 403


class CredentialError(BalletError):
    """An ``Authorization`` credential that authenticates no one: unknown, revoked, expired, or
    its user's account is inactive."""

    code = "authentication_failed"
    status = 401


class MissingScopeError(PermissionDeniedError):
    """The API key authenticating the request lacks the scope the action needs."""

    code = "missing_scope"


class ValidationError(BalletError):
    """Input is invalid; ``errors`` maps a field path to its messages."""

    code = "invalid"
    status = 400

    def __init__(self, errors: dict[str, list[str]], message: str = "Invalid input.") -> None:
        super().__init__(message)
        self.errors = errors

    @property
    def messages(self) -> list[str]:
        """Every field's messages, in one list (for a form or a page that shows them together)."""
        return [str(message) for messages in self.errors.values() for message in messages]


class ConflictError(BalletError):
    """The object changed since the caller read it; ``current`` is what it is now."""

    code = "conflict"
    status = 409

    def __init__(self, message: str, current: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.current = current


class InvalidStateError(BalletError):
    """The object's state does not allow this action (an applied changeset, say)."""

    code = "invalid_state"
    status = 409


class RateLimitedError(BalletError):
    """A limit of docs/trust.md#limits refuses the action for now; nothing already accepted is lost."""

    code = "rate_limited"
    status = 429


class UnavailableError(BalletError):
    """A service Ballet needs (the channel layer) cannot be reached right now; try again shortly."""

    code = "unavailable"
    status = 503


def error_text(exc: BalletError) -> str:
    """A readable message of a domain error, with its field errors."""
    if isinstance(exc, ValidationError) and exc.errors:
        details = "; ".join(f"{path}: {' '.join(msgs)}" for path, msgs in exc.errors.items())
        return f"{exc.message} {details}"
    return exc.message


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **{k: v for k, v in extra.items() if v is not None}}}
