"""What runs once a write has committed and must not fail it: the one way to queue a robust hook.

A robust ``transaction.on_commit`` hook that raises is logged by Django under the callable's
``__qualname__``. A ``functools.partial`` has none, so the logging itself raised, out of the
commit: a claim committed while the broker was down answered 500, and the client's retry met its
own write (409). :func:`on_commit_robust` hands Django a named function, whatever it is given;
``tests/tracker/test_commit_hooks.py`` refuses ``robust=True`` anywhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec

from django.db import transaction

P = ParamSpec("P")


def _hook_name(func: Callable[..., object]) -> str:
    """``module.qualname`` of ``func``, or its repr when it has no name (a partial)."""
    name = getattr(func, "__qualname__", None)
    module = getattr(func, "__module__", None)
    return f"{module}.{name}" if isinstance(name, str) and isinstance(module, str) else repr(func)


def on_commit_robust(func: Callable[P, object], /, *args: P.args, **kwargs: P.kwargs) -> None:
    """Call ``func(*args, **kwargs)`` once the current transaction commits (never if it rolls back).

    Whatever it raises is logged with its name and reaches no caller: the write has committed,
    and its answer must say so.
    """

    def hook() -> None:
        func(*args, **kwargs)

    hook.__name__ = hook.__qualname__ = _hook_name(func)  # what Django's log line reads
    transaction.on_commit(hook, robust=True)
