"""Markdown written by people and agents (knowledge entries, comments, reports), rendered on the
server as safe HTML (docs/trust.md#untrusted-text).

markdown-it-py parses CommonMark with tables and strikethrough and no raw HTML;
nh3 (Ammonia) then keeps only the tags and attributes below, so nothing a writer
types becomes script, a style, an event handler or a ``javascript:`` link, however
the parser is fooled. Links get ``rel="nofollow noopener noreferrer"``. Item keys
of the page's project (``DEMO-12``) and ``@name`` mentions become links or marks
in the text, never inside code or an existing link. The chat keeps its own
client-side renderer for streamed text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from html import escape

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

MAX_SOURCE = 200_000  # longer text is cut before parsing (an entry's body is at most 100,000)
TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "s", "del", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td", "img", "span",
}  # fmt: skip
ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "th": {"style"},
    "td": {"style"},
    "ol": {"start"},
    "span": {"class"},
    "code": {"class"},
}
SCHEMES = {"http", "https", "mailto"}
NOT_IN = ("a", "code", "pre")  # text inside these is left as it is
TAG = re.compile(r"(<[^>]*>)")
MENTION = re.compile(r"(?<![\w@/.])@([A-Za-z0-9_.+-]{1,150})")


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # breaks: a line break in the text is one on the page, as people expect of a comment or a description
    options = {"html": False, "linkify": False, "breaks": True}
    return MarkdownIt("commonmark", options).enable(["table", "strikethrough"])


def render(
    text: str, *, link_key: Callable[[str], str | None] | None = None, mentions: frozenset[str] = frozenset()
) -> SafeString:
    """``text`` as sanitized HTML. ``link_key(key)`` gives the URL of an item key the reader may
    open (None: left as text); ``mentions`` are the names shown as mentions where ``@name`` appears."""
    html = _parser().render(text[:MAX_SOURCE])
    clean = nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=SCHEMES,
        link_rel="nofollow noopener noreferrer",
        filter_style_properties={"text-align"},
    )
    if link_key is not None or mentions:
        clean = _marked(clean, link_key, mentions)
    return mark_safe(clean)  # noqa: S308 - sanitized by nh3 just above


KEY = re.compile(r"\b([A-Z][A-Z0-9]{1,9}-[1-9][0-9]{0,8})\b")


def _marked(html: str, link_key: Callable[[str], str | None] | None, mentions: frozenset[str]) -> str:
    """Item keys linked and mentions marked in the text between tags, outside links and code."""
    parts = TAG.split(html)
    depth = 0
    for index, part in enumerate(parts):
        if index % 2:  # a tag
            name = part.strip("</>").split(" ", 1)[0].lower()
            if name in NOT_IN:
                depth += -1 if part.startswith("</") else 1
            continue
        if depth or not part:
            continue
        text = part
        if link_key is not None:
            text = KEY.sub(lambda match: _key_link(match.group(1), link_key), text)
        if mentions:
            text = MENTION.sub(lambda match: _mention(match, mentions), text)
        parts[index] = text
    return "".join(parts)


def _key_link(key: str, link_key: Callable[[str], str | None]) -> str:
    url = link_key(key)
    return f'<a href="{escape(url)}">{key}</a>' if url else key


def _mention(match: re.Match[str], mentions: frozenset[str]) -> str:
    name = match.group(1).rstrip(".")
    if name not in mentions:
        return match.group(0)
    return f'<span class="mention">@{name}</span>{match.group(1)[len(name) :]}'


def mentioned_names(text: str) -> list[str]:
    """The ``@name`` mentions in ``text``, in order, each once (not those in code: a writer quoting
    ``@decorator`` mentions nobody)."""
    tokens = _parser().parse(text[:MAX_SOURCE])
    names: dict[str, None] = {}
    for token in tokens:
        for child in token.children or []:
            if child.type == "text":
                for match in MENTION.finditer(child.content):
                    names[match.group(1).rstrip(".")] = None
    return list(names)
