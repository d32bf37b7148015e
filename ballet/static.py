"""Static files: WhiteNoise serves them from daphne, with hashed names in production mode.

``/static/`` is answered by :class:`StaticFilesMiddleware`, placed right after Django's
``SecurityMiddleware``. In production mode a file's name carries a hash of its content,
from ``manage.py collectstatic``'s manifest (:class:`ManifestStorage`), so browsers keep it
for a year (``Cache-Control: max-age=315360000, public, immutable``) and a deploy that
changes it changes its name; a file the manifest lacks is linked by its plain name instead
of failing the page. The embedded mode needs no collectstatic: WhiteNoise serves the apps'
own folders (``WHITENOISE_USE_FINDERS``), and browsers keep a file for a minute.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware
from whitenoise.responders import StaticFile
from whitenoise.storage import CompressedManifestStaticFilesStorage

logger = logging.getLogger(__name__)

GetResponse = Callable[[HttpRequest], HttpResponseBase | Awaitable[HttpResponseBase]]


class ManifestStorage(CompressedManifestStaticFilesStorage):
    """Hashed and compressed copies of the static files; a name missing from the manifest
    (collectstatic not run since the file was added) is linked as it is."""

    def stored_name(self, name: str) -> str:
        try:
            return str(super().stored_name(name))
        except ValueError:
            # Django raises here, and the page would answer 500. collectstatic also writes the
            # file under its plain name, which WhiteNoise serves (cached for a minute only).
            return name


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise, able to run in Django's async chain.

    WhiteNoise's own middleware is sync only: under daphne, Django would run it, and with it
    every request of the chain, through a thread of its own. Here a request for anything but
    a static file goes straight on, and only the reading of a static file takes a thread.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse) -> None:
        super().__init__(get_response)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)
        if isinstance(staticfiles_storage, ManifestStorage) and not staticfiles_storage.exists(
            staticfiles_storage.manifest_name
        ):
            logger.warning(
                "no static files manifest in %s: pages link unhashed names; run manage.py collectstatic",
                settings.STATIC_ROOT,
            )

    def add_files(self, root: str, prefix: str | None = None) -> None:
        # Serving from the apps' folders (the embedded mode), a STATIC_ROOT never collected is no news.
        if self.autorefresh or os.path.isdir(root) or not getattr(settings, "WHITENOISE_USE_FINDERS", False):
            super().add_files(root, prefix)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        if self.is_async:
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        static_file = await self._find(request.path_info)
        if static_file is None:
            response = self.get_response(request)
            assert not isinstance(response, HttpResponseBase)
            return await response
        return await sync_to_async(_read, thread_sensitive=False)(static_file, request)

    async def _find(self, path: str) -> StaticFile | None:
        if not self.autorefresh:
            return self.files.get(path)
        if not path.startswith(self.static_prefix):
            return None
        # With DEBUG on, WhiteNoise looks at the disk for every request: not on the event loop.
        return await sync_to_async(self.find_file, thread_sensitive=False)(path)


def _read(static_file: StaticFile, request: HttpRequest) -> HttpResponse:
    """WhiteNoise's answer for the request (the file, 304, 206 or 405), read whole: the largest
    static file is half a megabyte, and Django would read a file response in a thread anyway."""
    answer = static_file.get_response(request.method, request.META)
    body = b""
    if answer.file is not None:
        with answer.file as handle:
            body = handle.read()
    response = HttpResponse(body, status=int(answer.status))
    del response["Content-Type"]
    for key, value in answer.headers:
        response[key] = value
    return response
