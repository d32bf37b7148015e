"""Real Ballet server processes for end-to-end tests: daphne on 127.0.0.1, killable with signals.

Each test gets its own database: a SQLite file in the embedded mode, a fresh
PostgreSQL database (plus a Redis database number) in production mode. The
processes take the model from ``ANTHROPIC_BASE_URL``, a fake the test runs.

For faults in production mode a deployment can also run on a :class:`RedisServer`
of its own (killed and started again on the same port, flushed), with a Celery
:class:`Worker` and its embedded beat (the sweep that recovers dead turns), and
have its PostgreSQL connections dropped (:meth:`Deployment.drop_connections`).

As the README sets production up, a production-mode deployment collects its static
files (hashed names) and its processes count their metrics in one directory; each
deployment has its own of both.

A deployment is migrated, seeded and collected once per test process and configuration
(:class:`_Template`); every later one of the same configuration starts as a copy (a
PostgreSQL database made from a template, a copied SQLite file and static folder), which
is what a module's server costs most of its setup otherwise.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import redis
from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent.parent
PYTHON = sys.executable
DAPHNE = str(Path(sys.executable).parent / "daphne")
CELERY = str(Path(sys.executable).parent / "celery")
PASSWORD = "browser-test-password"
# Keys a deployment is made with, when the environment has none: one pair per test process, so
# that a deployment copied from a template reads the credential the template's seed encrypted.
_SECRET_KEY = secrets.token_urlsafe(50)
_CREDENTIAL_KEY = Fernet.generate_key().decode()
# What a deployment's own copy is made of, not its configuration (the template ignores them).
_PER_DEPLOYMENT = {"ANTHROPIC_BASE_URL", "BALLET_STATIC_ROOT", "BALLET_SQLITE_PATH", "BALLET_METRICS_DIR"}


@dataclass(frozen=True)
class _Template:
    """A migrated, seeded (and, in production mode, collected) deployment to copy: a PostgreSQL
    template database or a SQLite file, and the static folder."""

    database: str | None
    sqlite: Path | None
    static: Path


_templates: dict[tuple[str, ...], _Template] = {}


def _template_key(env: Mapping[str, str], root: Path) -> tuple[str, ...]:
    """What decides a deployment's migrated and seeded state: the code and its configuration."""
    names = sorted(
        name
        for name in env
        if name.startswith(("BALLET_", "DJANGO_", "ANTHROPIC_", "REDIS_")) and name not in _PER_DEPLOYMENT
    )
    return (str(root), str(production_mode()), *(f"{name}={env[name]}" for name in names))


def _drop_templates() -> None:
    for template in _templates.values():
        if template.database:
            with contextlib.suppress(Exception):
                _psql(f'DROP DATABASE IF EXISTS "{template.database}" WITH (FORCE)')


atexit.register(_drop_templates)


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
    database: str | None = None  # the PostgreSQL database's name (production mode)
    root: Path = ROOT  # the checkout whose code runs (a benchmark may run another commit's)

    @classmethod
    def create(
        cls,
        tmp_path: Path,
        anthropic_base_url: str,
        *,
        redis_url: str | None = None,
        extra_env: Mapping[str, str] | None = None,
        unset: tuple[str, ...] = (),
        root: Path = ROOT,
    ) -> Deployment:
        """A migrated, seeded deployment; ``redis_url`` (production mode) puts its channel layer,
        cache, presence and Celery broker on that Redis instead of a database of the shared one."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_SETTINGS"))}
        env |= {
            "DJANGO_SETTINGS_MODULE": "ballet.settings.base",
            "ANTHROPIC_BASE_URL": anthropic_base_url,
            "ANTHROPIC_API_KEY": "sk-fake-for-tests",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
        }
        # The servers a test starts check what crosses to the event loop, as the suite does (pytest
        # sets PYTEST_VERSION); a benchmark's run as deployed.
        if "PYTEST_VERSION" in os.environ:
            env["BALLET_BRIDGE_CHECK"] = "1"
        # Never the repository's own staticfiles/: each deployment collects, or not, its own.
        env["BALLET_STATIC_ROOT"] = str(tmp_path / "static")
        cleanup = name = None
        if production_mode():
            name = f"ballet_live_{uuid.uuid4().hex[:10]}"
            _psql(f'CREATE DATABASE "{name}"')
            base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
            env["DATABASE_URL"] = f"{base}/{name}"
            env["REDIS_URL"] = redis_url or os.environ["REDIS_URL"].rsplit("/", 1)[0] + "/7"
            cleanup = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
            # Production mode refuses to start without its keys; the embedded mode makes its own.
            env["DJANGO_SECRET_KEY"] = env.get("DJANGO_SECRET_KEY") or _SECRET_KEY
            env["BALLET_CREDENTIAL_KEY"] = env.get("BALLET_CREDENTIAL_KEY") or _CREDENTIAL_KEY
            # As the README sets production up: the processes count in one directory of the host.
            env["BALLET_METRICS_DIR"] = str(tmp_path / "metrics")
        else:
            env.pop("DATABASE_URL", None)
            env.pop("REDIS_URL", None)
            env["BALLET_SQLITE_PATH"] = str(tmp_path / "live.sqlite3")
        env |= dict(extra_env or {})
        for unset_name in unset:
            env.pop(unset_name, None)
        deployment = cls(env=env, cleanup_sql=cleanup, database=name, root=root)
        key = _template_key(env, root)
        template = _templates.get(key)
        if template is None:
            deployment._make()
            made = deployment._template()
            if made is not None:
                _templates[key] = made
        else:
            deployment._copy(template)
        return deployment

    def _make(self) -> None:
        if production_mode():
            # Production mode links hashed names from the manifest (ballet/static.py).
            self.manage("collectstatic", "--noinput")
        self.manage("migrate", "--noinput")
        self.manage("seed_demo", "--password", PASSWORD)

    def _template(self) -> _Template | None:
        """This deployment, as made and before any process serves it, kept to copy (None when
        nothing was made: a test that stubs :meth:`manage`)."""
        home = Path(tempfile.mkdtemp(prefix="ballet-template-"))
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        static = Path(self.env["BALLET_STATIC_ROOT"])
        if static.exists():
            shutil.copytree(static, home / "static")
        if self.database:
            database = f"ballet_template_{uuid.uuid4().hex[:10]}"
            _psql(f'CREATE DATABASE "{database}" TEMPLATE "{self.database}"')
            return _Template(database=database, sqlite=None, static=home / "static")
        if not Path(self.env["BALLET_SQLITE_PATH"]).exists():
            return None
        sqlite = home / "live.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            source = Path(self.env["BALLET_SQLITE_PATH"] + suffix)
            if source.exists():
                shutil.copy(source, str(sqlite) + suffix)
        return _Template(database=None, sqlite=sqlite, static=home / "static")

    def _copy(self, template: _Template) -> None:
        if template.static.exists():
            shutil.copytree(template.static, self.env["BALLET_STATIC_ROOT"])
        if template.database:
            assert self.database
            _psql(f'DROP DATABASE IF EXISTS "{self.database}"')
            _psql(f'CREATE DATABASE "{self.database}" TEMPLATE "{template.database}"')
            return
        assert template.sqlite is not None
        for suffix in ("", "-wal", "-shm"):
            source = Path(str(template.sqlite) + suffix)
            if source.exists():
                shutil.copy(source, self.env["BALLET_SQLITE_PATH"] + suffix)

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=self.root,
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

    def drop_connections(self) -> None:
        """Terminate every PostgreSQL connection to the deployment's database, as a database
        restart or a network blip does: each process finds its connection broken at next use."""
        assert self.database, "only a production-mode deployment has PostgreSQL connections"
        _psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{self.database}' AND pid <> pg_backend_pid()"
        )


def _psql(sql: str) -> None:
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-c", sql], check=True, capture_output=True, timeout=60
    )


@dataclass
class Server:
    """One daphne process of a deployment.

    The test process binds the listening socket and hands it to daphne (``--fd``): the
    port is the kernel's choice, held from the start, so nothing can take it between
    choosing and listening; a restart binds the same port again.
    """

    deployment: Deployment
    port: int = 0  # 0: any free port, fixed at the first start
    log: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    proxy_headers: bool = False  # behind a proxy: the client's address from X-Forwarded-For

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, *, wait: bool = True) -> Server:
        """Start daphne; with ``wait``, return once it answers ``/healthz`` (else see :meth:`wait_ready`)."""
        log = open(self.log or os.devnull, "ab")  # noqa: SIM115 - handed to the child process
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(128)
            self.port = int(listener.getsockname()[1])
            self.process = subprocess.Popen(
                [
                    *(DAPHNE, "--fd", str(listener.fileno())),
                    *(["--proxy-headers"] if self.proxy_headers else []),
                    "ballet.asgi:application",
                ],
                cwd=self.deployment.root,
                env=self.deployment.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(listener.fileno(),),
            )
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        answer = "no answer"
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"daphne exited with {code}; its log:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError as error:
                answer = str(error)
                time.sleep(0.1)
        raise RuntimeError(
            f"daphne on port {self.port} did not become healthy in {timeout:.0f} s "
            f"(last: {answer}); its log:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 40) -> str:
        if self.log is None or not self.log.exists():
            return "(no log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

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


@contextlib.contextmanager
def served(
    home: Path,
    anthropic_base_url: str,
    *,
    extra_env: Mapping[str, str] | None = None,
    redis_url: str | None = None,
    log: Path | None = None,
    unset: tuple[str, ...] = (),
    root: Path = ROOT,
) -> Iterator[Server]:
    """One daphne on a deployment of its own in ``home`` (without the variables ``unset`` names),
    running the code of the checkout ``root``; stopped, and the deployment dropped, on leaving."""
    deployment = Deployment.create(
        home, anthropic_base_url, redis_url=redis_url, extra_env=extra_env, unset=unset, root=root
    )
    server = Server(deployment, log=log or home / "daphne.log")
    try:
        yield server.start()
    finally:
        server.stop()
        deployment.drop()
    crossed = [line for line in server.log_tail(100_000).splitlines() if "ModelCrossingError" in line]
    assert not crossed, f"a model crossed to the event loop in the server (live/bridge.py): {crossed[:3]}"


@dataclass
class RedisServer:
    """A ``redis-server`` of the test's own, without persistence: killed, it comes back empty.

    It listens on 127.0.0.1 on a free port, the same port again after :meth:`start`
    following :meth:`stop`, so the deployment's ``REDIS_URL`` stays valid.
    """

    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> RedisServer:
        assert not self.running, "the Redis server already runs"
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - handed to the child process
        self.process = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--dir", str(self.directory)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                with self.client() as client:
                    client.ping()
                return self
            except redis.RedisError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {self.port} did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGKILL: everything in it is gone, and every client's connection breaks."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, socket_connect_timeout=2)

    def flushall(self) -> None:
        """Empty the server while it runs (connections stay up; keys, groups and queues vanish)."""
        with self.client() as client:
            client.flushall()


SWEEP_TASK = "planner.recover_dead_turns"


@dataclass
class Worker:
    """A Celery worker of the deployment with its beat embedded (``-B``): the periodic sweep.

    Its log (``worker.log`` in ``directory``) tells how many sweeps ran (``tests/fakes/celery_app.py``
    logs each finished task), so a test waits for one to run instead of sleeping for a period.
    """

    deployment: Deployment
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.directory / "worker.log"

    def start(self, timeout: float = 60) -> Worker:
        log = open(self.log, "ab")  # noqa: SIM115 - handed to the child process
        self.process = subprocess.Popen(
            [
                *(CELERY, "-A", "tests.fakes.celery_app", "worker", "-B", "--concurrency=1"),
                "--loglevel=info",
                *("--without-gossip", "--without-mingle", "-n", f"live-{uuid.uuid4().hex[:8]}@%h"),
                *("-s", str(self.directory / "celerybeat-schedule")),
            ],
            cwd=ROOT,
            env=self.deployment.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its pool's children are stopped with it (see _signal)
        )
        deadline = time.monotonic() + timeout
        while " ready." not in self._log_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not start; log: {self.log}")
            time.sleep(0.1)
        return self

    def _log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def sweeps(self) -> int:
        """How many sweeps have finished so far (since the log began)."""
        return sum(
            1
            for line in self._log_text().splitlines()
            if "live-test task finished:" in line and f" {SWEEP_TASK}[" in line
        )

    def wait_sweeps(self, count: int = 1, timeout: float = 60) -> None:
        """Wait until ``count`` more sweeps than now have finished."""
        target = self.sweeps() + count
        deadline = time.monotonic() + timeout
        while self.sweeps() < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"{count} sweep(s) did not run within {timeout} s; log: {self.log}")
            time.sleep(0.2)

    def _signal(self, signum: int) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.process.wait(timeout=10)
        self._signal(signal.SIGKILL)  # a pool child left behind

    def kill(self) -> None:
        """SIGKILL the worker and its pool at once, as a crash or the OOM killer does."""
        if self.process is None or self.process.poll() is not None:
            return
        self._signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def restart(self) -> Worker:
        self.stop()
        return self.start()
