"""The MCP tools: the planner's read tools, the questions and the work tools (``work.py``), each naming
its project (docs/domain.md).

A planner tool runs in its session's project; an MCP client names the project
in every call. A tool's MCP input schema is the planner's schema plus a
required ``project`` string, computed from the planner's spec (never copied).
A call resolves the project with the one permission check (an unknown project
and one the caller cannot read are the same "Project X not found."), strips
``project`` and runs the planner's spec with ``run_tool``: validation, the
tool's permission, the handler, as the token's user outside any planner
session (the activity log says ``user:NAME``). An API key calls a tool only
within its scopes (``SCOPES``: ``read`` for the reads, ``ask`` to ask, ``work`` to claim
and report). A refused
call is an error outcome with the planner's JSON body ``{"error": {"code", "message"}}``.

``ask_question`` and ``get_question`` are specs of the same kind (a schema
without the project, a permission): ``get_question`` runs through ``run_tool``;
``ask_question`` is validated here, then the runner asks (``runner.ask``:
``planner.chat`` is checked there, the sub-chat starts) and the call waits for
the answer up to ``wait_seconds`` on the event loop, holding no thread.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from django.contrib.auth.models import User

from planner.domain.services.agent_questions import (
    MAX_QUESTION_CHARS,
    Asked,
    Withdrawn,
    question_ask,
    question_get,
    question_list,
    question_status,
    question_withdraw,
)
from planner.domain.services.reuse_judge import Verdict
from planner.domain.tools import TOOLS
from planner.domain.tools.base import (
    JsonObject,
    ToolContext,
    ToolError,
    ToolOutcome,
    ToolSpec,
    domain_error,
    error_output,
    input_problem,
    run_tool,
)
from planner.domain.tools.plan import ITEM_KEY
from planner.ground.bridge import db
from planner.live.question_waits import MAX_WAIT_SECONDS, question_await
from planner.live.runner import runner
from planner.mcp_server.events import WAIT_FOR_EVENTS, event_types, events_waited
from planner.mcp_server.reads import LIMIT, OFFSET, PAGING, READS, paged
from planner.mcp_server.work import RELEASE_CLAIM, WORK_SPECS, release_spec
from planner.models import Question, QuestionStatus
from planner.web.serializers import QuestionSerializer
from tracker.errors import BalletError, CredentialError
from tracker.event_selectors import EventPage, events_after
from tracker.inputs import MAX_IDEMPOTENCY_KEY
from tracker.models import Project, Scope
from tracker.selectors import project_by_id, project_get
from tracker.trust.permissions import PLANNER_CHAT, TRACKER_READ, access_scope, key_bind, require
from tracker.web.credentials import INACTIVE, KeyScopes, scope_require

READ_TOOLS = (
    "list_runnable",
    "get_item",
    "list_items",
    "search_project",
    "search_knowledge",
    "get_knowledge",
    # The repository reads: the planner's own (a project without a repository answers no_repository).
    "repo_tree",
    "repo_read",
    "repo_search",
    "repo_log",
)
# The planner's planning tools, for keys with the plan scope (list_changesets reads): the planner's
# own handlers and validation; a changeset proposed here waits for a human as any other (four eyes).
PLAN_TOOLS = ("list_changesets", "propose_changeset", "create_knowledge", "update_knowledge")
PROJECT_KEY_CHARS = Project._meta.get_field("key").max_length or 10
PROJECT: JsonObject = {
    "type": "string",
    "minLength": 1,
    "maxLength": PROJECT_KEY_CHARS,
    "description": "The key of the project, such as DEMO.",
}
PROJECT_HINT = "the key of a project you can read, such as DEMO"


def with_project(schema: JsonObject) -> JsonObject:
    """A planner tool's input ``schema`` with the required ``project`` in front."""
    derived = copy.deepcopy(schema)
    properties = derived.get("properties", {})
    assert "project" not in properties, "a planner tool's own input cannot be named project"
    derived["properties"] = {"project": PROJECT, **properties}
    derived["required"] = ["project", *derived.get("required", [])]
    return derived


def _definition(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        description=spec.description,
        input_schema=with_project(spec.input_schema),
        annotations=types.ToolAnnotations(read_only_hint=not spec.writes, open_world_hint=False),
    )


ASK_WAIT_SECONDS = 30
WAIT: JsonObject = {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS}


def _asked(ctx: ToolContext, args: JsonObject) -> JsonObject:
    raise ToolError("internal_error", "ask_question is asked through the runner, never run as a handler.")


def _question(ctx: ToolContext, args: JsonObject) -> JsonObject:
    return _serialized(question_get(user=ctx.user, project=ctx.project, question_id=args["id"]))


def _serialized(question: Question) -> JsonObject:
    return dict(QuestionSerializer(question).data)


ASK_QUESTION = ToolSpec(
    name="ask_question",
    description="Ask the project's planner about the project, or about one item (its key in item), "
    "when the plan does not say. The planner answers from the plan and knowledge base, or asks the "
    "project's humans first. Returns the question with its answer if the answer comes within "
    f"wait_seconds (default {ASK_WAIT_SECONDS}, at most {MAX_WAIT_SECONDS}); else its id with status "
    "open: read the answer later with get_question. Answers are remembered: if an earlier question about "
    "the same item (or the project) meant the same, its answer comes back at once with reused true and "
    "reused_from its id; fresh true asks anyway. Needs planner.chat (members).",
    input_schema={
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
            "item": ITEM_KEY,
            "wait_seconds": WAIT,
            "idempotency_key": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_IDEMPOTENCY_KEY,
                "description": "Your own key for this question: asking again with it (a retry) returns "
                "the same question instead of asking twice.",
            },
            "fresh": {
                "type": "boolean",
                "description": "Ask the planner even if an answered question about the same item means the "
                "same (by default its answer comes back at once, with reused true).",
            },
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    permission=PLANNER_CHAT,
    handler=_asked,
    writes=True,
)

GET_QUESTION = ToolSpec(
    name="get_question",
    description="Read a question asked with ask_question: its status (open, needs_human, answered, "
    "withdrawn), the answer and who answered; needs_human: the planner could not answer and the "
    "project's humans will (reason says why). With wait_seconds (at most "
    f"{MAX_WAIT_SECONDS}), an open question is read once it is settled or when the wait is over.",
    input_schema={
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": 1}, "wait_seconds": WAIT},
        "required": ["id"],
        "additionalProperties": False,
    },
    permission=TRACKER_READ,
    handler=_question,
)


def _questions(ctx: ToolContext, args: JsonObject) -> JsonObject:
    asker = ctx.user.get_username() if args.get("mine", True) else args.get("asker")
    rows = question_list(user=ctx.user, project=ctx.project, status=args.get("status"), asker=asker)
    return paged(rows, QuestionSerializer, args)


def _withdrawn_handler(ctx: ToolContext, args: JsonObject) -> JsonObject:
    raise ToolError("internal_error", "withdraw_question runs through the runner, never as a handler.")


LIST_QUESTIONS = ToolSpec(
    name="list_questions",
    description="The project's questions, newest first: each with its status, answer and who answered "
    "(as get_question reads it). Your own unless mine is false (then everyone's, or asker's); status "
    f"narrows to one status. {PAGING}",
    input_schema={
        "type": "object",
        "properties": {
            "status": {"enum": list(QuestionStatus.values)},
            "mine": {"type": "boolean", "description": "Only your own questions (the default)."},
            "asker": {"type": "string", "minLength": 1, "maxLength": 150, "description": "With mine false."},
            "limit": LIMIT,
            "offset": OFFSET,
        },
        "additionalProperties": False,
    },
    permission=TRACKER_READ,
    handler=_questions,
)

WITHDRAW_QUESTION = ToolSpec(
    name="withdraw_question",
    description="Withdraw a question you asked that is still open or waits for a human (a project admin "
    "may withdraw anyone's): it is settled as withdrawn and its sub-chat stops. Returns the question.",
    input_schema={
        "type": "object",
        "properties": {"id": {"type": "integer", "minimum": 1}},
        "required": ["id"],
        "additionalProperties": False,
    },
    permission=TRACKER_READ,
    handler=_withdrawn_handler,
    writes=True,
)

SPECS: dict[str, ToolSpec] = {
    **{name: READS.get(name, TOOLS[name]) for name in READ_TOOLS},
    **{name: READS.get(name, TOOLS[name]) for name in PLAN_TOOLS},
    ASK_QUESTION.name: ASK_QUESTION,
    GET_QUESTION.name: GET_QUESTION,
    LIST_QUESTIONS.name: LIST_QUESTIONS,
    WITHDRAW_QUESTION.name: WITHDRAW_QUESTION,
    **{spec.name: spec for spec in WORK_SPECS},
    WAIT_FOR_EVENTS.name: WAIT_FOR_EVENTS,
}
DEFINITIONS: tuple[types.Tool, ...] = tuple(_definition(spec) for spec in SPECS.values())
# The scope an API key needs for each tool.
SCOPES: dict[str, Scope] = {
    **dict.fromkeys(READ_TOOLS, Scope.READ),
    "list_changesets": Scope.READ,
    **dict.fromkeys(PLAN_TOOLS[1:], Scope.PLAN),
    ASK_QUESTION.name: Scope.ASK,
    GET_QUESTION.name: Scope.READ,
    LIST_QUESTIONS.name: Scope.READ,
    WITHDRAW_QUESTION.name: Scope.ASK,
    "claim_ticket": Scope.WORK,
    "get_brief": Scope.READ,
    "report": Scope.WORK,
    "release_claim": Scope.WORK,
    WAIT_FOR_EVENTS.name: Scope.READ,
}
assert SCOPES.keys() == SPECS.keys(), "every tool names the scope it needs"


def project_named(user: User, arguments: JsonObject) -> tuple[Project, JsonObject]:
    """The project the call names, if ``user`` may read it, and the rest of the arguments."""
    key = arguments.get("project")
    if not isinstance(key, str) or not key:
        raise ToolError("invalid_input", f"project: required: {PROJECT_HINT}.")
    if len(key) > PROJECT_KEY_CHARS:
        raise ToolError("invalid_input", f"project: at most {PROJECT_KEY_CHARS} characters: {PROJECT_HINT}.")
    project = project_get(key=key)
    require(user, project, TRACKER_READ)  # unreadable answers as unknown does: "Project X not found."
    return project, {name: value for name, value in arguments.items() if name != "project"}


def refused(exc: BalletError) -> ToolOutcome:
    return ToolOutcome(domain_error(exc), True)


def user_of(user_id: int, key: KeyScopes | None) -> User:
    """The caller, loaded for the call at hand (the event loop holds its id alone), bound to the
    projects of its key: elsewhere every check answers as if the project did not exist."""
    user = User.objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        raise CredentialError(INACTIVE)
    return key_bind(user, key.projects) if key is not None else user


@dataclass(frozen=True)
class _Ran:
    """A tool call's outcome, and the project it named (None: refused before one was read)."""

    project_id: int | None
    outcome: ToolOutcome


@db
def _run(user_id: int, spec: ToolSpec, arguments: JsonObject, key: KeyScopes | None) -> _Ran:
    with access_scope():
        try:
            user = user_of(user_id, key)
            project, rest = project_named(user, arguments)
        except BalletError as exc:
            return _Ran(None, refused(exc))
        return _Ran(project.pk, run_tool(spec, spec.name, rest, ToolContext(user=user, project=project)))


def _checked(spec: ToolSpec, user_id: int, arguments: JsonObject, key: KeyScopes | None) -> _Checked:
    """The caller, the project the call names and its input, checked against ``spec``'s schema: for
    the tools that run through the runner rather than as handlers."""
    user = user_of(user_id, key)
    with access_scope():
        project, args = project_named(user, arguments)
    problem = input_problem(spec, args)
    if problem:
        raise ToolError("invalid_input", problem)
    return _Checked(user, project, args)


@dataclass(frozen=True)
class _Checked:
    user: User
    project: Project
    args: JsonObject


def _asking(
    user_id: int, arguments: JsonObject, key: KeyScopes | None, verdict: Verdict | None = None
) -> Asked:
    """``ask_question``'s call on the database threads: the project, the input, the question (or,
    without the reuse judge's ``verdict``, the judge's call to make first: ``runner.ask``)."""
    checked = _checked(ASK_QUESTION, user_id, arguments, key)
    user, project, args = checked.user, checked.project, checked.args
    return question_ask(
        user=user,
        project=project,
        text=args["text"],
        item_key=args.get("item"),
        idempotency_key=args.get("idempotency_key"),
        fresh=args.get("fresh", False),
        verdict=verdict,
    )


async def _ask(user_id: int, arguments: JsonObject, key: KeyScopes | None) -> ToolOutcome:
    try:
        asked = await runner.ask(functools.partial(_asking, user_id, arguments, key))
    except BalletError as exc:
        return refused(exc)
    seconds = arguments.get("wait_seconds", ASK_WAIT_SECONDS)
    return await _awaited(user_id, asked.project_id, asked.question_id, seconds, key)


async def _get(user_id: int, arguments: JsonObject, key: KeyScopes | None) -> ToolOutcome:
    ran = await _run(user_id, GET_QUESTION, arguments, key)
    outcome, seconds = ran.outcome, arguments.get("wait_seconds", 0)
    if (
        ran.project_id is None
        or outcome.is_error
        or not seconds
        or outcome.output["status"] != QuestionStatus.OPEN
    ):
        return outcome
    await runner.start_waiting(force=True)  # the running-turn limits may have kept it waiting
    return await _awaited(user_id, ran.project_id, outcome.output["id"], seconds, key)


async def _awaited(
    user_id: int, project_id: int, question_id: int, seconds: float, key: KeyScopes | None
) -> ToolOutcome:
    """The question once answered or withdrawn, or as it is after ``seconds``."""
    settled = functools.partial(question_status, user=user_id, project_id=project_id, question_id=question_id)
    try:
        await question_await(question_id=question_id, status=settled, seconds=seconds)
        return ToolOutcome(await db(_read)(user_id, project_id, question_id, key), False)
    except BalletError as exc:
        return refused(exc)


def _read(user_id: int, project_id: int, question_id: int, key: KeyScopes | None) -> JsonObject:
    """The question serialized as it is now, for its reader."""
    user = user_of(user_id, key)
    found = question_get(user=user, project=project_by_id(project_id), question_id=question_id)
    return _serialized(found)


def _withdrawing(user_id: int, arguments: JsonObject, key: KeyScopes | None) -> Withdrawn:
    """``withdraw_question``'s call on the database threads: the project, the input, the withdrawal."""
    checked = _checked(WITHDRAW_QUESTION, user_id, arguments, key)
    return question_withdraw(user=checked.user, project=checked.project, question_id=checked.args["id"])


async def _withdraw(user_id: int, arguments: JsonObject, key: KeyScopes | None) -> ToolOutcome:
    try:
        withdrawn = await runner.withdraw(functools.partial(_withdrawing, user_id, arguments, key))
        project_id = await db(_project_of)(withdrawn.question_id)
        return ToolOutcome(await db(_read)(user_id, project_id, withdrawn.question_id, key), False)
    except BalletError as exc:
        return refused(exc)


def _project_of(question_id: int) -> int:
    return int(Question.objects.values_list("project_id", flat=True).get(pk=question_id))


async def _events(user_id: int, arguments: JsonObject, key: KeyScopes | None) -> ToolOutcome:
    """``wait_for_events``: read as any tool; wait for the first event when there was none."""
    ran = await _run(user_id, WAIT_FOR_EVENTS, arguments, key)
    if ran.project_id is None:
        return ran.outcome
    project_id, types = ran.project_id, event_types(arguments)

    def read(after: int) -> EventPage:
        with access_scope():
            user = user_of(user_id, key)
            return events_after(user=user, project=project_by_id(project_id), after=after, types=types)

    try:
        return await events_waited(ran.outcome, project_id=project_id, arguments=arguments, read=read)
    except BalletError as exc:
        return refused(exc)


# The tools that run on the event loop: they wait, or stop a turn.
WAITING = {
    ASK_QUESTION.name: _ask,
    GET_QUESTION.name: _get,
    WITHDRAW_QUESTION.name: _withdraw,
    WAIT_FOR_EVENTS.name: _events,
}


async def tool_call(user_id: int, name: str, arguments: Any, *, key: KeyScopes | None) -> ToolOutcome:
    """Run the MCP tool ``name`` as the user ``user_id`` within the scopes of ``key`` (None: the
    legacy token); a refusal comes back as an error outcome."""
    spec = SPECS.get(name)
    if spec is None:
        message = f"There is no tool named {name[:100]!r}; there are {', '.join(SPECS)}."
        return ToolOutcome(error_output("unknown_tool", message), True)
    try:
        scope_require(key, SCOPES[name], f"the tool {name}")
    except BalletError as exc:
        return refused(exc)
    if not isinstance(arguments, dict):
        return ToolOutcome(error_output("invalid_input", "The input must be a JSON object."), True)
    waits = WAITING.get(name)  # the tools that may wait, on the event loop
    if waits is not None:
        return await waits(user_id, arguments, key)
    if spec is RELEASE_CLAIM:  # with an API key only the holder lets a claim go
        spec = release_spec(by_key=key is not None)
    return (await _run(user_id, spec, arguments, key)).outcome
