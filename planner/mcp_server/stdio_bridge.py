"""``manage.py mcp_stdio``: Ballet's MCP server for clients that only start local servers.

Claude Desktop, and any client that speaks MCP only over stdio, starts a command and talks
newline-delimited JSON-RPC on its standard input and output. The bridge forwards each message it
reads as a POST to a Ballet server's ``/mcp`` (Streamable HTTP, stateless, JSON answers: ``app.py``)
with the key as ``Authorization: Bearer KEY``, and writes the message(s) of each answer, a JSON body
or, defensively, an SSE stream, one per line. Requests run side by side, so a tool that waits
(``ask_question``, ``wait_for_events``) holds nothing else back; ``notifications/cancelled`` aborts
its request's POST, and no answer is written for it.

Headers: ``MCP-Protocol-Version`` once ``initialize`` negotiated it. A request in the 2026
per-request envelope (``params._meta`` names its protocol version) carries the headers that mirror
its body instead (``Mcp-Method``, ``Mcp-Name``, and the ``Mcp-Param-*`` a tool's schema declares,
learnt from the ``tools/list`` answers passing through), as the SDK's HTTP client sends them; that
wire has no notifications, so the bridge sends none then.

Nothing that goes wrong ends the bridge: an HTTP refusal (401 for a bad key, 403, 429, 5xx) answers
its request with a JSON-RPC error carrying the server's readable message, as does a server that
cannot be reached or does not answer in time; a line that is not JSON is answered -32700. The bridge
ends, 0, when its input does, once the answers still due are written. Standard output carries
protocol messages only; logs go to standard error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from collections.abc import AsyncIterator
from http import HTTPStatus
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import httpx2
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
    find_invalid_x_mcp_header,
    mcp_param_headers,
    x_mcp_header_map,
)
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.jsonrpc import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, REQUEST_TIMEOUT

logger = logging.getLogger(__name__)

KEY_VARIABLE = "BALLET_KEY"
# A tool waits at most 60 s (ask_question's and get_question's wait_seconds, wait_for_events):
# room for that and the answer.
TIMEOUT_SECONDS = 120.0
IN_FLIGHT = 16  # requests forwarded at once; reading waits while as many are out
SESSION_HEADER = "mcp-session-id"  # Ballet's server is stateless and sends none; a stateful one may
MESSAGE_CHARS = 500  # of a refusal's message: a proxy's error page is no message

JsonObject = dict[str, Any]
HeaderMap = dict[tuple[str, ...], str]


class BridgeError(Exception):
    """The bridge cannot start; the message says why and what to do."""


def _object(value: Any) -> JsonObject:
    """``value`` if it is a JSON object, else an empty one: what a message says is read leniently."""
    return value if isinstance(value, dict) else {}


def endpoint(url: str) -> str:
    """``url`` if it is the http(s) address of a server; a bare origin gets ``/mcp``."""
    example = "such as https://ballet.example.com/mcp"
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 -- a port that is no number raises here
    except ValueError as exc:
        raise BridgeError(
            f"--url {url!r} is not a URL ({exc}); give Ballet's MCP address, {example}."
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BridgeError(f"--url {url!r} is not an http(s) URL; give Ballet's MCP address, {example}.")
    return parts._replace(path="/mcp").geturl() if parts.path in ("", "/") else parts.geturl()


def key_checked(key: str | None) -> str:
    """The key from the environment, or why there is none to send."""
    key = (key or "").strip()
    if not key:
        raise BridgeError(
            f"{KEY_VARIABLE} is not set: put a Ballet API key (ballet_…, made at /keys/) in the "
            f"environment of this command, as the MCP client's configuration's env.{KEY_VARIABLE}."
        )
    if not key.isascii() or not key.isprintable() or " " in key:
        raise BridgeError(f"{KEY_VARIABLE} holds characters no Ballet key has; copy the key again.")
    return key


def error(request_id: Any, code: int, message: str, data: JsonObject | None = None) -> JsonObject:
    """A JSON-RPC error response."""
    body: JsonObject = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def refused(request_id: Any, status: int, body: bytes) -> JsonObject:
    """The error answering a request the server refused with HTTP ``status``: its JSON-RPC error
    (with this request's id: a refusal before the body was read names none) or REST's ``detail``,
    else the status's name."""
    try:
        parsed = _object(json.loads(body))
    except ValueError:
        parsed = {}
    given = _object(parsed.get("error"))
    reason = given.get("message") or parsed.get("detail")
    if not isinstance(reason, str) or not reason.strip():
        reason = _phrase(status)
    message = f"Ballet refused the request (HTTP {status}): {reason.strip()[:MESSAGE_CHARS]}"
    if status == 401:
        message += f" Check {KEY_VARIABLE} in this MCP server's configuration."
    code = given["code"] if isinstance(given.get("code"), int) else INTERNAL_ERROR
    return error(request_id, code, message, {**_object(given.get("data")), "http_status": status})


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "no reason given"


def _is_request(message: JsonObject) -> bool:
    return isinstance(message.get("method"), str) and message.get("id") is not None


def _envelope_version(message: JsonObject) -> str | None:
    """The protocol version a 2026 per-request envelope names (``params._meta``), if any."""
    version = _object(_object(message.get("params")).get("_meta")).get(PROTOCOL_VERSION_META_KEY)
    return version if isinstance(version, str) else None


class Bridge:
    """One stdio client's connection to one Ballet server: what ``initialize`` and ``tools/list``
    taught it, and the requests on their way."""

    def __init__(self, *, url: str, key: str, output: BinaryIO, timeout: float = TIMEOUT_SECONDS) -> None:
        self.url, self.key, self.output, self.timeout = url, key, output, timeout
        self.version: str | None = None  # negotiated by initialize
        self.modern = False  # the client speaks the 2026 per-request envelope
        self.session_id: str | None = None
        self.param_headers: dict[str, HeaderMap] = {}  # tool -> its Mcp-Param-* declarations
        self.pending: dict[Any, asyncio.Task[None]] = {}  # request id -> its POST
        self.closed = False  # standard output is gone: nobody reads answers any more

    async def run(self, lines: AsyncIterator[bytes]) -> None:
        """Forward every line of ``lines``; return once they ended and their answers are written."""
        slots = asyncio.Semaphore(IN_FLIGHT)
        tasks: set[asyncio.Task[None]] = set()
        headers = {"Authorization": f"Bearer {self.key}", "Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(headers=headers, timeout=self.timeout) as client:
            async for line in lines:
                message = self.read(line)
                if message is None or not self.to_send(message):
                    continue
                await slots.acquire()
                task = asyncio.create_task(self.forward(client, line.strip(), message))
                task.add_done_callback(tasks.discard)
                task.add_done_callback(lambda _: slots.release())
                tasks.add(task)
                if _is_request(message):
                    self.pending[message["id"]] = task
            await asyncio.gather(*tasks, return_exceptions=True)

    def read(self, line: bytes) -> JsonObject | None:
        """The message on ``line``; a line that is none is answered here."""
        if not line.strip():
            return None
        try:
            message = json.loads(line)
        except ValueError as exc:  # UnicodeDecodeError too
            self.write(error(None, PARSE_ERROR, f"Parse error: a line that is not JSON ({exc})."))
            return None
        if not isinstance(message, dict):
            text = "Invalid Request: each line must be one JSON-RPC message, an object."
            self.write(error(None, INVALID_REQUEST, text))
            return None
        if isinstance(message.get("id"), bool) or not isinstance(message.get("id"), str | int | None):
            self.write(error(None, INVALID_REQUEST, "Invalid Request: an id is a string or an integer."))
            return None
        return message

    def to_send(self, message: JsonObject) -> bool:
        """Whether ``message`` goes to the server; a cancellation first aborts its request's POST."""
        self.modern = self.modern or _envelope_version(message) is not None
        if message.get("method") == "notifications/cancelled":
            request_id = _object(message.get("params")).get("requestId")
            task = self.pending.pop(request_id, None) if isinstance(request_id, str | int) else None
            if task is not None:
                task.cancel()
        return _is_request(message) or not self.modern

    async def forward(self, client: httpx2.AsyncClient, body: bytes, message: JsonObject) -> None:
        """POST ``message`` and write its answer, or the error a person reads instead."""
        request_id = message.get("id") if _is_request(message) else None
        try:
            headers = {"Content-Type": "application/json", **self.headers_for(message)}
            async with client.stream("POST", self.url, content=body, headers=headers) as response:
                await self.answer(response, message)
        except httpx2.TimeoutException:
            text = f"Ballet at {self.url} did not answer within {self.timeout:g} s."
            self.fail(request_id, REQUEST_TIMEOUT, text)
        except httpx2.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            self.fail(request_id, CONNECTION_CLOSED, f"Could not reach Ballet at {self.url}: {reason}.")
        except Exception:  # the client gets a readable answer; standard error keeps the traceback
            logger.exception("Forwarding a message to %s failed", self.url)
            self.fail(request_id, INTERNAL_ERROR, "The bridge failed to forward the request; see its log.")
        finally:
            if request_id is not None and self.pending.get(request_id) is asyncio.current_task():
                del self.pending[request_id]

    def headers_for(self, message: JsonObject) -> dict[str, str]:
        """The MCP headers of ``message``'s POST."""
        headers: dict[str, str] = {}
        params, method = _object(message.get("params")), message.get("method")
        version = _envelope_version(message)
        if version is not None and isinstance(method, str):
            headers = {MCP_PROTOCOL_VERSION_HEADER: version, MCP_METHOD_HEADER: method}
            name = params.get(NAME_BEARING_METHODS.get(method, ""))
            if isinstance(name, str):
                headers[MCP_NAME_HEADER] = encode_header_value(name)
            arguments = params.get("arguments")
            if method == "tools/call" and name in self.param_headers and isinstance(arguments, dict):
                headers |= mcp_param_headers(self.param_headers[name], arguments)
        elif self.version is not None:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self.version
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        return headers

    async def answer(self, response: httpx2.Response, message: JsonObject) -> None:
        """Write what ``response`` answers ``message``: nothing for a notification's 202."""
        request_id = message.get("id") if _is_request(message) else None
        if response.is_redirect:
            where = response.headers.get("location", "elsewhere")
            text = f"Ballet at {self.url} redirects to {where}: give --url that address."
            self.fail(request_id, INTERNAL_ERROR, text)
            return
        if response.status_code >= 300:
            body = await response.aread()
            logger.warning("Ballet answered HTTP %s to %.100s", response.status_code, message.get("method"))
            if request_id is not None:
                self.write(refused(request_id, response.status_code, body))
            return
        if request_id is None:
            return
        self.session_id = response.headers.get(SESSION_HEADER, self.session_id)
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind == "text/event-stream":
            answered = await self.relay_events(response, message)
        elif kind == "application/json":
            answered = self.relay(await response.aread(), message)
        else:
            answered = False
        if not answered:
            what = f"HTTP {response.status_code} ({kind or 'no body'})"
            text = f"Ballet answered {what} without the answer to the request."
            self.write(error(request_id, INTERNAL_ERROR, text))

    async def relay_events(self, response: httpx2.Response, message: JsonObject) -> bool:
        """Relay the messages of an SSE stream until the one answering ``message``."""
        async for event in httpx2.EventSource(response):
            if event.event == "message" and event.data and self.relay(event.data.encode(), message):
                return True
        return False

    def relay(self, body: bytes, message: JsonObject) -> bool:
        """Write the JSON-RPC message(s) of ``body``; whether one answers ``message``."""
        try:
            parsed = json.loads(body)
        except ValueError:
            return False
        answered = False
        for item in parsed if isinstance(parsed, list) else [parsed]:
            if not isinstance(item, dict):
                continue
            if "error" in item and item.get("id") is None:  # refused before its id was read: it is ours
                item["id"] = message["id"]
            if item.get("id") == message["id"] and ("result" in item or "error" in item):
                answered = True
                self.learn(message, item.get("result"))
            self.write(item)
        return answered

    def learn(self, message: JsonObject, result: Any) -> None:
        """Keep what a result tells about the requests to come."""
        if not isinstance(result, dict):
            return
        if message["method"] == "initialize" and isinstance(result.get("protocolVersion"), str):
            self.version = result["protocolVersion"]
        tools = result.get("tools") if message["method"] == "tools/list" else None
        for tool in map(_object, tools if isinstance(tools, list) else []):
            schema = tool.get("inputSchema")
            if isinstance(tool.get("name"), str) and find_invalid_x_mcp_header(schema) is None:
                self.param_headers[tool["name"]] = x_mcp_header_map(schema)

    def fail(self, request_id: Any, code: int, text: str) -> None:
        logger.warning("%s", text)
        if request_id is not None:
            self.write(error(request_id, code, text))

    def write(self, message: JsonObject) -> None:
        """One message on one line of standard output."""
        if self.closed:
            return
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        try:
            self.output.write(line)
            self.output.flush()
        except (OSError, ValueError):  # the client went away (a broken pipe, a closed file)
            logger.warning("Standard output is closed; answers are dropped until the input ends")
            self.closed = True


async def lines_of(stream: BinaryIO) -> AsyncIterator[bytes]:
    """The lines of ``stream``, read on a thread of their own (a pipe, a file or a console,
    on any system), then one empty line at its end."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=IN_FLIGHT)

    def read() -> None:
        line = b"-"
        while line:  # until the end of the input
            line = stream.readline()
            try:
                asyncio.run_coroutine_threadsafe(queue.put(line), loop).result()
            except RuntimeError:  # the loop closed: the bridge is ending
                return

    threading.Thread(target=read, name="mcp-stdio-input", daemon=True).start()
    while line := await queue.get():
        yield line


def bridge_run(
    *,
    url: str,
    key: str | None,
    timeout: float = TIMEOUT_SECONDS,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> None:
    """Bridge ``stdin`` to the MCP server at ``url`` until ``stdin`` ends.

    Raises :class:`BridgeError` when it cannot start (no key, a bad URL)."""
    target, secret = endpoint(url), key_checked(key)
    bridge = Bridge(url=target, key=secret, output=stdout or sys.stdout.buffer, timeout=timeout)
    logger.info("Bridging MCP over stdio to %s", target)
    asyncio.run(bridge.run(lines_of(stdin or sys.stdin.buffer)))
