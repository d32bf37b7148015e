"""The ASGI application daphne serves: Django over HTTP, the MCP server at ``/mcp``, the events
feed's waits and streams in front of Django (``planner/web/event_route.py``), Channels over
WebSocket, with the process's live side started first (``ballet/lifespan.py``)."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballet.settings.base")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

# The Anthropic SDK loads on demand (planner/agent/providers.py); a server loads it now, before
# the gc freeze below, rather than in its first turn.
import planner.agent.gateway  # noqa: E402, F401
from ballet import ws_protocol  # noqa: E402
from ballet.lifespan import Lifespan  # noqa: E402
from planner.mcp_server.app import mcp_app, with_mcp  # noqa: E402
from planner.web.event_route import with_event_route  # noqa: E402
from planner.web.routing import websocket_urlpatterns  # noqa: E402
from planner.web.ws_auth import SessionUserMiddleware  # noqa: E402

ws_protocol.install()  # autobahn's options held by daphne's protocol class, not by every socket
# Static files come through Django's middleware: WhiteNoise (ballet/static.py).
application = Lifespan(
    ProtocolTypeRouter(
        {
            "http": with_mcp(with_event_route(django_asgi_app), mcp_app),
            "websocket": AllowedHostsOriginValidator(SessionUserMiddleware(URLRouter(websocket_urlpatterns))),
        }
    )
)

# The garbage collector stops the event loop, so every stream, while it runs. What is loaded
# by now lives as long as the process: frozen, no collection scans it again. A larger young
# generation lets the short-lived objects of streaming (events, frames) die before a
# collection, and keeps full collections, 50-110 ms pauses with a few hundred sockets open, rare.
gc.freeze()
gc.set_threshold(10_000, 50, 50)
