"""Every setting of the README's configuration table: from the environment and from ballet.toml
where the table says so, the environment winning, the default without either, a project's own
value over both, and each kind of bad value refused with a message naming the setting."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ballet.env import (
    DEFAULT_MODEL,
    DEFAULT_TITLE_MODEL,
    ENVIRONMENT,
    PROJECT_SETTINGS,
    BalletSettings,
    ConfigError,
    load_planner_config,
    load_settings,
    load_work_config,
)
from tracker.errors import ValidationError
from tracker.selectors import project_planner_config, project_work_config
from tracker.services.activity import Actor
from tracker.services.projects import project_update

README = Path(__file__).resolve().parent.parent / "README.md"


@dataclass(frozen=True)
class Row:
    """One setting: where it lives in the settings (``planner.max_rounds``), its variable (None: the
    file only), a text for the variable and what it gives, a TOML value (None: the environment
    only) and what it gives; a project may set the TOML value too where ``per_project``."""

    key: str
    variable: str | None
    default: Any
    text: str = ""
    value: Any = None
    toml: str | None = None
    toml_value: Any = None
    per_project: bool = False


def planner(
    key: str, variable: str | None, default: Any, text: str, value: Any, toml: str, toml_value: Any
) -> Row:
    return Row(f"planner.{key}", variable, default, text, value, toml, toml_value, per_project=True)


def limit(key: str, default: int) -> Row:
    return Row(f"limits.{key}", f"BALLET_LIMIT_{key.upper()}", default, " 7 ", 7, "8", 8)


def email(key: str, default: Any, text: str, toml: str) -> Row:
    """A text of ``[email]``: the variable's text and the file's value are what they give."""
    return Row(f"email.{key}", f"BALLET_EMAIL_{key.upper()}", default, text, text, toml, toml.strip('"'))


def server(key: str, variable: str, text: str, value: Any = None, default: Any = None) -> Row:
    return Row(f"server.{key}", variable, default, text, text if value is None else value)


ROWS = [
    planner(
        "model",
        "BALLET_PLANNER_MODEL",
        DEFAULT_MODEL,
        " claude-env ",
        "claude-env",
        '"claude-file"',
        "claude-file",
    ),
    planner(
        "compaction_model",
        "BALLET_PLANNER_COMPACTION_MODEL",
        None,
        "claude-env",
        "claude-env",
        '"c-f"',
        "c-f",
    ),
    planner(
        "title_model",
        "BALLET_PLANNER_TITLE_MODEL",
        DEFAULT_TITLE_MODEL,
        "claude-env",
        "claude-env",
        '"t"',
        "t",
    ),
    planner("compact_at_tokens", "BALLET_PLANNER_COMPACT_AT_TOKENS", 100_000, "5000", 5000, "6000", 6000),
    planner("max_rounds", "BALLET_PLANNER_MAX_ROUNDS", 25, "3", 3, "7", 7),
    planner("max_output_tokens", "BALLET_PLANNER_MAX_OUTPUT_TOKENS", 8192, "1024", 1024, "2048", 2048),
    planner("max_subchats", "BALLET_PLANNER_MAX_SUBCHATS", 3, "2", 2, "5", 5),
    planner("daily_token_budget", "BALLET_PLANNER_DAILY_TOKEN_BUDGET", None, "1000", 1000, "2000", 2000),
    planner("provider", "BALLET_PLANNER_PROVIDER", None, "Demo", "demo", '"anthropic"', "anthropic"),
    planner("four_eyes", None, False, "", None, "true", True),
    planner("skill", None, None, "", None, '" planner "', "planner"),
    planner(
        "approve_tools",
        None,
        (),
        "",
        None,
        '["propose_changeset", " create_knowledge", "propose_changeset"]',
        ("propose_changeset", "create_knowledge"),
    ),
    Row("work.claim_minutes", "BALLET_WORK_CLAIM_MINUTES", 30, "45", 45, "60", 60, per_project=True),
    Row(
        "questions.reuse_threshold",
        "BALLET_QUESTIONS_REUSE_THRESHOLD",
        0.90,
        "0.8",
        0.8,
        "1",
        1.0,
        per_project=True,
    ),
    Row(
        "questions.reuse_judge_floor",
        "BALLET_QUESTIONS_REUSE_JUDGE_FLOOR",
        0.45,
        "0.6",
        0.6,
        "1",
        1.0,
        per_project=True,
    ),
    Row("tracker.direct_edits", None, "all", toml='"state"', toml_value="state", per_project=True),
    Row(
        "tracker.labels",
        None,
        ("bug", "feature", "chore", "docs", "security"),
        toml='["UI ", "ui", "backend"]',
        toml_value=("ui", "backend"),
        per_project=True,
    ),
    Row("webhooks.allow_private", "BALLET_WEBHOOKS_ALLOW_PRIVATE", False, "1", True, "true", True),
    Row("repositories.path", "BALLET_REPOSITORIES_PATH", None, "/srv/mirrors", "/srv/mirrors", '"/m"', "/m"),
    Row(
        "repositories.local_roots",
        "BALLET_REPOSITORIES_LOCAL_ROOTS",
        (),
        "/srv/git, /home/git",
        ("/srv/git", "/home/git"),
        '["/srv/code"]',
        ("/srv/code",),
    ),
    Row("repositories.fetch_minutes", "BALLET_REPOSITORIES_FETCH_MINUTES", 15, "5", 5, "30", 30),
    Row("repositories.max_mb", "BALLET_REPOSITORIES_MAX_MB", 500, "50", 50, "1000", 1000),
    Row("repositories.timeout_seconds", "BALLET_REPOSITORIES_TIMEOUT_SECONDS", 120, "30", 30, "60", 60),
    Row(
        "repositories.deny",
        "BALLET_REPOSITORIES_DENY",
        (".env*", "*.pem", "*.key", "id_*", "*secret*", "*credential*"),
        "*.pem, .env*",
        ("*.pem", ".env*"),
        '["*.p12"]',
        ("*.p12",),
    ),
    Row(
        "mcp.allowed_origins",
        "BALLET_MCP_ALLOWED_ORIGINS",
        (),
        "https://A.example.com, http://localhost:5173/",
        ("https://a.example.com", "http://localhost:5173"),
        '["https://tools.example.com"]',
        ("https://tools.example.com",),
    ),
    email("backend", "console", "file", '"smtp"'),
    email("file_path", None, "/tmp/ballet-mail", '"/var/mail/ballet"'),
    email("host", "localhost", "smtp.example.com", '"mx.example.com"'),
    Row("email.port", "BALLET_EMAIL_PORT", 25, "587", 587, "465", 465),
    email("user", None, "ballet", '"bot"'),
    email("password", None, "pw-env", '"pw-file"'),
    Row("email.tls", "BALLET_EMAIL_TLS", False, "1", True, "true", True),
    email("from", "Ballet <ballet@localhost>", "Team <team@example.com>", '"B <b@example.com>"'),
    email("base_url", "http://127.0.0.1:8000", "https://ballet.example.com", '"https://b.example.com"'),
    limit("messages_per_minute", 20),
    limit("running_turns_per_user", 3),
    limit("running_turns_per_project", 10),
    limit("steering_queued", 5),
    limit("steering_chars", 32_768),
    limit("frames_per_second", 20),
    limit("frames_excess_seconds", 10),
    limit("mcp_requests_per_minute", 60),
    limit("login_failures", 5),
    limit("login_window_seconds", 900),
    server("database_url", "DATABASE_URL", "postgres://ballet:pw@db.example/ballet"),
    server("redis_url", "REDIS_URL", "redis://cache.example:6379/0"),
    server("secret_key", "DJANGO_SECRET_KEY", "k" * 50),
    server("credential_key", "BALLET_CREDENTIAL_KEY", "a-fernet-key-checked-at-start"),
    server(
        "credential_key_fallbacks", "BALLET_CREDENTIAL_KEY_FALLBACKS", "old-a, old-b,", ("old-a", "old-b"), ()
    ),
    server(
        "allowed_hosts",
        "DJANGO_ALLOWED_HOSTS",
        "ballet.example.com, , b.example",
        ["ballet.example.com", "b.example"],
        [],
    ),
    server("debug", "DJANGO_DEBUG", "1", True),
    server("bridge_check", "BALLET_BRIDGE_CHECK", "1", True),
    server("anthropic_api_key", "ANTHROPIC_API_KEY", "sk-ant-env"),
    server("anthropic_base_url", "ANTHROPIC_BASE_URL", "http://127.0.0.1:9999"),
    server("sqlite_path", "BALLET_SQLITE_PATH", "/tmp/elsewhere/ballet.sqlite3"),
    server("database_pool_size", "BALLET_DATABASE_POOL_SIZE", "40", 40, 20),
    server("static_root", "BALLET_STATIC_ROOT", "/srv/static"),
    server("metrics_dir", "BALLET_METRICS_DIR", "/run/ballet-metrics"),
    server("search_embedding_backend", "BALLET_SEARCH_EMBEDDING_BACKEND", "myco.embeddings.Hosted"),
]
FROM_ENVIRONMENT = [row for row in ROWS if row.variable]
FROM_FILE = [row for row in ROWS if row.toml is not None]
PER_PROJECT = [row for row in ROWS if row.per_project]


def ids(row: Row) -> str:
    return row.key


@pytest.fixture
def clean(monkeypatch):
    """No variable of the table set, no ballet.toml: what the test sets is all there is."""
    for names in [*ENVIRONMENT.values(), ("BALLET_CONFIG",)]:
        for name in names:
            monkeypatch.delenv(name, raising=False)
    return monkeypatch


def toml_file(monkeypatch, tmp_path: Path, text: str) -> None:
    path = tmp_path / "ballet.toml"
    path.write_text(text)
    monkeypatch.setenv("BALLET_CONFIG", str(path))


def setting(loaded: BalletSettings, key: str) -> Any:
    section, name = key.split(".")
    return getattr(getattr(loaded, section), "from_" if name == "from" else name)  # a Python keyword


def file_text(row: Row, value: str | None = None) -> str:
    section, name = row.key.split(".")
    return f"[{section}]\n{name} = {row.toml if value is None else value}\n"


def readme_table() -> list[list[str]]:
    text = README.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| environment variable")
    ]


def test_the_readme_documents_exactly_the_variables_and_keys_read():
    rows = readme_table()
    variables = {name for row in rows for name in re.findall(r"`([A-Z][A-Z_]+)`", row[0])}
    read = {name for names in ENVIRONMENT.values() for name in names}
    assert variables == read | {"BALLET_CONFIG", "DJANGO_SETTINGS_MODULE"}  # the file's path, Django's own
    keys = {f"{table}.{key}" for row in rows for table, key in re.findall(r"`\[(\w+)\] (\w+)`", row[1])}
    assert keys == {row.key for row in FROM_FILE}
    starred = {re.findall(r"`\[\w+\] (\w+)`", row[1])[0] for row in rows if row[-1].endswith("*")}
    assert starred == set(PROJECT_SETTINGS) == {row.key.split(".")[1] for row in PER_PROJECT}
    assert {row.variable for row in FROM_ENVIRONMENT} | {"PROMETHEUS_MULTIPROC_DIR"} == read


@pytest.mark.parametrize("row", ROWS, ids=ids)
def test_the_default_without_variable_or_file(clean, row):
    assert setting(load_settings(), row.key) == row.default


@pytest.mark.parametrize("row", FROM_ENVIRONMENT, ids=ids)
def test_the_variable_sets_it(clean, row):
    clean.setenv(row.variable, row.text)
    assert setting(load_settings(), row.key) == row.value


@pytest.mark.parametrize("row", FROM_FILE, ids=ids)
def test_ballet_toml_sets_it(clean, tmp_path, row):
    toml_file(clean, tmp_path, file_text(row))
    assert setting(load_settings(), row.key) == row.toml_value


@pytest.mark.parametrize("row", [row for row in FROM_FILE if row.variable], ids=ids)
def test_the_variable_wins_over_the_file_and_an_empty_one_is_unset(clean, tmp_path, row):
    toml_file(clean, tmp_path, file_text(row))
    clean.setenv(row.variable, row.text)
    assert setting(load_settings(), row.key) == row.value
    clean.setenv(row.variable, "")
    assert setting(load_settings(), row.key) == row.toml_value


@pytest.mark.parametrize("row", [row for row in FROM_ENVIRONMENT if row.toml is None], ids=ids)
def test_an_environment_only_setting_is_refused_in_the_file(clean, tmp_path, row):
    section, name = row.key.split(".")
    toml_file(clean, tmp_path, f'{name} = "{row.text}"\n[{section}]\n{name} = "{row.text}"\n')
    unknown = ", ".join(sorted((name, section)))
    with pytest.raises(
        ConfigError, match=re.escape(f"ballet.toml has unknown tables or keys: {unknown} (known: ")
    ):
        load_settings()


@pytest.mark.parametrize("row", PER_PROJECT, ids=ids)
def test_a_project_value_wins_over_the_environment(clean, settings, project, owner, row):
    for other in PER_PROJECT:
        if other.variable:
            clean.setenv(other.variable, other.text)
    settings.BALLET_PLANNER, settings.BALLET_WORK = load_planner_config(), load_work_config()
    section, name = row.key.split(".")
    given = tomllib.loads(f"v = {row.toml}")["v"]  # what a PATCH sends: the TOML value as JSON
    project_update(actor=Actor(user=owner), project=project, settings={name: given})
    config = project_planner_config(project) if section == "planner" else project_work_config(project)
    assert getattr(config, name) == row.toml_value
    for other in PER_PROJECT:
        other_name = other.key.split(".")[1]
        if other is not row and other.variable and hasattr(config, other_name):
            assert getattr(config, other_name) == other.value  # the environment's


COUNTS = [
    row.variable for row in FROM_ENVIRONMENT if type(row.default) is int and not row.key.startswith("server.")
]
BAD_VARIABLES = [
    *[(variable, "many", "expected an integer, got 'many'") for variable in COUNTS],
    *[(variable, "0", "must be positive, got 0") for variable in COUNTS],
    *[(variable, "-3", "must be positive, got -3") for variable in COUNTS],
    ("BALLET_PLANNER_MAX_ROUNDS", "2.5", "expected an integer, got '2.5'"),
    ("BALLET_PLANNER_DAILY_TOKEN_BUDGET", "none", "expected an integer, got 'none'"),
    ("BALLET_PLANNER_PROVIDER", "openai", "expected anthropic or demo, got 'openai'"),
    ("BALLET_QUESTIONS_REUSE_THRESHOLD", "high", "expected a number, got 'high'"),
    ("BALLET_QUESTIONS_REUSE_THRESHOLD", "0", "must be positive, got 0"),
    ("BALLET_QUESTIONS_REUSE_THRESHOLD", "1.5", "must be at most 1, got 1.5"),
    ("DJANGO_DEBUG", "maybe", "expected a boolean, got 'maybe'"),
    ("BALLET_DATABASE_POOL_SIZE", "many", "expected an integer, got 'many'"),
    ("BALLET_DATABASE_POOL_SIZE", "8", "must be at least 10, got 8"),
    ("BALLET_DATABASE_POOL_SIZE", "-1", "must be at least 10, got -1"),
]


@pytest.mark.parametrize(("variable", "text", "message"), BAD_VARIABLES)
def test_a_bad_variable_is_refused_naming_it(clean, variable, text, message):
    clean.setenv(variable, text)
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert str(refused.value) == f"{variable}: {message}"


BAD_FILE_VALUES = [
    ("planner", "max_rounds", "true", "expected an integer, got True"),
    ("planner", "max_rounds", "0", "must be positive, got 0"),
    ("planner", "max_rounds", "2.5", "expected an integer, got 2.5"),
    ("planner", "model", '""', "must not be empty"),
    ("planner", "model", "5", "expected a string, got 5"),
    ("planner", "four_eyes", '"maybe"', "expected a boolean, got 'maybe'"),
    ("planner", "approve_tools", '"propose_changeset"', "expected a list of names, got 'propose_changeset'"),
    ("planner", "provider", '"openai"', "expected anthropic or demo, got 'openai'"),
    ("work", "claim_minutes", "-1", "must be positive, got -1"),
    ("questions", "reuse_threshold", "true", "expected a number, got True"),
    ("limits", "steering_chars", '"lots"', "expected an integer, got 'lots'"),
]


@pytest.mark.parametrize(("table", "key", "value", "message"), BAD_FILE_VALUES)
def test_a_bad_value_in_the_file_is_refused_naming_its_key(clean, tmp_path, table, key, value, message):
    toml_file(clean, tmp_path, f"[{table}]\n{key} = {value}\n")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert str(refused.value) == f"[{table}] {key}: {message}"


def test_an_empty_name_among_the_tools_is_refused_naming_its_place(clean, tmp_path):
    toml_file(clean, tmp_path, '[planner]\napprove_tools = ["propose_changeset", " "]\n')
    with pytest.raises(ConfigError, match=re.escape("[planner] approve_tools[1]: must not be empty")):
        load_settings()


@pytest.mark.parametrize("table", ["planner", "limits", "work", "questions"])
def test_an_unknown_key_in_a_table_is_refused(clean, tmp_path, table):
    toml_file(clean, tmp_path, f"[{table}]\nmax_roundz = 3\n")
    with pytest.raises(ConfigError, match=re.escape(f"[{table}] has unknown keys: max_roundz (known: ")):
        load_settings()


def test_an_unknown_table_and_a_table_that_is_not_one_are_refused(clean, tmp_path):
    toml_file(clean, tmp_path, "[planer]\nmodel = 'x'\n")
    with pytest.raises(ConfigError, match=re.escape("ballet.toml has unknown tables or keys: planer")):
        load_settings()
    toml_file(clean, tmp_path, "limits = 3\n")
    with pytest.raises(ConfigError, match=re.escape("[limits] in ballet.toml must be a table")):
        load_settings()


def test_a_config_path_naming_no_file_is_refused(clean, tmp_path):
    clean.setenv("BALLET_CONFIG", str(tmp_path / "balet.toml"))
    with pytest.raises(
        ConfigError, match=re.escape(f"cannot read BALLET_CONFIG={tmp_path / 'balet.toml'}: no such")
    ):
        load_settings()


def test_every_bad_setting_is_named_at_once(clean, tmp_path):
    toml_file(clean, tmp_path, "[planner]\nmax_rounds = 0\n[limits]\nsteering_queued = 0\n")
    clean.setenv("BALLET_PLANNER_MODEL", "claude-env")
    clean.setenv("BALLET_LIMIT_STEERING_QUEUED", "lots")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    assert str(refused.value).splitlines() == [
        "[planner] max_rounds: must be positive, got 0",
        "BALLET_LIMIT_STEERING_QUEUED: expected an integer, got 'lots'",  # the variable's value was used
    ]


@pytest.mark.parametrize(
    "variable",
    [
        "BALLET_PLANNER_FOUR_EYES",
        "BALLET_PLANNER__MAX_ROUNDS",
        "BALLET_LIMITS_MESSAGES_PER_MINUTE",
        "BALLET_PLANNER",
    ],
)
def test_only_the_documented_variables_are_read(clean, variable):
    clean.setenv(variable, '{"max_rounds": 3, "four_eyes": true}' if variable == "BALLET_PLANNER" else "3")
    assert load_settings() == BalletSettings.model_validate({})


def test_the_metrics_directory_is_also_read_under_prometheus_client_s_name(clean):
    clean.setenv("PROMETHEUS_MULTIPROC_DIR", "/run/prometheus")
    assert load_settings().server.metrics_dir == "/run/prometheus"
    clean.setenv("BALLET_METRICS_DIR", "/run/ballet")
    assert load_settings().server.metrics_dir == "/run/ballet"


def test_secrets_stay_out_of_the_settings_repr(clean):
    clean.setenv("DATABASE_URL", "postgres://ballet:db-password@db/ballet")
    clean.setenv("ANTHROPIC_API_KEY", "sk-ant-api-secret")
    clean.setenv("BALLET_CREDENTIAL_KEY_FALLBACKS", "old-credential-key")
    text = repr(load_settings())
    assert "ServerConfig(" in text
    assert not {"db-password", "sk-ant-api-secret", "old-credential-key"} & set(re.findall(r"[\w-]+", text))


BAD_PROJECT_VALUES = [
    ("max_rounds", 0, "max_rounds: must be positive, got 0"),
    ("max_rounds", True, "max_rounds: expected an integer, got True"),
    ("daily_token_budget", "lots", "daily_token_budget: expected an integer, got 'lots'"),
    ("model", "", "model: must not be empty"),
    ("four_eyes", "maybe", "four_eyes: expected a boolean, got 'maybe'"),
    ("approve_tools", ["propose_changeset", ""], "approve_tools[1]: must not be empty"),
    ("provider", "openai", "provider: expected anthropic or demo, got 'openai'"),
    ("claim_minutes", -5, "claim_minutes: must be positive, got -5"),
    ("reuse_threshold", 2, "reuse_threshold: must be at most 1, got 2"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD_PROJECT_VALUES)
def test_a_bad_project_value_is_refused_naming_it(project, owner, name, value, message):
    with pytest.raises(ValidationError) as refused:
        project_update(actor=Actor(user=owner), project=project, settings={name: value})
    assert refused.value.errors == {f"settings.{name}": [message]}
    project.refresh_from_db()
    assert project.settings == {}
