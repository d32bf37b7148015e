"""``/mcp``: the SDK's Streamable HTTP transport behind REST's credentials and the request limit.

Every request is authenticated before the SDK sees it: ``Authorization: Bearer
KEY`` (or ``Token KEY``, ``Api-Key KEY``) with an API key or the legacy REST token
of an active user (``tracker/web/credentials.py``), else HTTP 401; then counted
against ``mcp_requests_per_minute`` of the user, one count with its REST question
requests (docs/trust.md#limits), else HTTP 429. Both
refusals are JSON-RPC error bodies, so MCP clients show their message and
anything else reads ``error.message``. While Redis, where requests are counted,
is down, requests go uncounted and the tools that write (``ask_question``, the work tools)
answer a tool error ``unavailable`` instead of running. The Host header is
checked against ``ALLOWED_HOSTS`` as Django checks it.

The transport runs stateless with JSON responses: each POST is served on its
own, so any daphne process of a deployment can serve any request, and nothing
is kept between requests (no GET stream, no DELETE: 405). The user and the API key ride in the ASGI
scope to the tool handlers; who may do what, and what the key's scopes allow, is decided per call
(``tools.py``).

The SDK's session manager needs a task group that outlives every request: it
runs with the server (:class:`Lifetime`, started by ``ballet/lifespan.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from starlette.types import Receive, Scope, Send

from planner.domain.tools.base import ToolOutcome, error_output
from planner.ground import ending
from planner.ground.bridge import db
from planner.mcp_server.resources import PROMPTS, TEMPLATES, prompt_get, resource_read, resources_listed
from planner.mcp_server.tools import DEFINITIONS, tool_call
from tracker.errors import BalletError, CredentialError, RateLimitedError, UnavailableError
from tracker.models import ApiKey
from tracker.trust.limits import LIMITER_UNAVAILABLE, agent_request_count
from tracker.web.credentials import KeyScopes, credential_authenticate, credential_of

logger = logging.getLogger(__name__)


PATH = "/mcp"
USER_KEY = "ballet.user"  # where the authenticated user's id rides in the ASGI scope
API_KEY = "ballet.key"  # and its API key (None: the legacy token)
COUNTED_KEY = "ballet.counted"  # False when the request limiter could not count the request
# Tools refused while requests cannot be counted.
WRITES = frozenset(
    {
        "ask_question",
        "withdraw_question",
        "claim_ticket",
        "report",
        "release_claim",
        "propose_changeset",
        "create_knowledge",
        "update_knowledge",
    }
)
INSTRUCTIONS = (
    "Ballet's plan and knowledge base. Every tool names its project by key (such as DEMO): "
    "list_runnable for the tickets ready to work on, get_item for one ticket's description, "
    "acceptance criteria and policy, search_project and search_knowledge to find things, and "
    "ask_question when the plan does not say: the project's planner answers, or asks its humans. "
    "To work on a ticket: claim_ticket, get_brief for everything you need, report progress as you go "
    "(it renews your claim's lease), and report done, blocked or failed when you stop."
)


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str


@dataclass(frozen=True)
class Admitted:
    """Who a request is, as plain data: it rides in the ASGI scope on the event loop, and each tool
    call loads the user on the database threads (docs/architecture.md#one-bridge)."""

    user_id: int
    key: KeyScopes | None  # None: the legacy token, not limited by scopes
    counted: bool = True  # False: the limiter could not count it (the cache is down), so no writes


def admit(authorization: str | None) -> Admitted | Refusal:
    """The active user whose API key or token the request carries, counted against the request limit."""
    credential = credential_of(authorization)
    if credential is None:
        how = "send a Ballet API key as Authorization: Bearer KEY (make one at /keys/)"
        return Refusal(401, "not_authenticated", f"Authentication required: {how}.")
    try:
        user, auth = credential_authenticate(credential)
    except CredentialError as exc:
        return Refusal(401, exc.code, exc.message)
    try:
        # One count with the REST question requests; which tool it calls is not read yet.
        counted = agent_request_count(user_id=user.pk, write=False)
    except RateLimitedError as exc:
        return Refusal(429, exc.code, exc.message)
    return Admitted(user.pk, KeyScopes.of(auth) if isinstance(auth, ApiKey) else None, counted)


async def _list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=list(DEFINITIONS))


async def _call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    scope = ctx.request.scope if ctx.request is not None else {}
    user_id, key = _caller(ctx)
    if params.name not in SCHEMAS:  # a protocol error, not a tool's (the specification's -32602)
        message = f"There is no tool named {params.name[:100]!r}; there are {', '.join(SCHEMAS)}."
        raise MCPError(INVALID_PARAMS, message, {"code": "unknown_tool"})
    try:
        if params.name in WRITES and not scope.get(COUNTED_KEY):
            outcome = ToolOutcome(error_output(UnavailableError.code, LIMITER_UNAVAILABLE), True)
        else:
            outcome = await tool_call(user_id, params.name, params.arguments or {}, key=key)
    except Exception:  # the client gets a readable answer; the log keeps the traceback
        logger.exception("MCP tool %.100s failed", params.name)
        message = f"The tool {params.name[:100]} failed unexpectedly; the error was logged."
        outcome = ToolOutcome(error_output("internal_error", message), True)
    content = outcome.content
    return types.CallToolResult(
        content=[types.TextContent(text=content)],
        structured_content=json.loads(content),  # JSON's own types, whatever the handler returned
        is_error=outcome.is_error,
    )


def _caller(ctx: ServerRequestContext[Any]) -> tuple[int, KeyScopes | None]:
    scope = ctx.request.scope if ctx.request is not None else {}
    user_id = scope.get(USER_KEY)
    assert isinstance(user_id, int), "every request is authenticated before the SDK sees it"
    return user_id, scope.get(API_KEY)


async def _list_resources(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return await db(_or_refused(resources_listed))(*_caller(ctx))


async def _list_resource_templates(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=list(TEMPLATES))


async def _read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    return await db(_or_refused(resource_read))(*_caller(ctx), params.uri)


async def _list_prompts(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=list(PROMPTS))


async def _get_prompt(
    ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    return await db(_or_refused(prompt_get))(*_caller(ctx), params.name, params.arguments)


def _or_refused(read: Callable[..., Any]) -> Callable[..., Any]:
    """``read``, a key lacking its scope answered as the JSON-RPC error a client shows."""

    def reading(*args: Any) -> Any:
        try:
            return read(*args)
        except BalletError as exc:
            raise MCPError(INVALID_PARAMS, exc.message, {"code": exc.code}) from None

    return reading


SCHEMAS = {tool.name: tool.input_schema for tool in DEFINITIONS}


def build_server() -> Server[Any]:
    server: Server[Any] = Server(
        "ballet",
        version="1",
        instructions=INSTRUCTIONS,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        on_list_resources=_list_resources,
        on_list_resource_templates=_list_resource_templates,
        on_read_resource=_read_resource,
        on_list_prompts=_list_prompts,
        on_get_prompt=_get_prompt,
        # What the 2026 transport checks Mcp-Param headers against; without it, it lists the tools
        # for every call.
        get_tool_input_schema=SCHEMAS.get,
    )
    server.middleware = []  # no OpenTelemetry span per message: nothing here exports them
    return server


class Lifetime:
    """The MCP session manager, running from :meth:`start` to :meth:`close` (the server's
    lifespan: ``ballet/lifespan.py``)."""

    def __init__(self, server: Server[Any]) -> None:
        self.server = server
        self._manager: StreamableHTTPSessionManager | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Run the session manager on this event loop."""
        manager = StreamableHTTPSessionManager(
            app=self.server,
            json_response=True,
            stateless=True,
            # Host is checked with ALLOWED_HOSTS before; a key, not a cookie, authenticates,
            # so a page of another origin cannot act for anybody.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        ready = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(
            self._run(manager, ready), name="mcp-session-manager"
        )
        await ready.wait()
        if self._task.done():
            raise RuntimeError("the MCP session manager did not start; see the log")
        self._manager = manager

    def manager(self) -> StreamableHTTPSessionManager:
        if self._manager is None:
            raise RuntimeError("the MCP session manager is not running (ballet/lifespan.py starts it)")
        return self._manager

    @staticmethod
    async def _run(manager: StreamableHTTPSessionManager, ready: asyncio.Event) -> None:
        try:
            async with manager.run():
                ready.set()
                await asyncio.Event().wait()  # until closed
        finally:
            ready.set()  # a manager that failed to start fails the start waiting for it

    async def close(self) -> None:
        """Stop the session manager."""
        task, self._task, self._manager = self._task, None, None
        if task is not None and not task.done():
            await ending.cancelled([task], "the MCP session manager")


async def _answer(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    payload = json.dumps(body).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": payload})


async def refuse(send: Send, refusal: Refusal) -> None:
    """A JSON-RPC error (no id: the body was not read) with Ballet's code in ``data``."""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": refusal.message, "data": {"code": refusal.code}},
    }
    headers = {
        401: [(b"www-authenticate", b'Bearer realm="ballet"')],
        405: [(b"allow", b"POST")],
    }.get(refusal.status, [])
    await _answer(send, refusal.status, body, headers)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def origin_allowed(origin: str, scope: Scope) -> bool:
    """A browser's ``Origin`` may call: the server's own (the Host it was reached at, whatever the
    scheme a proxy in front ended; or the address of ``[email] base_url``), or one of ``[mcp]
    allowed_origins``. Clients that are no browser send none, and are not asked."""
    given = origin.strip().rstrip("/").lower()
    _, _, host = given.partition("://")
    own = {(_header(scope, b"host") or "").lower(), urlsplit(settings.BALLET_BASE_URL).netloc.lower()}
    return (
        given.startswith(("http://", "https://")) and host in own
    ) or given in settings.BALLET_MCP.allowed_origins


class McpApp:
    """The ASGI app of ``/mcp``."""

    def __init__(self, server: Server[Any] | None = None) -> None:
        self.lifetime = Lifetime(server or build_server())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        domain, _ = split_domain_port(_header(scope, b"host") or "")
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            await refuse(send, Refusal(400, "bad_host", "Invalid Host header."))
            return
        origin = _header(scope, b"origin")
        if origin is not None and not origin_allowed(origin, scope):
            # A page of another site: the transport's specification has servers refuse it (403).
            message = (
                f"The origin {origin[:100]} may not call Ballet's MCP server; see [mcp] allowed_origins."
            )
            await refuse(send, Refusal(403, "bad_origin", message))
            return
        if scope["method"] != "POST":
            # Stateless: no stream for the server to talk on (a GET would hold one open, idle, forever).
            await refuse(send, Refusal(405, "method_not_allowed", "Send JSON-RPC requests with POST."))
            return
        admitted = await db(admit)(_header(scope, b"authorization"))
        if isinstance(admitted, Refusal):
            await refuse(send, admitted)
            return
        manager = self.lifetime.manager()
        scoped = {**scope, USER_KEY: admitted.user_id, API_KEY: admitted.key, COUNTED_KEY: admitted.counted}
        await manager.handle_request(scoped, receive, send)


def with_mcp(
    app: Callable[..., Awaitable[None]], mcp: McpApp
) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """``app`` with ``/mcp`` (and ``/mcp/``) served by ``mcp``."""

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") == PATH:
            await mcp(scope, receive, send)
        else:
            await app(scope, receive, send)

    return route


mcp_app = McpApp()  # the process's one: ``ballet/asgi.py`` mounts it
