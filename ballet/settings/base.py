"""Settings shared by every mode.

With no ``DATABASE_URL`` and ``REDIS_URL`` Ballet runs embedded: SQLite, an
in-memory channel layer and eager Celery. With both it runs in production
mode on PostgreSQL and Redis, several processes side by side.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import dj_database_url
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from ballet.env import load_settings, share_metrics, work_config
from ballet.keys import embedded_database_path, load_keys

BASE_DIR = Path(__file__).resolve().parent.parent.parent
# ballet.toml (BALLET_CONFIG), the environment over it; a bad value stops here, named (ballet/env.py).
# Lower case: not a Django setting itself, only the parts below are.
config = load_settings()
SERVER = config.server
PRODUCTION_MODE = SERVER.production
# What the runtime is assembled from, read here rather than from the mode wherever it matters
# (docs/architecture.md#the-planners-floors). The embedded mode serves everything from one
# process: a turn owned by another is one whose process is gone.
ONE_PROCESS = not PRODUCTION_MODE
# The bridge's database threads: SQLite has one writer at a time; PostgreSQL serves eight.
BRIDGE_THREADS = 8 if PRODUCTION_MODE else 1
# Before anything imports prometheus_client: with a directory, every process of the host counts
# in it and /metrics adds them all up (ballet/metrics.py).
METRICS_DIR = share_metrics(SERVER)
BALLET_PLANNER = config.planner
BALLET_LIMITS = config.limits
BALLET_WORK = work_config(config)
# USD per million tokens per model id: the estimated cost of metered use (planner/domain/services/spend.py).
BALLET_PRICES = config.prices

# Off unless DJANGO_DEBUG=1, in both modes: the debug pages show code and settings (docs/trust.md#secrets).
DEBUG = bool(SERVER.debug)
# Every result of the planner's database threads is checked for model instances on its way to the
# event loop (planner/ground/bridge.py): on in DEBUG and in the tests, a walk too many for production.
BRIDGE_CHECK = DEBUG if SERVER.bridge_check is None else SERVER.bridge_check
# The embedded mode's SQLite file; its folder is made here, so a fresh clone's migrate works.
SQLITE_PATH = None if PRODUCTION_MODE else embedded_database_path(SERVER, BASE_DIR / "db" / "ballet.sqlite3")
# Production mode refuses to start without its keys; the embedded mode keeps generated ones
# beside its database. Every setting holding a key has KEY in its name, so error pages mask it.
KEYS = load_keys(SERVER, embedded_folder=SQLITE_PATH.parent if SQLITE_PATH else BASE_DIR / "db")
SECRET_KEY = KEYS.secret_key
# Project credentials (tracker.trust.crypto): the current key first, then older ones still read.
BALLET_CREDENTIAL_KEYS = [KEYS.credential_key, *KEYS.credential_key_fallbacks]
# Masks passwords inside URLs (DATABASES, CACHES, the channel layer, the broker) on error pages.
DEFAULT_EXCEPTION_REPORTER_FILTER = "ballet.errors.SecretSafeExceptionReporterFilter"
ALLOWED_HOSTS = SERVER.allowed_hosts or ["127.0.0.1", "localhost", "testserver"]
CSRF_TRUSTED_ORIGINS = [f"http://{host}:8000" for host in ALLOWED_HOSTS if "*" not in host]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_prometheus",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc, served as static files (no CDN)
    "channels",
    "axes",
    "tracker",
    "knowledge",
    "planner",
    "ballet",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "ballet.static.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "tracker.web.middleware.AccessScopeMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
    # Last, as django-axes asks: turns a refused login into the 429 page (tracker/trust/logins.py).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "ballet.urls"
ASGI_APPLICATION = "ballet.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if PRODUCTION_MODE:
    # A pool, not persistent connections: under daphne each request's view runs on a thread of its
    # own, and a connection kept by its thread outlived it, one per request. A connection goes back
    # to the pool at the end of each request; past the pool's size a request waits for one.
    DATABASES = {"default": dj_database_url.parse(SERVER.database_url or "", conn_health_checks=True)}
    # What the URL's query asks of the connection (``?sslmode=require``, ``?options=-c …``) is kept,
    # its server options before Ballet's own.
    _url_options = dict(DATABASES["default"].get("OPTIONS") or {})
    _generic_plans = "-c plan_cache_mode=force_generic_plan"
    DATABASES["default"]["OPTIONS"] = {
        **_url_options,
        "pool": {"min_size": 1, "max_size": SERVER.database_pool_size, "timeout": 10},
        # The turn's hot path prepares its reads (tracker/db/sql.py, docs/architecture.md#the-hot-path-
        # in-sql); psycopg prepares nothing while this is None, Django's default. The ORM's cursors
        # bind on the client and never prepare, whatever it says.
        "prepare_threshold": 1_000_000,
        # and PostgreSQL plans each of them once: left to choose, it plans a statement afresh at
        # every run for its first five, and for good where the generic plan looks costlier, as it
        # does for the read tools' joins (half a millisecond of planning for a tenth of running).
        "options": " ".join(filter(None, [_url_options.get("options"), _generic_plans])),
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 reads with a 5 s timeout by default, the same as channels-redis's
                # blocking receive: idle consumers would fail. Give the read room.
                # Its pool also caps connections at 100 by default and fails at once past that.
                "hosts": [
                    {
                        "address": SERVER.redis_url,
                        "socket_timeout": 30,
                        "socket_connect_timeout": 5,
                        "max_connections": 1000,
                        # After a Redis restart every pooled connection is dead: a command meeting
                        # one reconnects and runs again instead of failing (planner/live/relay.py notices
                        # the restart by itself and joins its groups again).
                        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.1), 3),
                    }
                ],
                # Watchers that fall behind a fast stream must not lose frames: room for bursts.
                "capacity": 5000,
                "expiry": 60,
                # Memberships of a process that died must not outlive it by a day (the default):
                # every live process renews its own every 20 s (planner/live/relay.py).
                "group_expiry": 120,
            },
        }
    }
    # Rate limits and lockouts must be shared by every process.
    CACHES = {
        "default": {
            "BACKEND": "ballet.redis_cache.SharedRedisCache",
            "LOCATION": SERVER.redis_url,
            # A Redis that takes the connection and stops answering fails a count in seconds (a
            # readable 503, nothing written) instead of holding the request for ever.
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 3},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(SQLITE_PATH),
            # Keep connections: opening SQLite (and its PRAGMAs) on every planner step costs more
            # than the step itself.
            "CONN_MAX_AGE": 600,
            "OPTIONS": {
                # Writers queue for the lock instead of failing on a deferred upgrade.
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 5000, "expiry": 60},
        }
    }
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Where `manage.py collectstatic` writes; production mode serves from here (ballet/static.py).
STATIC_ROOT = Path(SERVER.static_root) if SERVER.static_root else BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Production mode: names hashed by content, compressed copies, cached by browsers for a year.
    # The embedded mode links and serves the apps' own files, no collectstatic needed.
    "staticfiles": {
        "BACKEND": "ballet.static.ManifestStorage"
        if PRODUCTION_MODE
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = not PRODUCTION_MODE
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Failed logins (docs/trust.md#limits): django-axes counts them per username and, apart, per client IP in
# its database table; see tracker/trust/logins.py for why a success resets nothing and where the IP
# comes from.
AUTHENTICATION_BACKENDS = [
    "tracker.trust.logins.LoginLimitBackend",
    "tracker.trust.logins.HumanBackend",  # ModelBackend, refusing agents (docs/api-keys.md#agents)
]
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = BALLET_LIMITS.login_failures
AXES_COOLOFF_TIME = timedelta(seconds=BALLET_LIMITS.login_window_seconds)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = False
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # refused tries do not stretch the window
AXES_CLIENT_IP_CALLABLE = "tracker.trust.logins.client_ip"
AXES_LOCKOUT_CALLABLE = "tracker.trust.logins.lockout_response"
AXES_HTTP_RESPONSE_CODE = 429
AXES_DISABLE_ACCESS_LOG = True  # failures only: no row per successful login
AXES_VERBOSE = False
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "csrfmiddlewaretoken"]  # masked in stored form data

# Mail (docs/events.md#e-mail): [email] / BALLET_EMAIL_*, through Django's backends.
EMAIL = config.email
EMAIL_BACKEND = {
    "console": "django.core.mail.backends.console.EmailBackend",
    "smtp": "django.core.mail.backends.smtp.EmailBackend",
    "file": "django.core.mail.backends.filebased.EmailBackend",
}[EMAIL.backend]
EMAIL_FILE_PATH = EMAIL.file_path or str(BASE_DIR / "db" / "mail")
EMAIL_HOST, EMAIL_PORT, EMAIL_USE_TLS = EMAIL.host, EMAIL.port, EMAIL.tls
EMAIL_HOST_USER, EMAIL_HOST_PASSWORD = EMAIL.user or "", EMAIL.password or ""
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = SERVER_EMAIL = EMAIL.from_
BALLET_BASE_URL = EMAIL.base_url.rstrip("/")
BALLET_WEBHOOKS = config.webhooks
# Linked Git repositories (SPEC § 16, tracker/repos/): their bare mirrors beside the embedded database.
BALLET_REPOSITORIES = config.repositories
REPOSITORIES_PATH = Path(
    BALLET_REPOSITORIES.path or (SQLITE_PATH.parent if SQLITE_PATH else BASE_DIR / "db") / "repositories"
)
# The demo's own Git repository, made and linked by seed_demo: beside the data, not in the mirrors.
DEMO_REPOSITORY_ROOT = (SQLITE_PATH.parent if SQLITE_PATH else BASE_DIR / "db") / "demo-repository"
BALLET_MCP = config.mcp

# Celery: eager in the embedded mode, Redis broker in production.
# An eager task still takes a producer; a memory broker named without a host makes kombu warn
# ("No hostname was supplied") on every task a new user's first run starts.
CELERY_BROKER_URL = SERVER.redis_url or "memory://localhost/"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not PRODUCTION_MODE
# Without timeouts a publish to a Redis that stopped answering (hung, or cut off without closing the
# connection) waits for ever: the search indexing queued after a write commits held the write's
# answer. With them it gives up within about 6 s, is logged, and the write answers
# (docs/operations.md#a-redis-outage). The worker's BRPOP waits 1 s, well within them.
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 2, "socket_timeout": 3}
# Celery's consumer, surviving a Redis lost while it holds fetched tasks (ballet/celery_consumer.py).
CELERY_WORKER_CONSUMER = "ballet.celery_consumer:Consumer"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_IGNORE_RESULT = True
# Task modules beside the apps' tasks.py that autodiscovery finds.
CELERY_IMPORTS = ("tracker.work_tasks", "tracker.webhook_tasks", "tracker.repo_tasks")
# Beat keeps its schedule in memory and writes no file (docs/operations.md#celery-beat): every entry
# runs every few seconds, so a restarted beat has nothing worth remembering, and it needs no
# writable directory (a read-only checkout or container works).
CELERY_BEAT_SCHEDULER = "celery.beat:Scheduler"
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "recover-dead-planner-turns": {"task": "planner.recover_dead_turns", "schedule": 5.0},
    "start-waiting-planner-work": {"task": "planner.start_waiting_work", "schedule": 10.0},
    # Claims whose lease ran out (docs/domain.md#work); the embedded server sweeps them itself.
    "expire-claims": {"task": "tracker.expire_claims", "schedule": 30.0},
    # People's mail (docs/events.md#e-mail): what a worker missed; the digests go once a day.
    "send-mail": {"task": "tracker.send_mail", "schedule": 10.0},
    "send-digests": {"task": "tracker.send_digests", "schedule": 600.0},
    # Webhook deliveries due (docs/events.md#webhooks): retries, and those whose publish was lost.
    "deliver-webhooks": {"task": "tracker.deliver_webhooks", "schedule": 5.0},
    # Linked repositories whose mirror is due a fetch ([repositories] fetch_minutes).
    "fetch-repositories": {"task": "tracker.fetch_repositories", "schedule": 60.0},
}

# Search (docs/search.md): the sentence-embedding backend (tracker.search.embeddings); the local
# model by default.
SEARCH_EMBEDDING_BACKEND = SERVER.search_embedding_backend or "tracker.search.embeddings.LocalModelBackend"
# Where the documents of each kind come from (tracker.search.types.SearchSource), named here so that
# the tracker, which indexes them all, never imports the knowledge app.
SEARCH_SOURCES = [
    "tracker.search.documents.ITEM_SOURCE",
    "tracker.search.documents.SKILL_SOURCE",
    "knowledge.search.KNOWLEDGE_SOURCE",
]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "tracker.web.authentication.KeyAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "tracker.web.pagination.LimitOffset",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "EXCEPTION_HANDLER": "tracker.web.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Ballet API",
    "DESCRIPTION": "Ballet's plan, changesets, claims, questions, planner chats, skills and knowledge, "
    "as its pages and agents use them.",
    "VERSION": "1.0.0",
    # Operations grouped by what they are about, read from their paths (ballet/api_docs.py), after
    # drf-spectacular's own hook that names the enums.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "ballet.api_docs.tag_by_path",
    ],
    "SERVE_INCLUDE_SCHEMA": False,
    # The doc pages' scripts and styles from drf-spectacular-sidecar's static files: they work offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No validator badge: Swagger UI would send the schema to validator.swagger.io.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "COMPONENT_SPLIT_REQUEST": True,
    # Items and knowledge entries both have a "kind"; name their enums apart.
    "ENUM_NAME_OVERRIDES": {
        "ItemKindEnum": "tracker.models.plan.ItemKind",
        "KnowledgeKindEnum": "knowledge.models.KnowledgeKind",
        "KeyStatusEnum": "tracker.models.keys.KeyStatus",
        "ClaimStatusEnum": "tracker.models.work.ClaimStatus",
        "ReportKindEnum": "tracker.models.work.ReportKind",
        "ChangesetStatusEnum": "tracker.models.ChangesetStatus",
        # The catalogue of events (docs/events.md#the-catalogue): the feed's and the webhooks'.
        "EventTypeEnum": "tracker.services.events.EVENT_TYPES",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        # Eager indexing tasks would log every success, burying the output of commands like seed_demo.
        "celery.app.trace": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        # The MCP transport logs every stateless request's end ("Terminating session: None").
        "mcp.server.streamable_http": {"level": "WARNING"},
    },
}
