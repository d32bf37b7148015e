"""The ASGI application daphne serves: Django over HTTP, Channels over WebSocket."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballet.settings.base")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

# Static files (the admin's CSS and the chat page's scripts) come from the app
# directories, so neither mode needs collectstatic; a proxy may serve them instead.
application = ProtocolTypeRouter({"http": ASGIStaticFilesHandler(django_asgi_app)})
