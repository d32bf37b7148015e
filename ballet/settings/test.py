"""Settings for the test suite: fast hashing, and the mode picked by the environment."""

import os
import tempfile
from pathlib import Path

from ballet.settings.base import *  # noqa: F403
from ballet.settings.base import CACHES, DATABASES, PRODUCTION_MODE

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if not PRODUCTION_MODE:
    # A file, as the embedded server runs on: SQLite's shared in-memory cache fails a statement at
    # once ("database table is locked") while another thread writes, where a file's writer waits
    # within the busy timeout, as on every user's server.
    TEST_DATABASE = Path(tempfile.gettempdir()) / f"ballet-test-{os.getpid()}.sqlite3"
    DATABASES["default"]["TEST"] = {"NAME": str(TEST_DATABASE)}
# Tests run Celery tasks in-process in both modes; the worker path is exercised end to end elsewhere.
CELERY_TASK_ALWAYS_EAGER = True
# A deterministic stand-in for the embedding model; the ranking tests switch the real one on.
SEARCH_EMBEDDING_BACKEND = "tracker.search.embeddings.HashingBackend"
# Every test starts from an empty cache (rate limits, lockouts) without flushing a shared Redis.
CACHES["default"]["KEY_FUNCTION"] = "tests.cache_keys.make_key"
# The suite never runs collectstatic: in both modes WhiteNoise serves the apps' static folders
# (tests/test_static.py and the live tests check each mode's own configuration).
WHITENOISE_USE_FINDERS = True
# What the planner's database threads return is checked for model instances (planner/ground/bridge.py).
BRIDGE_CHECK = True
