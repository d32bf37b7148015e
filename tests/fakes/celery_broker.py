"""Celery's broker out of reach or hung, as a write meets it while Redis is down in production."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from ballet.celery import app

CLOSED_PORT = "redis://127.0.0.1:1/0"


@contextmanager
def broker_down() -> Iterator[None]:
    """Tasks are queued, not run at once (as in production), on a broker at a closed port: each
    enqueue fails after the publish's own retries (about 0.6 s, ``task_publish_retry_policy``)."""
    with _broker(CLOSED_PORT):
        yield


@contextmanager
def broker_hung() -> Iterator[None]:
    """Tasks are queued on a broker that takes connections and never answers (a Redis stopped
    with SIGSTOP, or cut off after the connection was made). Closing it at the end resets the
    connections it held, so that nothing waits on it past the test."""
    with (
        socket.create_server(("127.0.0.1", 0)) as listener,
        _broker(f"redis://127.0.0.1:{listener.getsockname()[1]}/0"),
    ):
        yield


@contextmanager
def _broker(url: str) -> Iterator[None]:
    saved = {"task_always_eager": app.conf.task_always_eager, "broker_url": app.conf.broker_url}
    app.conf.update(task_always_eager=False, broker_url=url)
    _drop_connections()
    try:
        yield
    finally:
        app.conf.update(saved)
        _drop_connections()


def _drop_connections() -> None:
    """The app's pools of connections and producers, made afresh for the broker it names next."""
    # Celery's own reset after a fork does the same; it has no public way.
    app._pool = None  # type: ignore[attr-defined]
    app.amqp._producer_pool = None  # type: ignore[attr-defined]
