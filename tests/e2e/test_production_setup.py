"""The README's production setup followed as written, from an empty PostgreSQL database: its
exports, migrate, collectstatic, bootstrap, then two daphnes, a worker and beat started with its
commands; both daphnes healthy, compose.yaml's probes of them and of the worker pass, the
bootstrapped superuser signs in on one and makes an API key, the key reads the project on the
other, beat's sweeps reach the worker, and every process stops on SIGTERM.

The values the README leaves to the reader (``...``, hosts) are this machine's; the static files
go to a temporary folder instead of the checkout's ``staticfiles/``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
import yaml
from celery import Celery
from cryptography.fernet import Fernet

from tests.fakes.servers import ROOT, RedisServer, _psql, free_port, production_mode
from tests.production_steps import Command, production_steps

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not production_mode(), reason="the production setup needs PostgreSQL and Redis"),
]

BIN = Path(sys.executable).parent
PASSWORD = "a passphrase for the first superuser"
PROXIED = {"X-Forwarded-Proto": "https"}  # what the README's TLS proxy sets


@pytest.fixture
def database() -> Iterator[str]:
    name = f"ballet_live_{uuid.uuid4().hex[:10]}"
    _psql(f'CREATE DATABASE "{name}"')
    yield os.environ["DATABASE_URL"].rsplit("/", 1)[0] + f"/{name}"
    _psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


def environment(exported: dict[str, str], tmp_path: Path, database: str, redis_url: str) -> dict[str, str]:
    ours = {
        "DATABASE_URL": database,
        "REDIS_URL": redis_url,
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "BALLET_CREDENTIAL_KEY": Fernet.generate_key().decode(),
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "BALLET_METRICS_DIR": str(tmp_path / "metrics"),
    }
    assert set(exported) == {"DJANGO_SETTINGS_MODULE", *ours}, (
        "the README exports a variable this test does not set"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_", "BALLET_"))}
    return env | exported | ours | {"BALLET_STATIC_ROOT": str(tmp_path / "static"), "PYTHONUNBUFFERED": "1"}


def argv(command: Command, **replacing: str) -> list[str]:
    """The command's words, its program from this venv, and the values of options in ``replacing``."""
    words = [str(BIN / command.program), *command.argv[1:]]
    for option, value in replacing.items():
        words[words.index(option) + 1] = value
    return words


def run(command: Command, env: dict[str, str]) -> str:
    extra = {name: PASSWORD for name in command.env}  # DJANGO_SUPERUSER_PASSWORD=...
    done = subprocess.run(
        argv(command), cwd=ROOT, env=env | extra, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{command.argv}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def start(words: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            words, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, log.read_text(errors="replace")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
                assert json.loads(response.read())["status"] == "ok"
                return
        except OSError:
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)


def request(url: str, *, data: bytes | None = None, headers: dict[str, str]) -> tuple[int, Message, bytes]:
    """One request through the (pretended) TLS proxy; a redirect is an answer, not followed."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(
            urllib.request.Request(url, data=data, headers={**PROXIED, **headers}), timeout=10
        ) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as answer:
        return answer.code, answer.headers, answer.read()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def cookies(headers: Message) -> dict[str, str]:
    return dict(cookie.split(";", 1)[0].split("=", 1) for cookie in headers.get_all("Set-Cookie") or [])


def cookie_header(jar: dict[str, str]) -> str:
    return "; ".join(f"{name}={value}" for name, value in jar.items())


def sign_in(url: str, username: str, password: str) -> dict[str, str]:
    """The cookies of a session signed in through the login form (Secure ones: sent by hand)."""
    status, headers, page = request(f"{url}/accounts/login/", headers={})
    assert status == 200
    jar = cookies(headers)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.decode())
    assert token
    form = {"csrfmiddlewaretoken": token.group(1), "username": username, "password": password}
    status, headers, _ = request(
        f"{url}/accounts/login/",
        data=urllib.parse.urlencode(form).encode(),
        headers={"Cookie": cookie_header(jar), "Origin": f"https://{urllib.parse.urlsplit(url).netloc}"},
    )
    assert status == 302, status
    assert headers["Location"] == "/"
    return jar | cookies(headers)


def stop(process: subprocess.Popen[bytes]) -> int:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        return process.wait(timeout=20)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def test_the_readme_production_setup_serves_from_an_empty_database(tmp_path, database, redis_server):
    steps = production_steps()
    env = environment(steps.exported, tmp_path, database, redis_server.url)
    run(steps.named("python", "migrate"), env)
    run(steps.named("python", "collectstatic"), env)
    boot = run(steps.named("python", "bootstrap"), env)
    assert "project WEB (Website): created" in boot
    assert PASSWORD not in boot

    ports = [free_port(), free_port()]
    daphne = steps.named("daphne")
    processes = {
        f"daphne-{port}": start(
            argv(daphne, **{"-b": "127.0.0.1", "-p": str(port)}), env, tmp_path / f"{port}.log"
        )
        for port in ports
    }
    processes["worker"] = start(argv(steps.named("celery", "worker")), env, tmp_path / "worker.log")
    processes["beat"] = start(argv(steps.named("celery", "beat")), env, tmp_path / "beat.log")
    try:
        first, second = (f"http://127.0.0.1:{port}" for port in ports)
        for url, port in ((first, ports[0]), (second, ports[1])):
            wait_healthy(url, processes[f"daphne-{port}"], tmp_path / f"{port}.log")
        _the_compose_probes_pass(env, ports)
        _signs_in_and_uses_a_key(first, second)
        _sweeps_reach_the_worker(redis_server.url)
    finally:
        codes = {name: stop(process) for name, process in processes.items()}
    logs = {
        path.name: path.read_text(errors="replace")
        for path in tmp_path.glob("*.log")
        if path.name != "redis.log"
    }
    assert all(code in (0, -signal.SIGTERM) for code in codes.values()), (codes, logs)
    assert not [name for name, text in logs.items() if "Traceback" in text], logs


def _the_compose_probes_pass(env: dict[str, str], ports: list[int]) -> None:
    """compose.yaml's healthchecks, run here as Docker runs them in the containers: the image's
    /app is this checkout, its daphnes' port 8000 ours, the worker's host name this machine's."""
    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    daphne = services["daphne-1"]["healthcheck"]["test"][1:]
    worker = services["worker"]["healthcheck"]["test"][1].replace("$$HOSTNAME", socket.gethostname())
    for port in ports:
        words = [w.replace("/app/", f"{ROOT}/").replace(":8000/", f":{port}/") for w in daphne]
        done = subprocess.run(words, env=env, capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0, (words, done.stdout, done.stderr)
    deadline = time.monotonic() + 30  # the worker may not be listening yet
    while True:
        done = subprocess.run(
            worker, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode == 0:
            return
        assert time.monotonic() < deadline, (worker, done.stdout, done.stderr)
        time.sleep(1)


def _signs_in_and_uses_a_key(first: str, second: str) -> None:
    session = sign_in(first, "admin", PASSWORD)
    cookie = cookie_header(session)
    status, _, home = request(f"{first}/", headers={"Cookie": cookie})
    assert status == 200
    assert "WEB" in home.decode()
    status, _, created = request(
        f"{first}/api/v1/keys/",
        data=json.dumps({"name": "deploy check", "scopes": ["read"]}).encode(),
        headers={
            "Cookie": cookie,
            "Content-Type": "application/json",
            "X-CSRFToken": session["csrftoken"],
            "Origin": f"https://{urllib.parse.urlsplit(first).netloc}",
        },
    )
    assert status == 201, created
    key = json.loads(created)["key"]
    status, _, listed = request(f"{second}/api/v1/projects/", headers={"Authorization": f"Bearer {key}"})
    assert status == 200, listed
    assert [p["key"] for p in json.loads(listed)["results"]] == ["WEB"]


def _sweeps_reach_the_worker(redis_url: str) -> None:
    """Beat sends the dead-turn sweep every 5 s; the worker's own counters say it ran some."""
    control = Celery(broker=redis_url).control
    deadline = time.monotonic() + 30
    while True:
        stats = control.inspect(timeout=1).stats() or {}
        done = sum(worker.get("total", {}).get("planner.recover_dead_turns", 0) for worker in stats.values())
        if done:
            return
        assert time.monotonic() < deadline, stats
        time.sleep(0.5)
