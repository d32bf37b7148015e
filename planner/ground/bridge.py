"""The runner's database threads: where every turn's database work runs.

Turns outlive the request or connection that started them, so their database
work runs on these threads, never on a request's thread-sensitive executor.
SQLite takes one writer at a time; PostgreSQL gets eight threads, each keeping a
connection of the process's pool between calls (the check below gives it back to
the pool every few seconds and takes one again).

A connection that the database dropped (a restart, a failover, an idle
timeout, ``pg_terminate_backend``) fails the statement running on it. Every
call here is one transaction (``planner/domain/services/sessions/``), rolled back when it
fails, so the call is made once more on a fresh connection: a blip never
fails a turn, nor throws away a model answer already paid for. A second
failure is the database being down, and the turn fails.

**Only plain data comes back** (docs/architecture.md#one-bridge): values, dataclasses, dicts and
frames, never a model instance or a queryset. A model on the event loop loads what it lacks
lazily, and Django refuses that there (``SynchronousOnlyOperation``) only on the path that
happens to touch it. With ``BRIDGE_CHECK`` on (the tests, ``DEBUG``) every call's result is
walked and one holding a model anywhere fails the call at once (:class:`ModelCrossingError`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import SyncToAsync
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections, connections
from django.db.models import Model, QuerySet

logger = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

THREADS = settings.BRIDGE_THREADS
_THREADS = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="planner-db")
_checked = threading.local()
CONNECTION_CHECK_SECONDS = 10.0


class _RunnerSyncToAsync(SyncToAsync):
    """Like channels' ``DatabaseSyncToAsync``, but checks the thread's connections every few
    seconds instead of around every call (a health check is a round trip per step), and
    makes a call that met a lost connection once more."""

    def thread_handler(self, loop: Any, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        if now - getattr(_checked, "at", 0.0) > CONNECTION_CHECK_SECONDS:
            close_old_connections()
            _checked.at = now
        try:
            return super().thread_handler(loop, *args, **kwargs)
        except (OperationalError, InterfaceError):
            if not _replace_lost_connections():
                raise
            logger.warning("a database call failed; making it again on a new connection", exc_info=True)
            return super().thread_handler(loop, *args, **kwargs)
        except DatabaseError:
            close_old_connections()
            _checked.at = 0.0
            raise


def _replace_lost_connections() -> bool:
    """Close this thread's connections so that the next call opens new ones; False when the
    failed call ran inside a caller's transaction (making it again is not this module's to do).

    Whether the connection was lost cannot be told from the connection afterwards (the
    failed rollback already replaced it), so every operational error counts: a lock that
    timed out or a serialization failure is worth one more try as well."""
    if any(connection.in_atomic_block for connection in connections.all(initialized_only=True)):
        return False
    connections.close_all()
    _checked.at = time.monotonic()
    return True


def db(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``func`` run on the runner's database threads; what it returns must be plain data."""
    if settings.BRIDGE_CHECK:
        func = _checked_result(func)
    return on_db_threads(func)


def on_db_threads(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``func`` run on the runner's database threads, its result unchecked: for a test or a
    benchmark that builds its state there and holds models in its own code. Code that serves
    goes through :func:`db`."""
    wrapped: Callable[P, Awaitable[R]] = _RunnerSyncToAsync(func, thread_sensitive=False, executor=_THREADS)
    return wrapped


def off_the_loop() -> None:
    """Raise if called on an event loop: for code that holds models, which only the database
    threads may touch."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise ModelCrossingError("code that holds models ran on the event loop: run it through db()")


class ModelCrossingError(TypeError):
    """A call on the database threads returned a model instance or a queryset to the event loop."""


def _checked_result(func: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(func)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        result = func(*args, **kwargs)
        found = model_inside(result)
        if found is not None:
            name = getattr(func, "__qualname__", repr(func))
            raise ModelCrossingError(f"{name} returned {found} to the event loop: return plain data instead")
        return result

    return checked


_SCALARS = (str, bytes, int, float, bool, type(None))


def model_inside(value: Any, *, _path: str = "the result", _seen: set[int] | None = None) -> str | None:
    """Where a model instance or a queryset sits inside ``value`` (through lists, tuples, sets,
    dicts and dataclasses), as ``"a Question at the result.question"``; None when there is none."""
    if isinstance(value, _SCALARS):
        return None
    if isinstance(value, Model | QuerySet):
        return f"a {type(value).__name__} at {_path}"
    seen = set() if _seen is None else _seen
    if id(value) in seen:
        return None
    seen.add(id(value))
    for path, inner in _parts(value, _path):
        found = model_inside(inner, _path=path, _seen=seen)
        if found is not None:
            return found
    return None


def _parts(value: Any, path: str) -> list[tuple[str, Any]]:
    """The values ``value`` holds, each with its path: a container's items, a dataclass's fields."""
    if isinstance(value, Mapping):
        return [(f"{path}[{key!r}]", inner) for key, inner in value.items()] + [
            (f"{path} (a key)", key) for key in value
        ]
    if isinstance(value, list | tuple | set | frozenset):
        return [(f"{path}[{index}]", inner) for index, inner in enumerate(value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f"{path}.{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
    return []


def close_db_connections() -> None:
    """Close the connections of every runner thread (tests tearing down their database)."""
    barrier = threading.Barrier(THREADS, timeout=5)

    def close() -> None:
        connections.close_all()
        _checked.at = 0.0
        barrier.wait()

    for future in [_THREADS.submit(close) for _ in range(THREADS)]:
        future.result()
