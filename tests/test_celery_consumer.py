"""The worker's consumer (ballet/celery_consumer.py), in process: the worker uses it, and the close
of a lost broker connection logs the ``AttributeError`` of its collected transport instead of
raising it, and nothing else. The case itself, against real processes, is
``tests/e2e/test_worker_redis_loss.py``."""

from __future__ import annotations

import logging

import pytest
from celery.utils.imports import symbol_by_name

from ballet.celery import app
from ballet.celery_consumer import Consumer, _tolerant_close


def test_the_worker_uses_the_consumer() -> None:
    assert symbol_by_name(app.conf.worker_consumer) is Consumer


def test_a_lost_connection_closes_logging_its_collected_transport(caplog: pytest.LogCaptureFixture) -> None:
    def close() -> None:
        raise AttributeError("'NoneType' object has no attribute 'hostname'")

    with caplog.at_level(logging.WARNING, logger="ballet.celery_consumer"):
        _tolerant_close(close)()
    assert "could not be put back" in caplog.text
    assert "'hostname'" in caplog.text


def test_any_other_error_of_the_close_is_left_to_celery() -> None:
    def close() -> None:
        raise OSError("connection reset")

    with pytest.raises(OSError, match="connection reset"):
        _tolerant_close(close)()
