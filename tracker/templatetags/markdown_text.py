"""``{{ text|markdown:project }}``: Markdown a person or an agent wrote (a description, a report,
a rationale, an answer), rendered safely on the server (``ballet.markdown``), with the keys of
``project``'s items that exist linked to their pages, and the commits and files of its repositories
(``tracker.repos.refs``) to theirs."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from ballet.markdown import render
from tracker.comment_selectors import existing_keys
from tracker.models import Project
from tracker.page_links import item_url
from tracker.repos.refs import code_links, linked_html

register = template.Library()


@register.filter
def markdown(text: object, project: Project | None = None) -> SafeString:
    body = text if isinstance(text, str) else ""
    if project is None:
        return render(body)
    keys = existing_keys(project=project, texts=[body])
    html = render(body, link_key=lambda key: item_url(project.key, key) if key in keys else None)
    code = code_links(project=project, texts=[body])
    return mark_safe(linked_html(html, code)) if code else html  # noqa: S308 - sanitized above
