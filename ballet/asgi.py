"""The ASGI application daphne serves: Django over HTTP, Channels over WebSocket."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballet.settings.base")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from planner.routing import websocket_urlpatterns  # noqa: E402
from planner.ws_auth import SessionUserMiddleware  # noqa: E402

# Static files (the admin's CSS and the chat page's scripts) come from the app
# directories, so neither mode needs collectstatic; a proxy may serve them instead.
application = ProtocolTypeRouter(
    {
        "http": ASGIStaticFilesHandler(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(SessionUserMiddleware(URLRouter(websocket_urlpatterns))),
    }
)

# What is loaded by now lives as long as the process: moved out of the garbage collector's
# reach, a full collection scans only what requests and turns allocate since (a pass over
# Django, the SDK and their modules would stall every stream for tens of milliseconds).
gc.freeze()
