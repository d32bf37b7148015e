"""Browser pages of the planner: a project's chat list and the chat itself.

Views are thin: the one permission check picks the project, the selectors
find the sessions, ``session_create`` opens one. The chat page is a shell the
external ``chat.js`` fills from the REST transcript and the WebSocket; it
carries its data in ``data-`` attributes and a strict Content-Security-Policy
(no inline script, no inline style), so model output can never run.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from planner.domain.refs import refs_resolve
from planner.domain.selectors import project_provider, session_get, session_list, session_waiting_count
from planner.domain.services.agent_questions import question_answer_human
from planner.domain.services.answer_confirm import awaiting_confirmation, question_confirm
from planner.domain.services.chats import session_unarchive
from planner.domain.services.human_requests import may_decide
from planner.domain.services.sessions import MAX_TITLE, session_create
from planner.domain.services.spend import daily_usage, project_today
from planner.domain.tools import TOOLS
from planner.domain.transcripts import questions_joined
from planner.models import QuestionStatus, Session
from planner.web.usage_chart import BAR_WIDTH, today_figures, usage_chart
from tracker.errors import (
    BalletError,
    InvalidStateError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from tracker.models import Project
from tracker.trust.permissions import (
    CHANGESET_APPLY,
    PLANNER_CHAT,
    PROJECT_ADMIN,
    access_scope,
    has_permission,
)
from tracker.web.page_helpers import page_project, page_user, with_socket_csp

MAX_LISTED = 100
RECENT_CHATS = 15  # in the chat page's sidebar
USAGE_DAYS = 30  # the usage chart's days, today included


@require_http_methods(["GET", "POST"])
@login_required
@with_socket_csp
def chat_list(request: HttpRequest, key: str) -> HttpResponse:
    """``/projects/{key}/chat/``: the user's chats in the project (``?q=``: those whose title
    contains it), archived ones left out; POST opens a new one."""
    user = page_user(request)
    if request.method == "POST":
        project = page_project(user, key, PLANNER_CHAT)
        session = session_create(user=user, project=project)
        return HttpResponseRedirect(reverse("planner-chat", args=[project.key, session.pk]))
    project = page_project(user, key)
    query = request.GET.get("q", "").replace("\x00", "")[:MAX_TITLE]
    archived = request.GET.get("archived") == "1"  # the archived chats, to unarchive one
    listed = session_list(user=user, project=project, query=query, archived=archived)
    listed = listed.select_related("question__asker", "question__item")
    sessions = list(listed.order_by("-waiting", "-updated_at")[: MAX_LISTED + 1])
    context = {
        "project": project,
        "query": query.strip(),
        "archived": archived,
        "sessions": _nested(sessions[:MAX_LISTED]),
        "waiting": session_waiting_count(user=user, project=project),
        "more": len(sessions) > MAX_LISTED,
        "can_chat": has_permission(user, project, PLANNER_CHAT),
        # Whoever reads the project reads its usage, as on projects/{key}/usage/ (tracker.read).
        "chart": usage_chart(daily_usage(project=project, days=USAGE_DAYS)),
        "today": today_figures(project_today(project=project)),
        "bar_width": BAR_WIDTH,
        **_demo_notice(user, project),
    }
    return render(request, "planner/chat_list.html", context)


def _nested(sessions: list[Session]) -> list[Session]:
    """The chats to list, each sub-chat the planner started under its parent (``subchats``, in
    the same order) when the parent is listed too (docs/domain.md#sub-chats)."""
    listed = {session.pk for session in sessions}
    for session in sessions:
        session.subchats = [child for child in sessions if child.parent_id == session.pk]  # type: ignore[attr-defined]
    return [session for session in sessions if session.parent_id not in listed]


@require_GET
@login_required
@with_socket_csp
def chat(request: HttpRequest, key: str, session: uuid.UUID) -> HttpResponse:
    """``/projects/{key}/chat/{session}/``: the page shell ``chat.js`` brings to life."""
    user = page_user(request)
    project = page_project(user, key)
    found = _session(user, project, session)
    can_chat = has_permission(user, project, PLANNER_CHAT)
    context = {
        "project": project,
        "session": found,
        "question": found.question,
        "joined": questions_joined(question_id=found.question_id) if found.question_id else 0,
        "can_chat": can_chat,
        "can_answer_question": can_chat
        and found.question is not None
        and found.question.status == QuestionStatus.NEEDS_HUMAN,
        "can_confirm": can_chat
        and found.question is not None
        and found.question.human_id == user.pk
        and awaiting_confirmation(found.question),
        "can_send": can_chat and found.user_id == user.pk and found.archived_at is None,
        "can_manage": can_chat and found.user_id == user.pk,  # rename, archive: the owner's
        "approves": _approvable(found, user),
        # Apply / Reject on the changeset cards; four eyes is the server's to refuse (docs/domain.md).
        "can_apply": has_permission(user, project, CHANGESET_APPLY),
        "refs_url": reverse("planner-refs", args=[project.key]),
        "changesets_api": reverse("tracker-api:changeset-list", args=[project.key]),
        "api_url": reverse("planner-api:session-detail", kwargs={"session": str(found.pk)}),
        "ws_path": f"/ws/planner/sessions/{found.pk}/",
        "recent": _recent(user, project),
        **_demo_notice(user, project),
    }
    return render(request, "planner/chat.html", context)


def _recent(user: User, project: Project) -> list[Session]:
    """The chat page's sidebar: the chats of the chat list (one query however many), those
    waiting for the reader first."""
    listed = session_list(user=user, project=project).select_related("question__asker")
    return list(listed.order_by("-waiting", "-updated_at")[:RECENT_CHATS])


@require_POST
@login_required
def chat_unarchive(request: HttpRequest, key: str, session: uuid.UUID) -> HttpResponse:
    """Bring an archived chat back (its owner, with ``planner.chat``), then open it."""
    user = page_user(request)
    project = page_project(user, key, PLANNER_CHAT)
    found = _session(user, project, session)
    try:
        session_unarchive(session_id=found.pk, user=user)
    except NotFoundError as exc:  # someone else's chat: as for renaming, it does not exist for them
        raise Http404(exc.message) from exc
    return HttpResponseRedirect(reverse("planner-chat", args=[project.key, found.pk]))


@require_GET
@login_required
def refs(request: HttpRequest, key: str) -> JsonResponse:
    """``/projects/{key}/refs/?items=DEMO-1,OTHER-3&changesets=7&knowledge=12&code=abc1234,a/b.py``:
    those the chat names that exist and the reader may see, with their pages' addresses, to link them."""
    user = page_user(request)
    project = page_project(user, key)
    found = refs_resolve(
        user=user,
        project=project,
        items=request.GET.get("items"),
        changesets=request.GET.get("changesets"),
        knowledge=request.GET.get("knowledge"),
        code=request.GET.get("code"),
    )
    return JsonResponse(found, headers={"Cache-Control": "private, no-store"})


@require_POST
@login_required
def question_answer(request: HttpRequest, key: str, session: uuid.UUID) -> HttpResponse:
    """A member answers, from its sub-chat, a question the planner left to the project's humans
    (kept as a decision unless "one-off" is ticked, docs/domain.md#agents-questions); back to the
    sub-chat, which shows the answer (or why it was refused)."""
    answer, one_off = request.POST.get("answer"), request.POST.get("one_off") == "on"  # the checkbox
    return _on_question(
        request,
        key,
        session,
        lambda user, project, question_id: question_answer_human(
            user=user, project=project, question_id=question_id, answer=answer, one_off=one_off
        ),
    )


@require_POST
@login_required
def question_confirm_page(request: HttpRequest, key: str, session: uuid.UUID) -> HttpResponse:
    """The human the planner answered for confirms its words, from the sub-chat (kept as their
    decision, docs/domain.md#agents-questions); back to the sub-chat."""
    return _on_question(
        request,
        key,
        session,
        lambda user, project, question_id: question_confirm(
            user=user, project=project, question_id=question_id
        ),
    )


def _on_question(
    request: HttpRequest, key: str, session: uuid.UUID, act: Callable[[User, Project, int], object]
) -> HttpResponse:
    """``act`` on the question of the sub-chat ``session`` as the member signed in; back to the
    sub-chat, or a page saying why it was refused."""
    user = page_user(request)
    project = page_project(user, key, PLANNER_CHAT)
    found = _session(user, project, session)
    if found.question_id is None:
        raise Http404("This chat answers no question.")
    back = reverse("planner-chat", args=[project.key, found.pk])
    try:
        act(user, project, found.question_id)
    except (ValidationError, InvalidStateError, PermissionDeniedError) as exc:
        return render(
            request,
            "planner/question_refused.html",
            {"project": project, "message": _first_error(exc), "back": back},
            status=exc.status,
        )
    return HttpResponseRedirect(back)


def _demo_notice(user: User, project: Project) -> dict[str, bool]:
    """Whether the page says the demo planner answers here, and links its reader to the credential."""
    return {
        "demo": project_provider(project) == "demo",
        "can_set_credential": has_permission(user, project, PROJECT_ADMIN),
    }


def _first_error(exc: BalletError) -> str:
    if isinstance(exc, ValidationError):
        return " ".join(exc.messages)
    return exc.message


def _approvable(session: Session, user: User) -> str:
    """The tools whose calls ``user`` may approve or decline in ``session``, space-separated."""
    with access_scope():
        return " ".join(sorted(name for name in TOOLS if may_decide(session, name, user)))


def _session(user: User, project: Project, session_id: uuid.UUID) -> Session:
    try:
        found = session_get(user=user, session_id=session_id)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    if found.project_id != project.pk:
        raise Http404("Session not found.")
    return found
