"""Configuration loading: the only reader of ``os.environ`` and ``ballet.toml``.

Settings come from ``ballet.toml`` (path in ``BALLET_CONFIG``), then environment
variables; per-project overrides live on the project and are resolved by
:func:`planner_setting`.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "claude-sonnet-5-5"


class ConfigError(Exception):
    """The configuration file or a variable cannot be used."""


@dataclass(frozen=True)
class PlannerConfig:
    model: str = DEFAULT_MODEL
    compact_at_tokens: int = 100_000
    max_rounds: int = 25
    max_output_tokens: int = 8192
    compaction_model: str | None = None
    four_eyes: bool = False
    skill: str | None = None
    daily_token_budget: int | None = None  # input + output tokens per project per UTC day


# (toml key, environment variable, type) of every planner setting.
PLANNER_KEYS: dict[str, tuple[str | None, type]] = {
    "model": ("BALLET_PLANNER_MODEL", str),
    "compact_at_tokens": ("BALLET_PLANNER_COMPACT_AT_TOKENS", int),
    "max_rounds": ("BALLET_PLANNER_MAX_ROUNDS", int),
    "max_output_tokens": ("BALLET_PLANNER_MAX_OUTPUT_TOKENS", int),
    "compaction_model": ("BALLET_PLANNER_COMPACTION_MODEL", str),
    "four_eyes": (None, bool),
    "skill": (None, str),
    "daily_token_budget": ("BALLET_PLANNER_DAILY_TOKEN_BUDGET", int),
}


def _read_toml() -> dict[str, Any]:
    path = os.environ.get("BALLET_CONFIG")
    if not path:
        return {}
    try:
        with Path(path).open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read BALLET_CONFIG={path}: {exc}") from exc


def coerce(name: str, value: Any, kind: type) -> Any:
    """Convert ``value`` to ``kind`` or raise :class:`ConfigError` naming the setting."""
    if value is None:
        return None
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in {"1", "true", "yes", "on"}:
            return True
        if text in {"0", "false", "no", "off", ""}:
            return False
        raise ConfigError(f"{name}: expected a boolean, got {value!r}")
    if kind is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{name}: expected an integer, got {value!r}") from exc
        if number <= 0:
            raise ConfigError(f"{name}: must be positive, got {number}")
        return number
    text = str(value).strip()
    return text or None


def load_planner_config() -> PlannerConfig:
    """The planner defaults: ``ballet.toml``'s ``[planner]`` table, then the environment."""
    table = _read_toml().get("planner", {})
    if not isinstance(table, dict):
        raise ConfigError("[planner] in ballet.toml must be a table")
    values: dict[str, Any] = {}
    for key, (env_name, kind) in PLANNER_KEYS.items():
        if key in table:
            values[key] = coerce(f"[planner] {key}", table[key], kind)
        if env_name and os.environ.get(env_name):
            values[key] = coerce(env_name, os.environ[env_name], kind)
    return PlannerConfig(**values)


@dataclass(frozen=True)
class LimitsConfig:
    """The abuse limits of SPEC § 12.4: ``[limits]`` in ballet.toml, ``BALLET_LIMIT_<NAME>``."""

    login_failures: int = 5  # failed logins per username and per IP within the window ...
    login_window_seconds: int = 900  # ... after which even the right password is refused
    messages_per_minute: int = 20  # planner messages a user sends, on every surface
    running_turns_per_user: int = 3
    running_turns_per_project: int = 10
    steering_queued: int = 5  # steering messages waiting in one turn ...
    steering_chars: int = 32_768  # ... and their characters in all
    frames_per_second: int = 20  # WebSocket frames a connection sends ...
    frames_excess_seconds: int = 10  # ... and how long it may exceed that before it is closed
    token_requests_per_minute: int = 60  # MCP and question requests per API token


def load_limits_config() -> LimitsConfig:
    """The limits: ``ballet.toml``'s ``[limits]`` table, then ``BALLET_LIMIT_*`` variables."""
    table = _read_toml().get("limits", {})
    if not isinstance(table, dict):
        raise ConfigError("[limits] in ballet.toml must be a table")
    names = set(LimitsConfig.__dataclass_fields__)
    unknown = sorted(set(table) - names)
    if unknown:
        raise ConfigError(f"[limits] has unknown keys: {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for name in names:
        env_name = f"BALLET_LIMIT_{name.upper()}"
        if name in table:
            values[name] = coerce(f"[limits] {name}", table[name], int)
        if os.environ.get(env_name):
            values[name] = coerce(env_name, os.environ[env_name], int)
    return LimitsConfig(**values)


@dataclass(frozen=True)
class ServerConfig:
    database_url: str | None
    redis_url: str | None
    sqlite_path: str | None
    secret_key: str | None
    debug: bool | None
    allowed_hosts: list[str]
    anthropic_api_key: str | None
    anthropic_base_url: str | None
    search_embedding_backend: str | None = None  # dotted path of a tracker.search.embeddings backend

    @property
    def production(self) -> bool:
        return bool(self.database_url and self.redis_url)


def load_server_config() -> ServerConfig:
    """Process-level settings read from the environment."""
    hosts = os.environ.get("DJANGO_ALLOWED_HOSTS", "")
    debug = os.environ.get("DJANGO_DEBUG")
    return ServerConfig(
        database_url=os.environ.get("DATABASE_URL") or None,
        sqlite_path=os.environ.get("BALLET_SQLITE_PATH") or None,
        redis_url=os.environ.get("REDIS_URL") or None,
        secret_key=os.environ.get("DJANGO_SECRET_KEY") or None,
        debug=None if debug is None else coerce("DJANGO_DEBUG", debug, bool),
        allowed_hosts=[host.strip() for host in hosts.split(",") if host.strip()],
        anthropic_api_key=os.environ.get("ANTHROPIC_API_KEY") or None,
        anthropic_base_url=os.environ.get("ANTHROPIC_BASE_URL") or None,
        search_embedding_backend=os.environ.get("BALLET_SEARCH_EMBEDDING_BACKEND") or None,
    )
