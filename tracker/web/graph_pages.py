"""``/projects/{key}/graph.svg``: a project's dependency graph as a standalone SVG document.

Thin: the one permission check picks the project (404 for whoever cannot read it, as for a
project that does not exist), ``project_graph`` reads the plan, ``graph_document`` draws it.
The document embeds its stylesheet; its CSP lets that one ``<style>`` apply by its hash and
nothing else load or run.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from tracker.graph.plan_graph import project_graph
from tracker.graph.svg import embedded_css_hash, graph_document, item_href
from tracker.web.page_helpers import page_project, page_user


@require_GET
@login_required
def plan_graph(request: HttpRequest, key: str) -> HttpResponse:
    """The project's tickets as boxes, its dependencies as arrows; each box links to its ticket."""
    project = page_project(page_user(request), key)
    document = graph_document(
        project_graph(project=project),
        href=item_href(project),
        title=f"Dependency graph of {project.key}: {project.name}",
    )
    response = HttpResponse(document, content_type="image/svg+xml; charset=utf-8")
    response["Content-Security-Policy"] = (
        f"default-src 'none'; style-src '{embedded_css_hash()}'; base-uri 'none'; frame-ancestors 'self'"
    )
    response["Cache-Control"] = "private, no-cache"
    return response
