"""Cache keys of the test run: each test sees an empty cache (its own generation of keys).

Flushing the cache instead would wipe the Redis database that live servers share with the
test process in the production mode.
"""

from __future__ import annotations

import itertools
import secrets

_generations = itertools.count(1)
generation = 0
# Keys of this run only: a run started within a limit's window of another (on the same Redis, with
# the same user ids in a fresh test database) would otherwise count that run's requests too.
_RUN = secrets.token_hex(4)


def next_generation() -> None:
    global generation  # noqa: PLW0603 - one generation per test
    generation = next(_generations)


def make_key(key: str, key_prefix: str, version: int) -> str:
    return f"{key_prefix}:{version}:test{_RUN}.{generation}:{key}"
