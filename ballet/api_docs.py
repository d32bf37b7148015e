"""The API's doc pages, Swagger UI and ReDoc, served whole by Ballet (docs/operations.md#api-docs).

Their scripts and styles come from drf-spectacular-sidecar through the static files, so the pages
work offline and name no other host. Each page carries a Content-Security-Policy as strict as the
pages allow: scripts from this origin only (Swagger UI's start script is a file of its own, the
split view's ``?script``), nothing framed. ReDoc styles itself with ``<style>`` elements it writes
at run time, so its policy allows inline styles (never inline scripts). Its bundle also draws its
maker's logo from their CDN, whatever the options say: ``ballet/static/ballet/redoc-local.js``,
loaded first, keeps that image from asking another host.

The schema groups its operations by what they are about (``TAGS``), read from their paths by
``tag_by_path``, so a new endpoint lands in its group with nothing to write; one whose path no
group claims fails the schema's tests (tests/api/test_schema_tags.py).
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.request import Request
from rest_framework.response import Response


def doc_page_policy(*, inline_styles: bool) -> str:
    styles = "style-src 'self' 'unsafe-inline'" if inline_styles else "style-src 'self'"
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            styles,
            "img-src 'self' data:",
            "font-src 'self' data:",
            "connect-src 'self'",
            # ReDoc searches in a worker it starts from a blob.
            "worker-src 'self' blob:",
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )


API_PREFIX = "/api/v1"
KEY = r"/projects/\{key\}"  # a project's endpoints: the part after it says what they are about

# The schema's groups in the order the doc pages show them: (name, description, the paths under
# /api/v1 it claims). No two claim one path: an item's claim is a claim, not the plan.
TAGS: tuple[tuple[str, str, str], ...] = (
    ("root", "Where the API starts: open to anyone, no credential needed.", r"^/$"),
    ("projects", "The projects you can read, and a project's own settings.", rf"^/projects/$|^{KEY}/$"),
    (
        "plan",
        "Milestones, epics and tickets, their comments and briefs; what can run; search.",
        rf"^{KEY}/(items/(?![^/]+/claim/$)|runnable/|search/)",
    ),
    (
        "claims",
        "Agents' claims on tickets: take, renew, report, release.",
        rf"^{KEY}/(claims/|items/[^/]+/claim/$)",
    ),
    (
        "changesets",
        "Proposed changes to the plan, reviewed, then applied or rejected.",
        rf"^{KEY}/changesets/",
    ),
    (
        "questions",
        "Agents' questions, answered by the knowledge base or by the project's humans.",
        rf"^{KEY}/questions/",
    ),
    (
        "planner",
        "Planner chats over REST, and the project's metered model use.",
        rf"^/planner/|^{KEY}/usage/",
    ),
    ("skills", "The project's skills: versioned instructions for agents.", rf"^{KEY}/skills/"),
    ("knowledge", "The knowledge base: decisions, conventions, facts.", r"^/knowledge/"),
    (
        "members",
        "Who works on a project: members, invitations, agents.",
        rf"^{KEY}/(members|invitations|agents)/|^/invitations/",
    ),
    ("keys", "API keys: your own, and those of a project's agents.", rf"^/keys/|^{KEY}/keys/"),
    ("events", "The project's event feed, as pages and as a stream.", rf"^{KEY}/events/"),
    ("webhooks", "Webhooks: events delivered to your URLs, signed, retried.", rf"^{KEY}/webhooks/"),
    ("repositories", "Linked Git repositories, mirrored for the planner to read.", rf"^{KEY}/repositories/"),
    ("inbox", "What waits for you across your projects.", r"^/inbox/"),
    ("auth", "Legacy tokens (deprecated: use an API key).", r"^/auth/"),
)
_CLAIMS = [(name, re.compile(pattern)) for name, _, pattern in TAGS]


def tag_of(path: str) -> str | None:
    """The group of the operation at ``path`` (as the schema writes it), None if no group claims it."""
    if not path.startswith(API_PREFIX):
        return None
    rest = path.removeprefix(API_PREFIX)
    return next((name for name, claim in _CLAIMS if claim.search(rest)), None)


def tag_by_path(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular's postprocessing hook: each operation in the group its path names, the
    groups described and in order. An operation no group claims keeps drf-spectacular's tag."""
    for path, operations in result.get("paths", {}).items():
        if (tag := tag_of(path)) is not None:
            for operation in operations.values():
                operation["tags"] = [tag]
    result["tags"] = [{"name": name, "description": description} for name, description, _ in TAGS]
    return result


class SwaggerDocsPage(SpectacularSwaggerSplitView):
    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = doc_page_policy(inline_styles=False)
        return response


class RedocDocsPage(SpectacularRedocView):
    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = doc_page_policy(inline_styles=True)
        return response
