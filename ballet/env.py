"""Configuration loading: the only reader of ``os.environ`` and ``ballet.toml``.

One pydantic-settings model, :class:`BalletSettings`, holds every setting: its sections are the
tables of ``ballet.toml`` (path in ``BALLET_CONFIG``), read by pydantic-settings' TOML source, and
the environment variables named on the fields (``Env``) take precedence over the file. Per-project
overrides live on the project and are validated by the same fields (:func:`project_setting`,
:func:`with_overrides`); their errors are worded by ``ballet.config_errors``. The keys of
docs/trust.md#secrets (generated, kept in ``db/``) are ``ballet.keys``'s, and the metrics directory
is set up by hand below.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)
from pydantic.dataclasses import dataclass
from pydantic_core import PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from ballet.config_errors import describe

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_TITLE_MODEL = "claude-haiku-4-5"  # a chat's title is a few words: the cheapest model will do
# Who answers in a chat: Claude, or the scripted demo planner that needs no key (README: Configuration).
PROVIDERS = ("anthropic", "demo")


class ConfigError(Exception):
    """The configuration file or a variable cannot be used."""


class Env:
    """The environment variables a field is read from, the first one set winning. A field without
    one is read from ``ballet.toml`` (and the project) only."""

    def __init__(self, *names: str) -> None:
        self.names = names


def _refuse(*kinds: type, expected: str) -> BeforeValidator:
    """Refuse values pydantic's lax mode would convert: TOML's ``true`` is not the integer 1."""

    def check(value: Any) -> Any:
        if isinstance(value, kinds):
            raise PydanticCustomError(
                "ballet", "expected {expected}, got {value}", {"expected": expected, "value": repr(value)}
            )
        return value

    return BeforeValidator(check)


def _blank_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _comma_separated(value: Any) -> Any:
    return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value


def _provider(value: str | None) -> str | None:
    if value is not None and value.lower() not in PROVIDERS:
        raise PydanticCustomError("ballet", "expected anthropic or demo, got {value}", {"value": repr(value)})
    return value and value.lower()


Count = Annotated[int, _refuse(bool, expected="an integer"), Field(gt=0)]
Fraction = Annotated[float, _refuse(bool, expected="a number"), Field(gt=0, le=1)]  # a similarity threshold
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
OptionalText = Annotated[Text | None, BeforeValidator(_blank_is_none)]  # empty: none
Names = Annotated[tuple[Text, ...], AfterValidator(lambda names: tuple(dict.fromkeys(names)))]  # tool names
Usd = Annotated[Decimal, _refuse(bool, str, expected="a number"), Field(ge=0, allow_inf_nan=False)]
Provider = Annotated[OptionalText, AfterValidator(_provider)]

# Every table refuses keys it does not know: a typo silently ignored would be a setting silently lost.
SECTION = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=SECTION)
class PlannerConfig:
    """``[planner]``; a project overrides any of it."""

    model: Annotated[Text, Env("BALLET_PLANNER_MODEL")] = DEFAULT_MODEL
    compact_at_tokens: Annotated[Count, Env("BALLET_PLANNER_COMPACT_AT_TOKENS")] = 100_000
    max_rounds: Annotated[Count, Env("BALLET_PLANNER_MAX_ROUNDS")] = 25
    max_output_tokens: Annotated[Count, Env("BALLET_PLANNER_MAX_OUTPUT_TOKENS")] = 8192
    compaction_model: Annotated[OptionalText, Env("BALLET_PLANNER_COMPACTION_MODEL")] = None
    title_model: Annotated[Text, Env("BALLET_PLANNER_TITLE_MODEL")] = DEFAULT_TITLE_MODEL
    four_eyes: bool = False
    skill: OptionalText = None
    # Every token processed per project per UTC day, cached ones too.
    daily_token_budget: Annotated[Count | None, Env("BALLET_PLANNER_DAILY_TOKEN_BUDGET")] = None
    approve_tools: Names = ()  # tools whose calls wait for the human's approval (docs/domain.md)
    # Sub-chats one chat's planner runs at once (start_subchat, docs/domain.md#sub-chats).
    max_subchats: Annotated[Count, Env("BALLET_PLANNER_MAX_SUBCHATS")] = 3
    # None: automatic, Claude with a credential and the demo planner without one.
    provider: Annotated[Provider, Env("BALLET_PLANNER_PROVIDER")] = None


@dataclass(frozen=True, config=SECTION)
class WorkTable:
    """``[work]``."""

    claim_minutes: Annotated[Count, Env("BALLET_WORK_CLAIM_MINUTES")] = (
        30  # a claim's lease (docs/domain.md#work)
    )


@dataclass(frozen=True, config=SECTION)
class QuestionsTable:
    """``[questions]``."""

    # How alike (cosine of sentence embeddings) a question must be to an answered one to get its answer
    # back without a model call (docs/domain.md#agents-questions, docs/benchmarks.md#answer-reuse).
    # bench/reuse.py: no false reuse on the labelled set at 0.88 and up.
    reuse_threshold: Annotated[Fraction, Env("BALLET_QUESTIONS_REUSE_THRESHOLD")] = 0.90
    # Below reuse_threshold, answered questions at least this alike go to the project's title model,
    # which says whether one asks the same (Claude only; 1 turns the judge off). bench/reuse.py: 0.45
    # keeps 98 % of the labelled rewordings (78 % of the held-out half's) as candidates.
    reuse_judge_floor: Annotated[Fraction, Env("BALLET_QUESTIONS_REUSE_JUDGE_FLOOR")] = 0.45


DIRECT_EDITS = ("all", "state", "none")
Label = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9][a-z0-9 _.-]{0,29}$"),
    BeforeValidator(lambda value: value.strip().lower() if isinstance(value, str) else value),
]


@dataclass(frozen=True, config=SECTION)
class TrackerTable:
    """``[tracker]``."""

    # Edits on a ticket's page and PATCH: applied at once by their author (all), only state moves and
    # comments (state; other edits are proposed for review), or none (every edit is proposed).
    direct_edits: Literal["all", "state", "none"] = "all"
    # The labels a ticket may carry (lowercase, up to 30 characters each).
    labels: Annotated[tuple[Label, ...], AfterValidator(lambda names: tuple(dict.fromkeys(names)))] = (
        "bug",
        "feature",
        "chore",
        "docs",
        "security",
    )


@dataclass(frozen=True, config=SECTION)
class WorkConfig(QuestionsTable, WorkTable, TrackerTable):
    """Settings of work and questions a project may override, as it overrides the planner's."""


@dataclass(frozen=True, config=SECTION)
class WebhooksTable:
    """``[webhooks]`` (docs/events.md#webhooks)."""

    # Deliver to private, loopback and link-local addresses too (a receiver on this host or the LAN).
    allow_private: Annotated[bool, Env("BALLET_WEBHOOKS_ALLOW_PRIVATE")] = False


DEFAULT_DENY = (".env*", "*.pem", "*.key", "id_*", "*secret*", "*credential*")


@dataclass(frozen=True, config=SECTION)
class RepositoriesTable:
    """``[repositories]`` (SPEC § 16): the Git repositories linked to projects, mirrored by the worker."""

    # Where the bare mirrors live; none: ``repositories/`` beside the embedded database (``db/``).
    path: Annotated[OptionalText, Env("BALLET_REPOSITORIES_PATH")] = None
    # Folders of this host whose repositories owners may link by path; none: only URLs.
    local_roots: Annotated[
        tuple[Text, ...], BeforeValidator(_comma_separated), Env("BALLET_REPOSITORIES_LOCAL_ROOTS")
    ] = ()
    fetch_minutes: Annotated[Count, Env("BALLET_REPOSITORIES_FETCH_MINUTES")] = 15
    max_mb: Annotated[Count, Env("BALLET_REPOSITORIES_MAX_MB")] = 500  # a mirror's size cap
    timeout_seconds: Annotated[Count, Env("BALLET_REPOSITORIES_TIMEOUT_SECONDS")] = 120  # per git command
    # Paths (fnmatch patterns on each part) never shown to the planner, a client or a page.
    deny: Annotated[tuple[Text, ...], BeforeValidator(_comma_separated), Env("BALLET_REPOSITORIES_DENY")] = (
        DEFAULT_DENY
    )


def _origins(origins: tuple[str, ...]) -> tuple[str, ...]:
    """Origins as a browser sends them: ``scheme://host[:port]``, compared in lower case."""
    origins = tuple(origin.rstrip("/").lower() for origin in origins)
    for origin in origins:
        scheme, _, rest = origin.partition("://")
        if scheme not in ("http", "https") or not rest or any(c in rest for c in "/?#@ "):
            raise PydanticCustomError(
                "ballet",
                "expected an origin such as https://app.example.com, got {value}",
                {"value": repr(origin)},
            )
    return tuple(dict.fromkeys(origins))


@dataclass(frozen=True, config=SECTION)
class McpTable:
    """``[mcp]`` (docs/agents.md#mcp)."""

    # Browser origins besides Ballet's own that may call /mcp; a client that is no browser sends none.
    allowed_origins: Annotated[
        tuple[Text, ...],
        BeforeValidator(_comma_separated),
        AfterValidator(_origins),
        Env("BALLET_MCP_ALLOWED_ORIGINS"),
    ] = ()


EMAIL_BACKENDS = ("console", "smtp", "file")


@dataclass(frozen=True, config=SECTION)
class EmailTable:
    """``[email]`` (docs/events.md#e-mail): how Ballet sends its mail, through Django's backends."""

    backend: Annotated[Literal["console", "smtp", "file"], Env("BALLET_EMAIL_BACKEND")] = "console"
    file_path: Annotated[OptionalText, Env("BALLET_EMAIL_FILE_PATH")] = None  # the file backend's folder
    host: Annotated[Text, Env("BALLET_EMAIL_HOST")] = "localhost"
    port: Annotated[Count, Field(le=65535), Env("BALLET_EMAIL_PORT")] = 25
    user: Annotated[OptionalText, Env("BALLET_EMAIL_USER")] = None
    password: Annotated[OptionalText, Env("BALLET_EMAIL_PASSWORD")] = dataclasses.field(
        default=None, repr=False
    )
    tls: Annotated[bool, Env("BALLET_EMAIL_TLS")] = False
    from_: Annotated[Text, Field(alias="from"), Env("BALLET_EMAIL_FROM")] = "Ballet <ballet@localhost>"
    # The address pages are reached at, for the links in mail (no trailing slash).
    base_url: Annotated[Text, Env("BALLET_EMAIL_BASE_URL")] = "http://127.0.0.1:8000"


@dataclass(frozen=True, config=SECTION)
class LimitsConfig:
    """The abuse limits of docs/trust.md#limits: ``[limits]`` in ballet.toml, ``BALLET_LIMIT_<NAME>``."""

    # Failed logins per username and per IP within the window, after which even the right password is refused.
    login_failures: Annotated[Count, Env("BALLET_LIMIT_LOGIN_FAILURES")] = 5
    login_window_seconds: Annotated[Count, Env("BALLET_LIMIT_LOGIN_WINDOW_SECONDS")] = 900
    # Planner messages a user sends, on every surface.
    messages_per_minute: Annotated[Count, Env("BALLET_LIMIT_MESSAGES_PER_MINUTE")] = 20
    running_turns_per_user: Annotated[Count, Env("BALLET_LIMIT_RUNNING_TURNS_PER_USER")] = 3
    running_turns_per_project: Annotated[Count, Env("BALLET_LIMIT_RUNNING_TURNS_PER_PROJECT")] = 10
    # Steering messages waiting in one turn, and their characters in all.
    steering_queued: Annotated[Count, Env("BALLET_LIMIT_STEERING_QUEUED")] = 5
    steering_chars: Annotated[Count, Env("BALLET_LIMIT_STEERING_CHARS")] = 32_768
    # WebSocket frames a connection sends, and how long it may exceed that before it is closed.
    frames_per_second: Annotated[Count, Env("BALLET_LIMIT_FRAMES_PER_SECOND")] = 20
    frames_excess_seconds: Annotated[Count, Env("BALLET_LIMIT_FRAMES_EXCESS_SECONDS")] = 10
    # MCP and question requests per token (docs/trust.md#limits).
    mcp_requests_per_minute: Annotated[Count, Env("BALLET_LIMIT_MCP_REQUESTS_PER_MINUTE")] = 60


@dataclass(frozen=True, config=SECTION)
class ModelPrice:
    """What one model's tokens cost, in USD per million tokens (``[prices."MODEL-ID"]``)."""

    input: Usd
    output: Usd
    cache_write: Usd  # tokens written to the prompt cache (cache_creation_input_tokens)
    cache_read: Usd  # tokens read from it (cache_read_input_tokens)


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

# The planner's database threads (planner/ground/bridge.py) keep a connection each while turns run.
MIN_POOL_SIZE = 10


def _secret() -> Any:
    return dataclasses.field(default=None, repr=False)


@dataclass(frozen=True, config=SECTION)
class ServerConfig:
    """Process-level settings, from the environment only. Secrets and URLs that may carry passwords
    stay out of its ``repr``: Django's error page prints settings it does not recognise as secret."""

    database_url: Annotated[str | None, Env("DATABASE_URL")] = _secret()
    redis_url: Annotated[str | None, Env("REDIS_URL")] = _secret()
    sqlite_path: Annotated[str | None, Env("BALLET_SQLITE_PATH")] = None
    secret_key: Annotated[str | None, Env("DJANGO_SECRET_KEY")] = _secret()
    debug: Annotated[bool | None, Env("DJANGO_DEBUG")] = None
    # Check every result of the planner's database threads for models (planner/ground/bridge.py);
    # unset: with DJANGO_DEBUG.
    bridge_check: Annotated[bool | None, Env("BALLET_BRIDGE_CHECK")] = None
    allowed_hosts: Annotated[list[str], BeforeValidator(_comma_separated), Env("DJANGO_ALLOWED_HOSTS")] = (
        dataclasses.field(default_factory=list)
    )
    anthropic_api_key: Annotated[str | None, Env("ANTHROPIC_API_KEY")] = _secret()
    anthropic_base_url: Annotated[str | None, Env("ANTHROPIC_BASE_URL")] = None
    # The dotted path of a tracker.search.embeddings backend.
    search_embedding_backend: Annotated[str | None, Env("BALLET_SEARCH_EMBEDDING_BACKEND")] = None
    credential_key: Annotated[str | None, Env("BALLET_CREDENTIAL_KEY")] = _secret()
    credential_key_fallbacks: Annotated[
        tuple[str, ...], BeforeValidator(_comma_separated), Env("BALLET_CREDENTIAL_KEY_FALLBACKS")
    ] = dataclasses.field(default=(), repr=False)
    # Where collectstatic writes the static files WhiteNoise serves.
    static_root: Annotated[str | None, Env("BALLET_STATIC_ROOT")] = None
    # The directory in which every process of the host counts its metrics; prometheus_client's own
    # name for it is honoured too: with it set, the library counts in files.
    metrics_dir: Annotated[str | None, Env("BALLET_METRICS_DIR", "PROMETHEUS_MULTIPROC_DIR")] = None
    # PostgreSQL connections one process holds at most (production mode).
    database_pool_size: Annotated[
        int, _refuse(bool, expected="an integer"), Field(ge=MIN_POOL_SIZE), Env("BALLET_DATABASE_POOL_SIZE")
    ] = 20

    @property
    def production(self) -> bool:
        return bool(self.database_url and self.redis_url)


# The tables of ballet.toml; the server's settings come from the environment only.
FILE_TABLES = (
    "planner",
    "limits",
    "work",
    "questions",
    "tracker",
    "webhooks",
    "repositories",
    "email",
    "mcp",
    "prices",
)


class BalletSettings(BaseSettings):
    """Every setting: ``ballet.toml``'s tables, the environment over them, defaults under both."""

    model_config = SettingsConfigDict(extra="forbid")

    planner: PlannerConfig = PlannerConfig()
    limits: LimitsConfig = LimitsConfig()
    work: WorkTable = WorkTable()
    questions: QuestionsTable = QuestionsTable()
    tracker: TrackerTable = TrackerTable()
    webhooks: WebhooksTable = WebhooksTable()
    repositories: RepositoriesTable = RepositoriesTable()
    email: EmailTable = EmailTable()
    mcp: McpTable = McpTable()
    # A table for a model with a default price may give only the prices it changes.
    prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    server: ServerConfig = ServerConfig()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # First wins: the environment, then the file; no .env file, no secrets directory.
        return init_settings, EnvironmentSource(settings_cls), TomlFileSource(settings_cls)

    @field_validator("prices", mode="before")
    @classmethod
    def _over_default_prices(cls, given: Any) -> Any:
        """A model with a default price keeps the prices its table does not change."""
        if not isinstance(given, dict):
            return given
        over = {
            model: {**dataclasses.asdict(DEFAULT_PRICES[model]), **entry}
            for model, entry in given.items()
            if model in DEFAULT_PRICES and isinstance(entry, dict)
        }
        return {**DEFAULT_PRICES, **given, **over}


def _environment_names() -> dict[tuple[str, str], tuple[str, ...]]:
    """(section, field) → its variables, from the ``Env`` marks on the fields."""
    names: dict[tuple[str, str], tuple[str, ...]] = {}
    for section, info in BalletSettings.model_fields.items():
        for name, field_info in getattr(info.annotation, "__pydantic_fields__", {}).items():
            for mark in field_info.metadata:
                if isinstance(mark, Env):  # by the key the file uses ([email] from: a Python keyword)
                    names[section, field_info.alias or name] = mark.names
    return names


def _environment_value(names: tuple[str, ...]) -> tuple[str, str] | None:
    """The first of ``names`` set to something, with its value: an empty variable is unset."""
    return next(((name, os.environ[name]) for name in names if os.environ.get(name)), None)


class EnvironmentSource(PydanticBaseSettingsSource):
    """The variables the fields name, and no others: pydantic-settings' own source would also read
    ``BALLET_PLANNER__FOUR_EYES``-like names and JSON for whole tables, which Ballet never documented."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every variable at once

    def __call__(self) -> dict[str, Any]:
        values: dict[str, dict[str, str]] = {}
        for (section, name), names in ENVIRONMENT.items():
            found = _environment_value(names)
            if found:
                values.setdefault(section, {})[name] = found[1]
        return values


class TomlFileSource(TomlConfigSettingsSource):
    """``ballet.toml`` at ``BALLET_CONFIG``, its shape checked: a path naming no file is an error
    (pydantic-settings would read nothing), and so is a table Ballet does not read."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        path = os.environ.get("BALLET_CONFIG") or None
        if path and not Path(path).expanduser().is_file():
            raise ConfigError(f"cannot read BALLET_CONFIG={path}: no such file")
        try:
            super().__init__(settings_cls, toml_file=path)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read BALLET_CONFIG={path}: {exc}") from exc
        _check_shape(self.toml_data)


def _check_shape(data: dict[str, Any]) -> None:
    unknown = sorted(set(data) - set(FILE_TABLES))
    if unknown:
        raise ConfigError(
            f"ballet.toml has unknown tables or keys: {', '.join(unknown)} (known: {', '.join(FILE_TABLES)})"
        )
    if not isinstance(data.get("prices", {}), dict):
        raise ConfigError(f'[prices] in ballet.toml must hold tables like [prices."{DEFAULT_MODEL}"]')
    for table in FILE_TABLES:
        if not isinstance(data.get(table, {}), dict):
            raise ConfigError(f"[{table}] in ballet.toml must be a table")
    for model, entry in data.get("prices", {}).items():
        if not model.strip():
            raise ConfigError("[prices] has a table without a model id")
        if not isinstance(entry, dict):
            raise ConfigError(f'[prices."{model}"] in ballet.toml must be a table of {", ".join(PRICE_KEYS)}')


ENVIRONMENT = _environment_names()


def load_settings() -> BalletSettings:
    """Every setting, or :class:`ConfigError` naming each bad one as the user wrote it."""
    try:
        return BalletSettings()
    except ValidationError as exc:
        raise ConfigError(describe(exc, _setting_name, _table_keys)) from None


def _setting_name(loc: tuple[str | int, ...]) -> str:
    """A variable's name if the value came from the environment (which wins), else the file's key."""
    section, *rest = (str(part) for part in loc)
    if section == "prices":
        return f'[prices."{rest[0]}"] {" ".join(rest[1:])}'.strip()
    names = ENVIRONMENT.get((section, rest[0])) if rest else None
    found = names and _environment_value(names)
    head = found[0] if found else f"[{section}] {rest[0]}" if rest else f"[{section}]"
    return head + "".join(f"[{part}]" for part in rest[1:])


def _table_keys(loc: tuple[str | int, ...]) -> tuple[str, tuple[str, ...]]:
    if loc[0] == "prices":
        return f'[prices."{loc[1]}"]', PRICE_KEYS
    table = BalletSettings.model_fields[str(loc[0])].annotation
    return f"[{loc[0]}]", tuple(field.name for field in dataclasses.fields(table))  # type: ignore[arg-type]


def load_planner_config() -> PlannerConfig:
    """The planner defaults: ``ballet.toml``'s ``[planner]`` table, then the environment."""
    return load_settings().planner


def load_work_config() -> WorkConfig:
    """``[work]`` and ``[questions]`` of ``ballet.toml``, then the environment."""
    return work_config(load_settings())


def work_config(loaded: BalletSettings) -> WorkConfig:
    """One object for the two tables a project overrides alike."""
    return WorkConfig(
        **dataclasses.asdict(loaded.work),
        **dataclasses.asdict(loaded.questions),
        **dataclasses.asdict(loaded.tracker),
    )


def load_limits_config() -> LimitsConfig:
    """The limits: ``ballet.toml``'s ``[limits]`` table, then ``BALLET_LIMIT_*`` variables."""
    return load_settings().limits


def load_prices() -> dict[str, ModelPrice]:
    """The price table: the defaults, with ``[prices."MODEL-ID"]`` tables of ballet.toml over them."""
    return load_settings().prices


def load_server_config() -> ServerConfig:
    """Process-level settings read from the environment."""
    return load_settings().server


# Every setting a project may override: the planner's, work's and questions' (docs/domain.md).
PROJECT_SETTINGS: dict[str, type[PlannerConfig] | type[WorkConfig]] = {
    **{field.name: PlannerConfig for field in dataclasses.fields(PlannerConfig)},
    **{field.name: WorkConfig for field in dataclasses.fields(WorkConfig)},
}
Config = TypeVar("Config", bound=PlannerConfig | WorkConfig)


def with_overrides(config: Config, overrides: Mapping[str, Any], *, where: str = "") -> Config:
    """``config`` with the project's values of its own fields, validated by those fields; a bad one
    is a :class:`ConfigError` naming it (``where`` before the name)."""
    own = {field.name for field in dataclasses.fields(config)}
    try:
        return dataclasses.replace(
            config, **{name: value for name, value in overrides.items() if name in own}
        )
    except ValidationError as exc:
        raise ConfigError(
            describe(
                exc,
                lambda loc: where + "".join(f"[{p}]" if i else str(p) for i, p in enumerate(loc)),
                lambda loc: ("project settings", tuple(own)),
            )
        ) from None


def project_setting(name: str, value: Any) -> Any:
    """``value`` as the project setting ``name`` (one of :data:`PROJECT_SETTINGS`) holds it."""
    return getattr(with_overrides(PROJECT_SETTINGS[name](), {name: value}), name)


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
