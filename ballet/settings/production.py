"""Production settings: the secure defaults ``manage.py check --deploy`` asks for."""

from ballet.settings.base import *  # noqa: F403
from ballet.settings.base import SERVER

# base refuses production mode (DATABASE_URL and REDIS_URL) without its keys; these settings
# refuse a generated key in any mode.
if not SERVER.secret_key:
    raise RuntimeError("DJANGO_SECRET_KEY must be set in production")
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = True
SECURE_HSTS_SECONDS = 31_536_000
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
X_FRAME_OPTIONS = "DENY"
# Load balancers probe these over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
CSRF_TRUSTED_ORIGINS = [f"https://{host}" for host in SERVER.allowed_hosts if "*" not in host]
