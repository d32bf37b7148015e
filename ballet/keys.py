"""The keys of docs/trust.md#secrets: Django's ``SECRET_KEY`` and the projects' credential key.

Production mode takes them from the environment (``ballet.env``'s :class:`ServerConfig`) and
refuses to start without them; the embedded mode generates them on first run and keeps them beside
its database, owner-only.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from pathlib import Path

from cryptography.fernet import Fernet

from ballet.env import ConfigError, ServerConfig


@dataclasses.dataclass(frozen=True)
class Keys:
    """The keys of docs/trust.md#secrets: Django's ``SECRET_KEY`` and the credential key (with fallbacks)."""

    secret_key: str = dataclasses.field(repr=False)
    credential_key: str = dataclasses.field(repr=False)
    credential_key_fallbacks: tuple[str, ...] = dataclasses.field(default=(), repr=False)


def embedded_database_path(server: ServerConfig, default: Path) -> Path:
    """The embedded mode's SQLite file; its folder is created, so a fresh clone's migrate works."""
    path = Path(server.sqlite_path) if server.sqlite_path else default
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def load_keys(server: ServerConfig, *, embedded_folder: Path) -> Keys:
    """The keys from the environment. Production mode refuses to start without them; the
    embedded mode generates them on first run and keeps them in ``embedded_folder`` (mode 0600)."""
    secret_key, credential_key = server.secret_key, server.credential_key
    if server.production:
        named = (("DJANGO_SECRET_KEY", secret_key), ("BALLET_CREDENTIAL_KEY", credential_key))
        missing = [name for name, value in named if not value]
        if missing:
            raise ConfigError(
                f"{' and '.join(missing)} must be set in production mode (DATABASE_URL and REDIS_URL "
                "are set); see the README's production setup."
            )
    secret_key = secret_key or _kept_key(embedded_folder / "secret_key", secrets.token_urlsafe(50))
    credential_key = credential_key or _kept_key(
        embedded_folder / "credential_key", Fernet.generate_key().decode()
    )
    _check_fernet_key("BALLET_CREDENTIAL_KEY", credential_key)
    for key in server.credential_key_fallbacks:
        _check_fernet_key("BALLET_CREDENTIAL_KEY_FALLBACKS", key)
    return Keys(secret_key, credential_key, server.credential_key_fallbacks)


def _kept_key(path: Path, new_key: str) -> str:
    """The key stored at ``path``; ``new_key`` is written there (owner-only) if none is."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(new_key + "\n")
    try:
        # A hard link never replaces: of two processes starting at once, both keep the first key.
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        draft.unlink()
    return path.read_text().strip()


def _check_fernet_key(name: str, key: str) -> None:
    try:
        Fernet(key)
    except ValueError as exc:
        raise ConfigError(
            f"{name}: expected a Fernet key (32 url-safe base64-encoded bytes); make one with "
            'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
        ) from exc
