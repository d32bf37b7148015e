"""A model call on the wire: the request the SDK's client would send, posted through aiohttp.

The SDK's client builds every request anew: pydantic options, its headers, httpx's URL, request
and client layers, then its aiohttp transport. That is about 0.6 ms of the event loop a call
(docs/benchmarks.md#reading-the-figures), twice a turn and more, on every running turn. Here the
SDK's client builds one request per credential and loop, and its URL, headers and timeouts are
kept; each attempt sends them (with its retry count) and the body on an aiohttp session of its own.

What the SDK decides stays the SDK's: its policy says which answers and failures are tried again
(408, 409, 429, 5xx, ``x-should-retry``, a connection that failed or timed out) and how long to
wait first (``retry-after``, its backoff with jitter), and its client makes the error raised once
the retries are spent (``anthropic.RateLimitError``, ``APIConnectionError``, ...), as ``post`` does.
``tests/planner/agent/test_wire.py`` holds the headers and the retries to the SDK's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import aiohttp
import anthropic
import httpx2
from aiohttp.helpers import get_env_proxy_for_url
from anthropic._models import FinalRequestOptions
from yarl import URL

logger = logging.getLogger(__name__)

PATH = "/v1/messages"
# Set per attempt, or by aiohttp for what it sends and can decode.
_PER_ATTEMPT = frozenset(
    {"host", "content-length", "connection", "accept-encoding", "x-stainless-retry-count"}
)
# Headers of an answer aiohttp has read and decoded.
_DECODED = frozenset({b"content-encoding", b"content-length", b"transfer-encoding"})


class Wire:
    """One credential's model calls on one event loop: the SDK's client, for what it would send and
    its retry policy, and the aiohttp session the calls go out on."""

    def __init__(self, client: anthropic.AsyncAnthropic) -> None:
        """The SDK's request, built once (on the running loop: a header names the async library)."""
        self.client = client
        self._options = FinalRequestOptions.construct(method="post", url=PATH, content=b"")
        request = client._build_request(self._options)
        self._url = str(request.url)
        self._headers = {name: value for name, value in request.headers.items() if name not in _PER_ATTEMPT}
        timeout = request.extensions.get("timeout", {})
        self._timeout = aiohttp.ClientTimeout(
            sock_connect=timeout.get("connect"), sock_read=timeout.get("read"), connect=timeout.get("pool")
        )
        # The proxy the environment names (HTTPS_PROXY, NO_PROXY), read once: a session that
        # trusts the environment reads it, and the netrc file, in a thread at every request.
        self._proxy: URL | None = None
        self._proxy_auth: aiohttp.BasicAuth | None = None
        with contextlib.suppress(LookupError):
            self._proxy, self._proxy_auth = get_env_proxy_for_url(URL(self._url))
        limits = anthropic.DEFAULT_CONNECTION_LIMITS
        connector = aiohttp.TCPConnector(
            limit=limits.max_connections or 0,
            keepalive_timeout=limits.keepalive_expiry,
            ssl=httpx2.create_ssl_context(),
        )
        self._session = aiohttp.ClientSession(connector=connector)

    async def close(self) -> None:
        await self._session.close()
        await self.client.close()

    async def post(self, body: bytes) -> aiohttp.ClientResponse:
        """The API's 200 answer to ``body``, its event stream unread (the caller closes it);
        what the SDK raises once its retries are spent."""
        retries = self.client.max_retries
        for taken in range(retries + 1):
            left = retries - taken
            headers = {**self._headers, "x-stainless-retry-count": str(taken)}
            try:
                response = await self._session.post(
                    self._url,
                    data=body,
                    headers=headers,
                    timeout=self._timeout,
                    proxy=self._proxy,
                    proxy_auth=self._proxy_auth,
                )
            except (TimeoutError, aiohttp.ClientError) as exc:
                if not left:
                    raise self._unreachable(exc) from exc
                await self._wait(left, None, f"failed ({type(exc).__name__})")
                continue
            if response.status == 200:
                return response
            failed = await self._failed(response)
            if not left or not self.client._should_retry(failed):
                raise self.client._make_status_error_from_response(failed)
            await self._wait(left, failed.headers, f"answered {response.status}")
        raise AssertionError("unreachable")  # pragma: no cover

    def silence(self, response: aiohttp.ClientResponse) -> Silence:
        """The read timeout of ``response``'s event stream, from the answer's headers on (aiohttp's
        own times the wait for them)."""
        return Silence(response, self._timeout.sock_read)

    def status_error(
        self, response: aiohttp.ClientResponse, message: str, body: object
    ) -> anthropic.APIStatusError:
        """An ``error`` event in the stream of ``response``, as the SDK raises it (status 200)."""
        return anthropic.APIStatusError(message, response=self._httpx(response), body=body)

    async def _failed(self, response: aiohttp.ClientResponse) -> httpx2.Response:
        """An error answer, read whole, in the form the SDK's policy and errors take."""
        try:
            content = await response.read()
        except (TimeoutError, aiohttp.ClientError):
            content = b""
        finally:
            response.release()
        return self._httpx(response, content)

    def _httpx(self, response: aiohttp.ClientResponse, content: bytes = b"") -> httpx2.Response:
        """``response`` as httpx's, holding ``content`` as aiohttp decoded it (so without the
        headers that would have httpx decode it again)."""
        request = httpx2.Request("POST", self._url)
        headers = [(name, value) for name, value in response.raw_headers if name.lower() not in _DECODED]
        return httpx2.Response(response.status, headers=headers, content=content, request=request)

    def _unreachable(self, exc: BaseException) -> anthropic.APIConnectionError:
        request = httpx2.Request("POST", self._url)
        if isinstance(exc, TimeoutError):  # aiohttp's timeouts are TimeoutErrors
            return anthropic.APITimeoutError(request=request)
        return anthropic.APIConnectionError(request=request)

    async def _wait(self, left: int, headers: httpx2.Headers | None, what: str) -> None:
        seconds = self.client._calculate_retry_timeout(left, self._options, headers)
        logger.info("a model request %s; retrying in %.2f s", what, seconds)
        await asyncio.sleep(seconds)


class Silence:
    """An event stream's read timeout, kept by one timer a timeout rather than aiohttp's.

    aiohttp cancels its read timer and starts another at every chunk it reads: a timer handle,
    a push on the event loop's heap and a cancelled handle left there, for every delta of every
    stream (about 3 % of a streaming daphne's event loop, docs/benchmarks.md#reading-the-figures). A silence
    notes when each chunk came (:meth:`heard`) and looks only when its timer fires: quiet for
    ``seconds`` since the last chunk, the read fails with aiohttp's own error (a TimeoutError);
    else the timer is set again, ``seconds`` after that chunk. aiohttp's timer is switched off
    for the rest of the answer, as aiohttp switches it off for a WebSocket's connection."""

    __slots__ = ("_handle", "_last", "_loop", "_response", "_seconds")

    def __init__(self, response: aiohttp.ClientResponse, seconds: float | None) -> None:
        self._loop = asyncio.get_running_loop()
        self._response = response
        self._seconds = seconds
        self._last = self._loop.time()
        self._handle: asyncio.TimerHandle | None = None
        if seconds is None:
            return
        connection = response.connection
        if connection is not None and connection.protocol is not None:
            connection.protocol.read_timeout = None
        self._handle = self._loop.call_at(self._last + seconds, self._look)

    def heard(self) -> None:
        """A chunk came now."""
        self._last = self._loop.time()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def _look(self) -> None:
        assert self._seconds is not None
        due = self._last + self._seconds
        if self._loop.time() < due:
            self._handle = self._loop.call_at(due, self._look)
            return
        self._handle = None
        stalled = aiohttp.SocketTimeoutError("Timeout on reading data from socket")  # as aiohttp says it
        self._response.content.set_exception(stalled)
