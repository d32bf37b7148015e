"""The planner's Django admin, for operators: sessions with their transcript, tool calls, usage.

Everything is read-only (the transcript is the audit trail) and project-scoped
by the one permission check: a staff user sees the rows of projects where they
hold ``project.admin`` (owners: what a project's chats cost and do is
operator data), a superuser all; another project's row answers 404.

What was said and read in someone else's chat (its title and summary,
messages, tool inputs and outputs, event details) is shown only to superusers:
the planner read with that person's access, which may reach projects the
project's admin cannot read. A project admin sees who chatted, which tools ran,
their outcomes, durations and tokens. Model and user text is only ever
escaped: by the templates' autoescape and ``format_html``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.contrib.admin import RelatedOnlyFieldListFilter, SimpleListFilter
from django.contrib.admin.utils import unquote
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html

from planner.domain.services.spend import record_cost
from planner.domain.transcripts import transcript
from planner.models import Session, ToolCall, UsageRecord
from planner.web.usage_chart import usd
from tracker.admin.base import Action, BalletAdmin, acting_user
from tracker.trust.permissions import PROJECT_ADMIN, is_superuser

READ_ONLY: Mapping[Action, str | None] = {"view": PROJECT_ADMIN, "add": None, "change": None, "delete": None}


def pretty_json(value: Any) -> str:
    """JSON as a person reads it (still text: the caller escapes it)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def json_block(value: Any) -> str:
    return format_html('<pre class="planner-json">{}</pre>', pretty_json(value))


@dataclass(frozen=True)
class ReadableBlock:
    """One content block of a message, for the transcript: its type, a heading and a body."""

    type: str  # text, tool_use, tool_result, other
    heading: str
    body: str
    is_error: bool = False


def readable_block(block: Any) -> ReadableBlock:
    """A stored (wire-form) block as text; an unexpected shape is shown as its JSON."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return ReadableBlock("text", "text", str(block.get("text", "")))
    if kind == "tool_use":
        heading = f"tool_use {block.get('name', '?')} ({block.get('id', '?')})"
        return ReadableBlock("tool_use", heading, pretty_json(block.get("input", {})))
    if kind == "tool_result":
        content = block.get("content", "")
        body = content if isinstance(content, str) else pretty_json(content)
        error = bool(block.get("is_error"))
        heading = f"tool_result for {block.get('tool_use_id', '?')}{' (error)' if error else ''}"
        return ReadableBlock("tool_result", heading, body, is_error=error)
    return ReadableBlock("other", "block", pretty_json(block))


def reads_content(request: HttpRequest, session_user_id: int) -> bool:
    """May the admin's user read what was said and read in a chat of ``session_user_id``'s?
    Their own, and a superuser everyone's."""
    user = acting_user(request)
    return user.pk == session_user_id or is_superuser(user)


# What an event tells without telling what was said or read: how a turn went.
EVENT_OUTLINE = ("continued", "model", "reason", "outcome")


def readable_transcript(session: Session, *, content: bool = True) -> dict[str, Any]:
    """The session's transcript (``planner.domain.transcripts.transcript``) shaped for the change page;
    without ``content``, its outline: who wrote each message, which tools ran, how and how long,
    which events happened, and nothing that was said or read."""
    read = transcript(session=session)
    messages = [
        {**message, "blocks": [readable_block(b) for b in message["content"] or []] if content else []}
        for message in read["messages"]
    ]
    calls = [
        {
            **call,
            "input": pretty_json(call["input"]) if content else None,
            "output": pretty_json(call["output"]) if content else None,
        }
        for call in read["tool_calls"]
    ]
    events = [{**event, "data": pretty_json(_event_data(event["data"], content))} for event in read["events"]]
    return {"messages": messages, "tool_calls": calls, "events": events, "content": content}


def _event_data(data: Any, content: bool) -> Any:
    if content:
        return data
    return (
        {key: value for key, value in data.items() if key in EVENT_OUTLINE} if isinstance(data, dict) else {}
    )


@admin.register(Session)
class SessionAdmin(BalletAdmin):
    """Sessions of the projects the user administers; the change page is the transcript."""

    rules = READ_ONLY
    list_display = (
        "__str__",
        "title",
        "project",
        "user",
        "state",
        "turn_count",
        "context_tokens",
        "updated_at",
    )
    list_filter = (("project", RelatedOnlyFieldListFilter), "state", ("user", RelatedOnlyFieldListFilter))
    search_fields = ("title",)
    list_select_related = ("project", "user")
    fields = (
        "title",
        "project",
        "user",
        "parent",
        "question",
        "state",
        "turn_count",
        "context_tokens",
        "summary",
        "created_at",
        "updated_at",
    )

    # Someone else's chat, to a project admin: who and how, not what (its title says what).
    outline_list_display = tuple(name for name in list_display if name != "title")
    outline_fields = tuple(name for name in fields if name not in ("title", "summary"))

    def get_list_display(self, request: HttpRequest) -> Any:
        return self.list_display if is_superuser(acting_user(request)) else self.outline_list_display

    def get_search_fields(self, request: HttpRequest) -> Any:
        return self.search_fields if is_superuser(acting_user(request)) else ()

    def get_fields(self, request: HttpRequest, obj: Session | None = None) -> Any:
        if obj is None or reads_content(request, obj.user_id):
            return self.fields
        return self.outline_fields

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        session = self.get_object(request, unquote(object_id))
        if session is not None:  # only a row get_queryset let through: the user may read it
            content = reads_content(request, session.user_id)
            context["transcript"] = readable_transcript(session, content=content)
        return super().change_view(request, object_id, form_url, context)


class OutcomeFilter(SimpleListFilter):
    title = "outcome"
    parameter_name = "outcome"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("ok", "ok"), ("error", "error")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in {"ok", "error"}:
            return queryset.filter(is_error=self.value() == "error")
        return queryset


@admin.register(ToolCall)
class ToolCallAdmin(BalletAdmin):
    """Every tool call of the user's administered projects, slowest first."""

    project_path = "session__project"
    rules = READ_ONLY
    list_display = ("name", "outcome", "duration", "session", "project", "on_behalf_of", "created_at")
    list_filter = ("name", OutcomeFilter, ("session__project", RelatedOnlyFieldListFilter))
    list_select_related = ("session__project", "on_behalf_of")
    ordering = ("-duration_ms", "-pk")
    fields = (
        "session",
        "turn",
        "tool_use_id",
        "name",
        "outcome",
        "duration",
        "actor",
        "on_behalf_of",
        "created_at",
        "input_json",
        "output_json",
    )
    readonly_fields = ("outcome", "duration", "input_json", "output_json")
    # Someone else's call, to a project admin: which tool, how it went, not what it read or wrote.
    outline_fields = tuple(name for name in fields if name not in ("input_json", "output_json"))

    def get_fields(self, request: HttpRequest, obj: ToolCall | None = None) -> Any:
        if obj is None or reads_content(request, obj.session.user_id):
            return self.fields
        return self.outline_fields

    @admin.display(description="outcome", ordering="is_error")
    def outcome(self, obj: ToolCall) -> str:
        return "error" if obj.is_error else "ok"

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj: ToolCall) -> str:
        return f"{obj.duration_ms:,.1f} ms"

    @admin.display(description="project", ordering="session__project__key")
    def project(self, obj: ToolCall) -> str:
        return str(obj.session.project)

    @admin.display(description="input")
    def input_json(self, obj: ToolCall) -> str:
        return json_block(obj.input)

    @admin.display(description="output")
    def output_json(self, obj: ToolCall) -> str:
        return json_block(obj.output)


@admin.register(UsageRecord)
class UsageRecordAdmin(BalletAdmin):
    """Metered model calls, with their estimated cost at the configured prices."""

    rules = READ_ONLY
    list_display = (
        "created_at",
        "project",
        "purpose",
        "model",
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "latency_ms",
        "outcome",
        "estimated_cost",
    )
    list_filter = (("project", RelatedOnlyFieldListFilter), "purpose", "model", "outcome")
    date_hierarchy = "created_at"
    list_select_related = ("project",)
    fields = (
        "project",
        "session",
        "purpose",
        "model",
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "estimated_cost",
        "latency_ms",
        "outcome",
        "error",
        "created_at",
    )
    readonly_fields = ("estimated_cost",)

    @admin.display(description="estimated cost")
    def estimated_cost(self, obj: UsageRecord) -> str:
        cost = record_cost(obj)
        return "unknown (no price)" if cost is None else usd(cost)
