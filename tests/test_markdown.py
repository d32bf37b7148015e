"""Markdown rendered on the server: formatting kept, anything executable dropped, keys and mentions marked."""

from html.parser import HTMLParser

import pytest

from ballet.markdown import mentioned_names, render


def test_formatting_is_rendered():
    html = render(
        "# Heading\n\n**bold** and *it* and `code`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- one\n- two"
    )
    assert "<h1>Heading</h1>" in html
    assert "<strong>bold</strong>" in html
    assert "<em>it</em>" in html
    assert "<code>code</code>" in html
    assert "<table>" in html
    assert "<td>1</td>" in html
    assert "<li>one</li>" in html


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        "[x](javascript:alert(1))",
        '<img src=x onerror="alert(1)">',
        "![x](javascript:alert(1))",
        '<a href="https://e.example" onclick="alert(1)">x</a>',
        "<style>body{display:none}</style>",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
    ],
)
def test_nothing_executable_gets_through(text):
    tags = Tags()
    tags.feed(render(text))
    assert not {"script", "style", "iframe"} & {tag for tag, _ in tags.seen}
    for _, attributes in tags.seen:
        assert not [name for name, _ in attributes if name.startswith("on")]
        assert not [v for name, v in attributes if name in ("href", "src") and not v.startswith("https:")]


class Tags(HTMLParser):
    """Every tag of a document, with its attributes."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[str, list[tuple[str, str]]]] = []

    def handle_starttag(self, tag, attrs):
        self.seen.append((tag, [(name, value or "") for name, value in attrs]))


def test_raw_html_is_shown_as_text():
    assert "&lt;img src=x onerror" in render('<img src=x onerror="alert(1)">')


def test_links_are_kept_and_marked_nofollow():
    html = render("[docs](https://docs.example/x)")
    assert 'href="https://docs.example/x"' in html
    assert 'rel="nofollow noopener noreferrer"' in html


def test_item_keys_are_linked_outside_code_and_links():
    urls = {"DEMO-3": "/projects/DEMO/items/DEMO-3/"}
    html = render("See DEMO-3 and DEMO-99, `DEMO-3` and [DEMO-3](https://x.example)", link_key=urls.get)
    assert '<a href="/projects/DEMO/items/DEMO-3/">DEMO-3</a> and DEMO-99' in html
    assert "<code>DEMO-3</code>" in html
    assert '<a href="https://x.example" rel="nofollow noopener noreferrer">DEMO-3</a>' in html


def test_mentions_are_marked_for_known_names_only():
    html = render("Hi @demo and @nobody, mail a@b.example.", mentions=frozenset({"demo"}))
    assert '<span class="mention">@demo</span>' in html
    assert "@nobody" in html
    assert 'class="mention">@nobody' not in html


def test_mentioned_names_skip_code_and_emails():
    assert mentioned_names("@ann and @bob. Not `@decorator` nor ann@x.example; @ann again") == ["ann", "bob"]
