"""Configuration loading: the only reader of ``os.environ`` and ``ballet.toml``.

Settings come from ``ballet.toml`` (path in ``BALLET_CONFIG``), then environment
variables; per-project overrides live on the project and are resolved by
:func:`planner_setting`.
"""

from __future__ import annotations

import math
import os
import secrets
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_TITLE_MODEL = "claude-haiku-4-5"  # a chat's title is a few words: the cheapest model will do


class ConfigError(Exception):
    """The configuration file or a variable cannot be used."""


class PlannerProvider(StrEnum):
    """Who answers the planner's model calls (docs/architecture.md#the-demo-planner); unset: automatic."""

    ANTHROPIC = "anthropic"
    DEMO = "demo"  # a scripted planner built into Ballet: no key, no model


@dataclass(frozen=True)
class PlannerConfig:
    model: str = DEFAULT_MODEL
    compact_at_tokens: int = 100_000
    max_rounds: int = 25
    max_output_tokens: int = 8192
    compaction_model: str | None = None
    title_model: str = DEFAULT_TITLE_MODEL
    four_eyes: bool = False
    skill: str | None = None
    daily_token_budget: int | None = None  # every token processed per project per UTC day, cached ones too
    approve_tools: tuple[str, ...] = ()  # tools whose calls wait for the human's approval (docs/domain.md)
    provider: str | None = None  # a PlannerProvider; None: demo when no credential is set anywhere


# (toml key, environment variable, type) of every planner setting.
PLANNER_KEYS: dict[str, tuple[str | None, type]] = {
    "model": ("BALLET_PLANNER_MODEL", str),
    "compact_at_tokens": ("BALLET_PLANNER_COMPACT_AT_TOKENS", int),
    "max_rounds": ("BALLET_PLANNER_MAX_ROUNDS", int),
    "max_output_tokens": ("BALLET_PLANNER_MAX_OUTPUT_TOKENS", int),
    "compaction_model": ("BALLET_PLANNER_COMPACTION_MODEL", str),
    "title_model": ("BALLET_PLANNER_TITLE_MODEL", str),
    "four_eyes": (None, bool),
    "skill": (None, str),
    "daily_token_budget": ("BALLET_PLANNER_DAILY_TOKEN_BUDGET", int),
    "approve_tools": (None, tuple),
    "provider": ("BALLET_PLANNER_PROVIDER", PlannerProvider),
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


def _names(name: str, value: Any) -> tuple[str, ...]:
    """A list of names (tool names), each a non-empty string, without repeats."""
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{name}: expected a list of names, got {value!r}")
    return tuple(dict.fromkeys(v.strip() for v in value))


def _boolean(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off", ""}:
        return False
    raise ConfigError(f"{name}: expected a boolean, got {value!r}")


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{name}: expected an integer, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}: expected an integer, got {value!r}") from exc
    if number <= 0:
        raise ConfigError(f"{name}: must be positive, got {number}")
    return number


def _fraction(name: str, value: Any) -> float:
    """A number above 0 and at most 1 (a similarity threshold)."""
    if isinstance(value, bool):
        raise ConfigError(f"{name}: expected a number between 0 and 1, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}: expected a number between 0 and 1, got {value!r}") from exc
    if not 0 < number <= 1:
        raise ConfigError(f"{name}: must be above 0 and at most 1, got {number}")
    return number


def _provider(name: str, value: Any) -> str:
    text = str(value).strip().lower()
    if text not in set(PlannerProvider):
        raise ConfigError(f"{name}: expected one of {', '.join(PlannerProvider)}, got {value!r}")
    return text


def coerce(name: str, value: Any, kind: type) -> Any:
    """Convert ``value`` to ``kind`` or raise :class:`ConfigError` naming the setting."""
    if value is None:
        return None
    convert = _CONVERTERS.get(kind)
    if convert is not None:
        return convert(name, value)
    text = str(value).strip()
    return text or None


_CONVERTERS: dict[type, Callable[[str, Any], Any]] = {
    bool: _boolean,
    tuple: _names,
    int: _positive,
    float: _fraction,
    PlannerProvider: _provider,
}


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
class WorkConfig:
    """Settings of work and questions a project may override, as it overrides the planner's."""

    claim_minutes: int = 30  # a claim's lease (docs/domain.md#work)
    # How alike (cosine of sentence embeddings) a question must be to an answered one to get its answer
    # back without a model call (docs/domain.md#agents-questions, docs/benchmarks.md#answer-reuse).
    reuse_threshold: float = 0.90  # bench/reuse.py: no false reuse on the labelled set at 0.88 and up


# (toml table, environment variable, type) of every work setting; the key is its name in the table.
WORK_KEYS: dict[str, tuple[str, str, type]] = {
    "claim_minutes": ("work", "BALLET_WORK_CLAIM_MINUTES", int),
    "reuse_threshold": ("questions", "BALLET_QUESTIONS_REUSE_THRESHOLD", float),
}


def load_work_config() -> WorkConfig:
    """``[work]`` and ``[questions]`` of ``ballet.toml``, then the environment."""
    toml = _read_toml()
    values: dict[str, Any] = {}
    for key, (table_name, env_name, kind) in WORK_KEYS.items():
        table = toml.get(table_name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"[{table_name}] in ballet.toml must be a table")
        if key in table:
            values[key] = coerce(f"[{table_name}] {key}", table[key], kind)
        if os.environ.get(env_name):
            values[key] = coerce(env_name, os.environ[env_name], kind)
    return WorkConfig(**values)


# Every setting a project may override, with its type: the planner's and work's.
PROJECT_SETTING_KINDS: dict[str, type] = {
    **{name: kind for name, (_, kind) in PLANNER_KEYS.items()},
    **{name: kind for name, (_, _, kind) in WORK_KEYS.items()},
}


@dataclass(frozen=True)
class LimitsConfig:
    """The abuse limits of docs/trust.md#limits: ``[limits]`` in ballet.toml, ``BALLET_LIMIT_<NAME>``."""

    login_failures: int = 5  # failed logins per username and per IP within the window ...
    login_window_seconds: int = 900  # ... after which even the right password is refused
    messages_per_minute: int = 20  # planner messages a user sends, on every surface
    running_turns_per_user: int = 3
    running_turns_per_project: int = 10
    steering_queued: int = 5  # steering messages waiting in one turn ...
    steering_chars: int = 32_768  # ... and their characters in all
    frames_per_second: int = 20  # WebSocket frames a connection sends ...
    frames_excess_seconds: int = 10  # ... and how long it may exceed that before it is closed
    mcp_requests_per_minute: int = 60  # MCP and question requests per token (docs/trust.md#limits)


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
class ModelPrice:
    """What one model's tokens cost, in USD per million tokens (``[prices."MODEL-ID"]``)."""

    input: Decimal
    output: Decimal
    cache_write: Decimal  # tokens written to the prompt cache (cache_creation_input_tokens)
    cache_read: Decimal  # tokens read from it (cache_read_input_tokens)


PRICE_KEYS: tuple[str, ...] = ("input", "output", "cache_write", "cache_read")


def _price(input: str, output: str, cache_write: str, cache_read: str) -> ModelPrice:
    return ModelPrice(Decimal(input), Decimal(output), Decimal(cache_write), Decimal(cache_read))


# Estimates from Anthropic's list prices (5-minute cache writes) for the models Ballet names;
# deployments adjust them in ballet.toml. A model without a price shows tokens, cost unknown.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    DEFAULT_MODEL: _price("3", "15", "3.75", "0.30"),
    "claude-sonnet-4-5": _price("3", "15", "3.75", "0.30"),
    "claude-haiku-4-5": _price("1", "5", "1.25", "0.10"),
    "claude-opus-4-5": _price("5", "25", "6.25", "0.50"),
}


def _usd(name: str, value: Any) -> Decimal:
    """A price: a finite, non-negative number (toml integer or float)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{name}: expected a number of USD per million tokens, got {value!r}")
    if value < 0:
        raise ConfigError(f"{name}: must not be negative, got {value!r}")
    return Decimal(str(value))


def _model_price(model: str, table: Any, default: ModelPrice | None) -> ModelPrice:
    where = f'[prices."{model}"]'
    if not isinstance(table, dict):
        raise ConfigError(f"{where} in ballet.toml must be a table of {', '.join(PRICE_KEYS)}")
    unknown = sorted(set(table) - set(PRICE_KEYS))
    if unknown:
        raise ConfigError(f"{where} has unknown keys: {', '.join(unknown)} (known: {', '.join(PRICE_KEYS)})")
    missing = [key for key in PRICE_KEYS if key not in table and default is None]
    if missing:
        raise ConfigError(f"{where} misses {', '.join(missing)} (USD per million tokens)")
    given = {key: _usd(f"{where} {key}", value) for key, value in table.items()}
    return ModelPrice(**given) if default is None else replace(default, **given)


def load_prices() -> dict[str, ModelPrice]:
    """The price table: the defaults, with ``[prices."MODEL-ID"]`` tables of ballet.toml over them
    (a table for a model with a default may give only the prices it changes)."""
    table = _read_toml().get("prices", {})
    if not isinstance(table, dict):
        raise ConfigError('[prices] in ballet.toml must hold tables like [prices."claude-sonnet-5-5"]')
    prices = dict(DEFAULT_PRICES)
    for model, entry in table.items():
        if not model.strip():
            raise ConfigError("[prices] has a table without a model id")
        prices[model] = _model_price(model, entry, DEFAULT_PRICES.get(model))
    return prices


@dataclass(frozen=True)
class ServerConfig:
    """Process-level settings. Secrets and URLs that may carry passwords stay out of its
    ``repr``: Django's error page prints settings it does not recognise as secret by name."""

    database_url: str | None = field(repr=False)
    redis_url: str | None = field(repr=False)
    sqlite_path: str | None
    secret_key: str | None = field(repr=False)
    debug: bool | None
    allowed_hosts: list[str]
    anthropic_api_key: str | None = field(repr=False)
    anthropic_base_url: str | None
    search_embedding_backend: str | None = None  # dotted path of a tracker.search.embeddings backend
    credential_key: str | None = field(default=None, repr=False)
    credential_key_fallbacks: tuple[str, ...] = field(default=(), repr=False)
    static_root: str | None = None  # where collectstatic writes the static files WhiteNoise serves
    metrics_dir: str | None = None  # the directory in which every process of the host counts its metrics
    database_pool_size: int = 20  # PostgreSQL connections one process holds at most (production mode)

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
        credential_key=os.environ.get("BALLET_CREDENTIAL_KEY") or None,
        credential_key_fallbacks=tuple(
            key.strip()
            for key in os.environ.get("BALLET_CREDENTIAL_KEY_FALLBACKS", "").split(",")
            if key.strip()
        ),
        static_root=os.environ.get("BALLET_STATIC_ROOT") or None,
        # prometheus_client's own name for it is honoured too: with it set, the library counts in files.
        metrics_dir=os.environ.get("BALLET_METRICS_DIR")
        or os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        or None,
        database_pool_size=_pool_size(os.environ.get("BALLET_DATABASE_POOL_SIZE") or "20"),
    )


# The planner's database threads (planner/live/bridge.py) keep a connection each while turns run.
MIN_POOL_SIZE = 10


def _pool_size(value: str) -> int:
    size: int = coerce("BALLET_DATABASE_POOL_SIZE", value, int)
    if size < MIN_POOL_SIZE:
        raise ConfigError(f"BALLET_DATABASE_POOL_SIZE: must be at least {MIN_POOL_SIZE}, got {size}")
    return size


def share_metrics(server: ServerConfig) -> Path | None:
    """With ``BALLET_METRICS_DIR`` set, turn on prometheus_client's multiprocess mode there.

    The library reads ``PROMETHEUS_MULTIPROC_DIR`` once, when it is first imported, to choose
    how every metric stores its values; the settings call this before anything imports it
    (``ballet.apps`` refuses to start if something did). The directory is created.
    """
    if not server.metrics_dir:
        return None
    path = Path(server.metrics_dir).resolve()
    path.mkdir(parents=True, exist_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    return path


@dataclass(frozen=True)
class Keys:
    """The keys of docs/trust.md#secrets: Django's ``SECRET_KEY`` and the credential key (with fallbacks)."""

    secret_key: str = field(repr=False)
    credential_key: str = field(repr=False)
    credential_key_fallbacks: tuple[str, ...] = field(default=(), repr=False)


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
