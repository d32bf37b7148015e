"""Configuration: ballet.toml, then the environment, then per-project overrides; both modes."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from kombu import Connection

from ballet.env import (
    DEFAULT_MODEL,
    ConfigError,
    ModelPrice,
    load_limits_config,
    load_planner_config,
    load_prices,
    load_server_config,
)
from tracker.errors import ValidationError
from tracker.selectors import project_planner_config
from tracker.services.activity import Actor
from tracker.services.projects import project_update
from tracker.trust.crypto import decrypt

ROOT = Path(__file__).resolve().parent.parent


def test_defaults_without_file_or_environment(monkeypatch):
    for name in ("BALLET_CONFIG", "BALLET_PLANNER_MODEL", "BALLET_PLANNER_MAX_ROUNDS"):
        monkeypatch.delenv(name, raising=False)
    config = load_planner_config()
    assert (config.compact_at_tokens, config.max_rounds, config.max_output_tokens) == (100_000, 25, 8192)
    assert config.model.startswith("claude-")
    assert config.compaction_model is None
    assert config.four_eyes is False


def test_file_then_environment(tmp_path, monkeypatch):
    path = tmp_path / "ballet.toml"
    path.write_text('[planner]\nmodel = "from-file"\nmax_rounds = 7\nfour_eyes = true\n')
    monkeypatch.setenv("BALLET_CONFIG", str(path))
    monkeypatch.setenv("BALLET_PLANNER_MODEL", "from-env")
    config = load_planner_config()
    assert (config.model, config.max_rounds, config.four_eyes) == ("from-env", 7, True)


def test_bad_values_name_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("BALLET_PLANNER_MAX_ROUNDS", "many")
    with pytest.raises(ConfigError, match="BALLET_PLANNER_MAX_ROUNDS"):
        load_planner_config()
    monkeypatch.delenv("BALLET_PLANNER_MAX_ROUNDS")
    path = tmp_path / "ballet.toml"
    path.write_text("[planner\n")
    monkeypatch.setenv("BALLET_CONFIG", str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        load_planner_config()


def test_the_planner_provider_from_file_then_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("BALLET_PLANNER_PROVIDER", raising=False)
    monkeypatch.delenv("BALLET_CONFIG", raising=False)
    assert load_planner_config().provider is None  # automatic: demo when no credential is set anywhere
    path = tmp_path / "ballet.toml"
    path.write_text('[planner]\nprovider = "demo"\n')
    monkeypatch.setenv("BALLET_CONFIG", str(path))
    assert load_planner_config().provider == "demo"
    monkeypatch.setenv("BALLET_PLANNER_PROVIDER", "Anthropic")
    assert load_planner_config().provider == "anthropic"


def test_a_bad_planner_provider_names_the_setting(tmp_path, monkeypatch, project, owner):
    monkeypatch.setenv("BALLET_PLANNER_PROVIDER", "openai")
    with pytest.raises(ConfigError, match="BALLET_PLANNER_PROVIDER: expected anthropic or demo"):
        load_planner_config()
    monkeypatch.delenv("BALLET_PLANNER_PROVIDER")
    path = tmp_path / "ballet.toml"
    path.write_text('[planner]\nprovider = "claude"\n')
    monkeypatch.setenv("BALLET_CONFIG", str(path))
    with pytest.raises(ConfigError, match=r"\[planner\] provider: expected anthropic or demo"):
        load_planner_config()
    with pytest.raises(ValidationError) as refused:
        project_update(actor=Actor(user=owner), project=project, settings={"provider": "gpt"})
    assert "expected anthropic or demo" in refused.value.errors["settings.provider"][0]


def test_limits_from_file_then_environment(tmp_path, monkeypatch):
    assert load_limits_config().messages_per_minute == 20
    path = tmp_path / "ballet.toml"
    path.write_text("[limits]\nmessages_per_minute = 7\nrunning_turns_per_user = 2\n")
    monkeypatch.setenv("BALLET_CONFIG", str(path))
    monkeypatch.setenv("BALLET_LIMIT_RUNNING_TURNS_PER_USER", "4")
    limits = load_limits_config()
    assert (limits.messages_per_minute, limits.running_turns_per_user, limits.login_failures) == (7, 4, 5)


def test_bad_limits_name_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("BALLET_LIMIT_LOGIN_FAILURES", "lots")
    with pytest.raises(ConfigError, match="BALLET_LIMIT_LOGIN_FAILURES"):
        load_limits_config()
    monkeypatch.delenv("BALLET_LIMIT_LOGIN_FAILURES")
    path = tmp_path / "ballet.toml"
    path.write_text("[limits]\nmesages_per_minute = 7\n")
    monkeypatch.setenv("BALLET_CONFIG", str(path))
    with pytest.raises(ConfigError, match="mesages_per_minute"):
        load_limits_config()


def test_the_search_embedding_backend_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("BALLET_SEARCH_EMBEDDING_BACKEND", raising=False)
    assert load_server_config().search_embedding_backend is None
    monkeypatch.setenv("BALLET_SEARCH_EMBEDDING_BACKEND", "myco.embeddings.HostedBackend")
    assert load_server_config().search_embedding_backend == "myco.embeddings.HostedBackend"


def toml_config(tmp_path, monkeypatch, text: str) -> None:
    path = tmp_path / "ballet.toml"
    path.write_text(text)
    monkeypatch.setenv("BALLET_CONFIG", str(path))


def test_the_default_model_has_a_price(monkeypatch):
    monkeypatch.delenv("BALLET_CONFIG", raising=False)
    prices = load_prices()
    assert prices[DEFAULT_MODEL] == ModelPrice(Decimal(3), Decimal(15), Decimal("3.75"), Decimal("0.30"))
    assert {"claude-haiku-4-5", "claude-opus-4-5", "claude-sonnet-4-5"} <= set(prices)


def test_prices_from_the_file_add_models_and_change_defaults(tmp_path, monkeypatch):
    toml_config(
        tmp_path,
        monkeypatch,
        '[prices."claude-sonnet-5-5"]\noutput = 12.5\n'
        '[prices."my-model"]\ninput = 1\noutput = 2\ncache_write = 0.5\ncache_read = 0\n',
    )
    prices = load_prices()
    sonnet = prices["claude-sonnet-5-5"]
    assert (sonnet.input, sonnet.output) == (Decimal(3), Decimal("12.5"))  # only output changed
    assert prices["my-model"] == ModelPrice(Decimal(1), Decimal(2), Decimal("0.5"), Decimal(0))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[prices."m"]\ninput = -1\noutput = 1\ncache_write = 1\ncache_read = 1\n',
            'prices."m"] input: must not',
        ),
        ('[prices."m"]\ninput = "3"\noutput = 1\ncache_write = 1\ncache_read = 1\n', "expected a number"),
        ('[prices."m"]\ninput = true\noutput = 1\ncache_write = 1\ncache_read = 1\n', "expected a number"),
        ('[prices."m"]\ninput = nan\noutput = 1\ncache_write = 1\ncache_read = 1\n', "a finite number"),
        ('[prices."m"]\ninput = 1\noutput = 1\n', "misses cache_write, cache_read"),
        ('[prices."claude-sonnet-5-5"]\ninptu = 1\n', "unknown keys: inptu"),
        ("prices = 3\n", "must hold tables"),
        ('[prices]\n"m" = 3\n', 'prices."m"] in ballet.toml must be a table'),
    ],
)
def test_bad_prices_are_refused_with_a_clear_message(tmp_path, monkeypatch, text, message):
    toml_config(tmp_path, monkeypatch, text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_prices()


def test_production_mode_needs_both_urls(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://x/y")
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert load_server_config().production is False
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    assert load_server_config().production is True


def test_the_database_pool_size_comes_from_the_environment_and_leaves_room_for_requests(monkeypatch):
    monkeypatch.delenv("BALLET_DATABASE_POOL_SIZE", raising=False)
    assert load_server_config().database_pool_size == 20
    monkeypatch.setenv("BALLET_DATABASE_POOL_SIZE", "40")
    assert load_server_config().database_pool_size == 40
    monkeypatch.setenv("BALLET_DATABASE_POOL_SIZE", "8")
    with pytest.raises(ConfigError, match="BALLET_DATABASE_POOL_SIZE: must be at least 10, got 8"):
        load_server_config()


def test_project_overrides_win(project, owner):
    project_update(
        actor=Actor(user=owner), project=project, settings={"model": "claude-x", "max_rounds": "3"}
    )
    config = project_planner_config(project)
    assert (config.model, config.max_rounds) == ("claude-x", 3)
    assert config.compact_at_tokens == 100_000


def test_unknown_project_setting_is_refused(project, owner):
    with pytest.raises(ValidationError) as info:
        project_update(actor=Actor(user=owner), project=project, settings={"colour": "red", "max_rounds": 0})
    assert set(info.value.errors) == {"settings.colour", "settings.max_rounds"}


def test_credential_is_stored_encrypted(project, owner):
    project_update(actor=Actor(user=owner), project=project, credential="sk-ant-secret")
    project.refresh_from_db()
    assert "sk-ant-secret" not in project.credential_encrypted
    assert decrypt(project.credential_encrypted) == "sk-ant-secret"
    project_update(actor=Actor(user=owner), project=project, credential="")
    project.refresh_from_db()
    assert project.has_credential is False


def test_a_rotated_credential_key_still_reads_credentials(project, owner, settings):
    key_a, key_b = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.BALLET_CREDENTIAL_KEYS = [key_a]
    project_update(actor=Actor(user=owner), project=project, credential="sk-ant-under-a")
    project.refresh_from_db()
    settings.BALLET_CREDENTIAL_KEYS = [key_b]
    assert decrypt(project.credential_encrypted) is None
    settings.BALLET_CREDENTIAL_KEYS = [key_b, key_a]  # BALLET_CREDENTIAL_KEY=B, FALLBACKS=A
    assert decrypt(project.credential_encrypted) == "sk-ant-under-a"


def test_the_credential_key_is_not_derived_from_the_secret_key(project, owner, settings):
    project_update(actor=Actor(user=owner), project=project, credential="sk-ant-secret")
    project.refresh_from_db()
    settings.SECRET_KEY = "another-secret-key-entirely"
    assert decrypt(project.credential_encrypted) == "sk-ant-secret"


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _production_env(tmp_path: Path) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "ballet.settings.production",
        "DJANGO_SECRET_KEY": "a-long-random-production-secret-" + "x" * 40,
        "BALLET_CREDENTIAL_KEY": "Qk9JT3hxZ0N2a2JmS2dzVnB0d0VhQ3ZVd3pQbXJ4aG0=",
        "DJANGO_ALLOWED_HOSTS": "ballet.example.com",
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/postgres",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "BALLET_METRICS_DIR": str(tmp_path / "metrics"),
    }


def test_production_settings_pass_check_deploy(tmp_path):
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=_production_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_database_url_s_connection_options_are_kept_beside_ballet_s_own(tmp_path):
    url = "postgres://postgres@127.0.0.1:5432/postgres"
    query = "?sslmode=disable&application_name=ballet-web&options=-c%20statement_timeout%3D5000"
    show = (
        "import json; from django.conf import settings; "
        "print(json.dumps(settings.DATABASES['default']['OPTIONS']))"
    )
    result = _manage("shell", "-c", show, env={**_production_env(tmp_path), "DATABASE_URL": url + query})
    assert result.returncode == 0, result.stderr
    options = json.loads(result.stdout.splitlines()[-1])
    assert options["sslmode"] == "disable"
    assert options["application_name"] == "ballet-web"
    assert options["options"] == "-c statement_timeout=5000 -c plan_cache_mode=force_generic_plan"
    assert options["pool"]["max_size"] > 1
    assert options["prepare_threshold"] == 1_000_000
    plain = _manage("shell", "-c", show, env={**_production_env(tmp_path), "DATABASE_URL": url})
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout.splitlines()[-1])["options"] == "-c plan_cache_mode=force_generic_plan"


def test_check_deploy_warns_when_the_processes_do_not_share_their_metrics(tmp_path):
    env = {**_production_env(tmp_path), "BALLET_METRICS_DIR": ""}
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode != 0
    assert "(ballet.W001) BALLET_METRICS_DIR is not set" in result.stderr


def test_production_settings_refuse_a_missing_secret_key():
    env = {"DJANGO_SETTINGS_MODULE": "ballet.settings.production", "DJANGO_SECRET_KEY": ""}
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in result.stderr


PRODUCTION_URLS = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/postgres",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
}


@pytest.mark.parametrize("module", ["ballet.settings.base", "ballet.settings.test"])
def test_production_mode_refuses_to_start_without_its_keys(module):
    env = {
        **PRODUCTION_URLS,
        "DJANGO_SETTINGS_MODULE": module,
        "DJANGO_SECRET_KEY": "",
        "BALLET_CREDENTIAL_KEY": "",
    }
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY and BALLET_CREDENTIAL_KEY must be set in production mode" in result.stderr
    keyed = {**env, "DJANGO_SECRET_KEY": "k" * 50, "BALLET_CREDENTIAL_KEY": Fernet.generate_key().decode()}
    assert _manage("check", env=keyed).returncode == 0


def test_a_bad_credential_key_names_the_setting():
    env = {"DJANGO_SETTINGS_MODULE": "ballet.settings.base", "BALLET_CREDENTIAL_KEY": "not-a-fernet-key"}
    result = _manage("check", env={**env, "DATABASE_URL": "", "REDIS_URL": ""})
    assert result.returncode != 0
    assert "BALLET_CREDENTIAL_KEY: expected a Fernet key" in result.stderr


def _embedded(tmp_path: Path) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "ballet.settings.base",
        "DATABASE_URL": "",
        "REDIS_URL": "",
        "DJANGO_SECRET_KEY": "",
        "BALLET_CREDENTIAL_KEY": "",
        "BALLET_SQLITE_PATH": str(tmp_path / "fresh" / "clone" / "ballet.sqlite3"),
    }


def _setting(name: str, env: dict[str, str]) -> str:
    result = _manage("shell", "-c", f"from django.conf import settings; print(settings.{name})", env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_migrate_on_a_fresh_clone_creates_the_database_folder(tmp_path):
    env = _embedded(tmp_path)
    result = _manage("migrate", "--noinput", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "fresh" / "clone" / "ballet.sqlite3").stat().st_size > 0


def test_the_embedded_mode_keeps_generated_keys_beside_its_database(tmp_path):
    env = _embedded(tmp_path)
    first = _setting("SECRET_KEY", env), _setting("BALLET_CREDENTIAL_KEYS", env)
    folder = tmp_path / "fresh" / "clone"
    for name in ("secret_key", "credential_key"):
        assert (folder / name).stat().st_mode & 0o777 == 0o600
    assert (folder / "secret_key").read_text().strip() == first[0]
    assert len(first[0]) >= 50
    assert "django-insecure" not in first[0]
    assert (_setting("SECRET_KEY", env), _setting("BALLET_CREDENTIAL_KEYS", env)) == first
    other = _embedded(tmp_path / "elsewhere")
    assert _setting("SECRET_KEY", other) != first[0]


def test_debug_is_off_unless_asked_for(tmp_path):
    env = {**_embedded(tmp_path), "DJANGO_DEBUG": ""}
    assert _setting("DEBUG", env) == "False"
    assert _setting("DEBUG", {**env, "DJANGO_DEBUG": "1"}) == "True"


def test_the_embedded_broker_names_its_host_so_every_eager_task_runs_without_a_warning(caplog):
    """An eager task still takes a producer, whose connection describes itself; kombu warned
    "No hostname was supplied" for a bare ``memory://`` on each task of a first run."""
    caplog.set_level(logging.WARNING, logger="kombu")
    Connection(settings.CELERY_BROKER_URL).info()
    assert [record.getMessage() for record in caplog.records if record.name.startswith("kombu")] == []
