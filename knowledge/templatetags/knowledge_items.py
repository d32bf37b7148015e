"""Template tags of the knowledge base for the tracker's pages: the entries linked to an item that
the reader may read (docs/domain.md#knowledge).

The tracker's ticket page shows them without importing the knowledge app.
"""

from __future__ import annotations

from typing import Any

from django import template

from knowledge.models import KnowledgeEntry
from knowledge.selectors import knowledge_visible
from tracker.models import Item

register = template.Library()

MAX_SHOWN = 50


@register.simple_tag(takes_context=True)
def item_knowledge(context: dict[str, Any], item: Item) -> list[KnowledgeEntry]:
    """``{% item_knowledge item as entries %}``: entries linked to ``item`` the request's user reads,
    latest change first; an entry also linked to a project the reader cannot read is left out."""
    user = getattr(context.get("request"), "user", None)
    if user is None or not user.is_authenticated:
        return []
    entries = knowledge_visible(user=user).filter(items=item)
    return list(entries.order_by("-updated_at", "-pk")[:MAX_SHOWN])
