"""Real Ballet server processes for end-to-end tests: daphne on 127.0.0.1, killable with signals.

Each test gets its own database: a SQLite file in the embedded mode, a fresh
PostgreSQL database (plus a Redis database number) in production mode. The
processes take the model from ``ANTHROPIC_BASE_URL``, a fake the test runs.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent.parent
PYTHON = sys.executable
DAPHNE = str(Path(sys.executable).parent / "daphne")
PASSWORD = "browser-test-password"


def production_mode() -> bool:
    return bool(os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Deployment:
    """A database (and channel layer) that one or more server processes share."""

    env: dict[str, str]
    cleanup_sql: str | None = None

    @classmethod
    def create(cls, tmp_path: Path, anthropic_base_url: str) -> Deployment:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_SETTINGS"))}
        env |= {
            "DJANGO_SETTINGS_MODULE": "ballet.settings.base",
            "ANTHROPIC_BASE_URL": anthropic_base_url,
            "ANTHROPIC_API_KEY": "sk-fake-for-tests",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
        }
        cleanup = None
        if production_mode():
            name = f"ballet_live_{uuid.uuid4().hex[:10]}"
            _psql(f'CREATE DATABASE "{name}"')
            base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
            env["DATABASE_URL"] = f"{base}/{name}"
            env["REDIS_URL"] = os.environ["REDIS_URL"].rsplit("/", 1)[0] + "/7"
            cleanup = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
            # Production mode refuses to start without its keys; the embedded mode makes its own.
            env["DJANGO_SECRET_KEY"] = env.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(50)
            env["BALLET_CREDENTIAL_KEY"] = env.get("BALLET_CREDENTIAL_KEY") or Fernet.generate_key().decode()
        else:
            env.pop("DATABASE_URL", None)
            env.pop("REDIS_URL", None)
            env["BALLET_SQLITE_PATH"] = str(tmp_path / "live.sqlite3")
        deployment = cls(env=env, cleanup_sql=cleanup)
        deployment.manage("migrate", "--noinput")
        deployment.manage("seed_demo", "--password", PASSWORD)
        return deployment

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        if result.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def drop(self) -> None:
        if self.cleanup_sql:
            _psql(self.cleanup_sql)


def _psql(sql: str) -> None:
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-c", sql], check=True, capture_output=True, timeout=60
    )


@dataclass
class Server:
    """One daphne process of a deployment."""

    deployment: Deployment
    port: int = field(default_factory=free_port)
    log: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        log = open(self.log or os.devnull, "ab")  # noqa: SIM115 - handed to the child process
        self.process = subprocess.Popen(
            [DAPHNE, "-b", "127.0.0.1", "-p", str(self.port), "ballet.asgi:application"],
            cwd=ROOT,
            env=self.deployment.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.process.returncode}; log: {self.log}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"daphne on port {self.port} did not become healthy")

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to clean up, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
