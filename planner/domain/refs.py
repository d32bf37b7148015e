"""Which references named in a chat exist and may be read: the chat turns only those into links.

The chat page finds item keys (``DEMO-12``), changeset numbers, knowledge ids, commit hashes and
repository paths in what it shows (model text included) and asks ``planner.web.pages.refs`` which
of them are real and readable by the person reading. The answer carries each link's address, built
by ``tracker.page_links`` (a commit's or a file's by ``tracker.repos.refs``): a link in the chat
never points where the model wrote, only where the server says the thing lives.
A reference that names nothing, or something the reader may not see, is left out, so it stays
plain text and says nothing about what exists elsewhere.
"""

from __future__ import annotations

import re
from typing import TypedDict

from knowledge.selectors import knowledge_visible
from tracker.inputs import MAX_BIG_ID, MAX_INT, ascii_number
from tracker.models import Changeset, Project
from tracker.page_links import changeset_url, item_url, knowledge_url
from tracker.repos.refs import code_links, code_token
from tracker.selectors import items_found_by_keys
from tracker.trust.permissions import Principal

MAX_REFS = 200  # of each kind in one request; the page asks again for more
ITEM_KEY = re.compile(r"[A-Z][A-Z0-9]{1,9}-[0-9]{1,10}")


class ItemRef(TypedDict):
    url: str
    title: str
    state: str


class ChangesetRef(TypedDict):
    url: str
    title: str
    status: str


class KnowledgeRef(TypedDict):
    url: str
    title: str


class CodeRef(TypedDict):
    url: str
    title: str


class Refs(TypedDict):
    items: dict[str, ItemRef]
    changesets: dict[str, ChangesetRef]
    knowledge: dict[str, KnowledgeRef]
    code: dict[str, CodeRef]


def _listed(raw: str | None) -> list[str]:
    """The distinct comma-separated values of a query parameter, at most MAX_REFS of them."""
    values = (raw or "")[: MAX_REFS * 24].split(",", MAX_REFS * 2)
    return list(dict.fromkeys(v.strip() for v in values if v.strip()))[:MAX_REFS]


def parse_keys(raw: str | None) -> list[str]:
    """The well-formed item keys in ``raw``; anything else is ignored."""
    return [key for key in _listed(raw) if ITEM_KEY.fullmatch(key)]


def parse_numbers(raw: str | None, *, maximum: int) -> list[int]:
    """The numbers in 1..``maximum`` that ``raw`` lists (``7``, ``#7``); anything else is ignored."""
    numbers = (ascii_number(value.removeprefix("#"), maximum=maximum) for value in _listed(raw))
    return [number for number in numbers if number is not None]


def items_resolve(*, user: Principal, keys: list[str]) -> dict[str, ItemRef]:
    """The items ``keys`` name in projects ``user`` can read, by key; in two queries."""
    return {
        key: {"url": item_url(item.project.key, key), "title": item.title, "state": item.state}
        for key, item in items_found_by_keys(user=user, keys=keys).items()
    }


def changesets_resolve(*, project: Project, numbers: list[int]) -> dict[str, ChangesetRef]:
    """The changesets of ``project`` among ``numbers``, by number; in one query."""
    if not numbers:
        return {}
    found = Changeset.objects.filter(project=project, number__in=numbers).only("number", "title", "status")
    return {
        str(c.number): {"url": changeset_url(project.key, c.number), "title": c.title, "status": c.status}
        for c in found
    }


def knowledge_resolve(*, user: Principal, project: Project, ids: list[int]) -> dict[str, KnowledgeRef]:
    """The entries of the project's organization among ``ids`` that ``user`` may read; one query."""
    if not ids:
        return {}
    found = knowledge_visible(user=user).filter(organization_id=project.organization_id, pk__in=ids)
    return {
        str(entry.pk): {"url": knowledge_url(project.key, entry.pk), "title": entry.title}
        for entry in found.select_related(None).only("pk", "title")
    }


def code_resolve(*, project: Project, tokens: list[str]) -> dict[str, CodeRef]:
    """The commit hashes and repository paths among ``tokens`` that name a commit or a file of
    ``project``'s repositories (``tracker.repos.refs``: checked against the mirrors, never a
    denied path), by token."""
    wanted = [token for token in tokens if code_token(token)]
    if not wanted:
        return {}
    links = code_links(project=project, texts=["\n".join(wanted)])
    found: dict[str, CodeRef] = {}
    for token in wanted:
        if token in links.commits:
            found[token] = {"url": links.commits[token], "title": f"Commit {token}"}
        elif token in links.files:
            found[token] = {"url": links.files[token], "title": f"File {token}"}
    return found


def refs_resolve(
    *,
    user: Principal,
    project: Project,
    items: str | None,
    changesets: str | None,
    knowledge: str | None,
    code: str | None = None,
) -> Refs:
    """What the comma-separated lists name that exists and ``user`` may see, malformed values
    ignored: items of any project they read, changesets of ``project``, entries they may read,
    commits and files of ``project``'s repositories (``user`` reads it: the endpoint checked)."""
    return {
        "items": items_resolve(user=user, keys=parse_keys(items)),
        "changesets": changesets_resolve(project=project, numbers=parse_numbers(changesets, maximum=MAX_INT)),
        "knowledge": knowledge_resolve(
            user=user, project=project, ids=parse_numbers(knowledge, maximum=MAX_BIG_ID)
        ),
        "code": code_resolve(project=project, tokens=_listed(code)),
    }
