"""The chat in a real Chromium against a real server: streaming, tools, changesets, stop, reload,
reconnect, inert model output and a phone-sized screen.

The model is the fake Messages API; each test opens its own chat and scripts the replies for
the keyword its message carries (see ``conftest.Script``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.chat_page import CHAT_URL, HOLD_OPEN, assistant, new_chat, release_open, send
from tests.fakes.messages_api import ErrorReply, HangReply, TextReply, ToolCallSpec, ToolUseReply

pytestmark = pytest.mark.browser


def state(page: Any) -> Any:
    return page.locator("#chat-state")


def test_open_a_chat_from_the_projects_and_watch_a_reply_stream(page, script, server):
    script.on(
        "stream-hello",
        TextReply(
            chunks=["Hello **there**.", " Here is a list:\n\n- one\n", "- two\n\n", "Done", " streaming."],
            delay_between_deltas=0.4,
        ),
    )
    # A proposal with no words in it is not stored: the first message's words stay the title
    # (tests/e2e/test_browser_chats.py sees the planner's title replace them).
    script.titled("stream-hello", TextReply('""'))
    page.goto("/")
    page.get_by_role("link", name="Planner chats of DEMO").click()
    expect(page.get_by_role("heading", name="Planner chats")).to_be_visible()
    page.get_by_role("button", name="New chat").click()
    page.wait_for_url(CHAT_URL)
    expect(page.locator("#chat-connection")).to_have_text("Live")
    box = page.get_by_label("Message to the planner")
    box.fill("stream-hello: say hi")
    box.press("Shift+Enter")
    box.press_sequentially("second line")
    box.press("Enter")

    expect(page.locator("#chat-log .entry.user .bubble")).to_have_text("stream-hello: say hi\nsecond line")
    expect(box).to_have_value("")
    expect(assistant(page)).to_contain_text("Hello there.")
    expect(state(page)).to_have_text("Writing…")
    assert "Done streaming." not in assistant(page).inner_text()  # seen while still streaming
    expect(assistant(page)).to_contain_text("Done streaming.")
    expect(state(page)).to_have_text("Idle")
    expect(assistant(page).locator("strong")).to_have_text("there")
    expect(assistant(page).locator("li")).to_have_text(["one", "two"])
    expect(page.locator("#chat-title")).to_have_text("stream-hello: say hi second line")

    page.goto("/projects/DEMO/chat/")
    expect(page.get_by_role("link", name=re.compile("stream-hello: say hi"))).to_be_visible()


def test_a_tool_call_is_folded_and_opens_to_its_input_and_output(page, script):
    script.on(
        "tools-please",
        ToolUseReply([ToolCallSpec("list_runnable", {"limit": 3})]),
        TextReply("Those can run."),
    )
    new_chat(page)
    send(page, "tools-please: what can run?")
    expect(assistant(page)).to_have_text("Those can run.")
    fold = page.locator("#chat-log details.tool")
    expect(fold).to_have_count(1)
    expect(fold.locator("summary")).to_have_text("Looked up runnable tickets")  # in words
    expect(fold).to_have_class("tool done")
    expect(fold.locator(".tool-input")).to_be_hidden()

    fold.locator("summary").focus()
    page.keyboard.press("Enter")  # folds open from the keyboard
    expect(fold.locator(".tool-input")).to_contain_text('"limit": 3')
    expect(fold.locator(".tool-output")).to_contain_text('"tickets"')
    expect(fold.locator(".tool-output")).to_contain_text('"key": "DEMO-')

    page.reload()  # the transcript pairs the call with its result the same way
    fold = page.locator("#chat-log details.tool")
    expect(fold).to_have_count(1)
    expect(fold.locator("summary")).to_have_text("Looked up runnable tickets")
    fold.locator("summary").click()
    expect(fold.locator(".tool-called")).to_have_text("Tool list_runnable")  # its name, inside
    expect(fold.locator(".tool-output")).to_contain_text('"tickets"')
    expect(assistant(page)).to_have_text("Those can run.")


def test_a_proposed_changeset_shows_a_card_linking_to_its_review(page, script):
    operations = [{"op": "create", "kind": "ticket", "fields": {"title": "Export bookings as CSV"}}]
    script.on(
        "propose-it",
        ToolUseReply(
            [ToolCallSpec("propose_changeset", {"title": "Add CSV export", "operations": operations})]
        ),
        TextReply("Proposed for your review."),
    )
    new_chat(page)
    send(page, "propose-it: add a CSV export ticket")
    expect(assistant(page)).to_have_text("Proposed for your review.")
    card = page.locator("#chat-log .changeset-card")
    expect(card).to_have_count(1)
    expect(card.locator(".card-title")).to_contain_text("Add CSV export")
    expect(card.locator(".card-meta")).to_have_text("1 operation · proposed")
    link = card.get_by_role("link", name="Review changeset")
    href = link.get_attribute("href")
    # The in-app review page (tracker.page_links.changeset_url), not the admin's.
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/projects/DEMO/changesets/\d+/", href), href

    page.reload()
    expect(page.locator("#chat-log .changeset-card")).to_have_count(1)
    expect(page.locator("#chat-log .changeset-card a.card-action")).to_have_attribute("href", href)


def test_stop_ends_the_turn_and_keeps_the_partial_text(page, script):
    script.on(
        "stop-me",
        HangReply(
            after_deltas=2,
            reply=TextReply(chunks=["Partial one. ", "Partial two. ", "Never shown."]),
        ),
    )
    new_chat(page)
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_disabled()
    send(page, "stop-me: write forever")
    expect(assistant(page)).to_have_text("Partial one. Partial two.")
    expect(stop).to_be_enabled()
    stop.click()
    expect(page.locator("#chat-log .notice-line.stopped")).to_have_text("Stopped")
    expect(state(page)).to_have_text("Idle")
    expect(stop).to_be_disabled()
    expect(assistant(page)).to_have_text("Partial one. Partial two.")

    page.reload()
    expect(assistant(page)).to_have_text("Partial one. Partial two.")
    expect(page.locator("#chat-log .notice-line.stopped")).to_have_text("Stopped")


def test_a_message_sent_mid_turn_is_queued_then_delivered(page, script):
    script.on(
        "steer-me",
        HangReply(1.5, after_deltas=1, reply=TextReply(chunks=["Working on it. ", "First part done."])),
        TextReply("Noted the extra request."),
    )
    new_chat(page)
    send(page, "steer-me: start")
    expect(assistant(page).first).to_contain_text("Working on it.")
    expect(page.get_by_label("Message to the planner")).to_have_attribute(
        "placeholder", re.compile("running")
    )
    send(page, "also check the blockers")
    queued = page.locator("#chat-log .entry.queued")
    expect(queued).to_contain_text("queued")
    steer = page.locator("#chat-log .entry.kind-steer")
    expect(steer).to_contain_text("sent while the planner worked")
    expect(queued).to_have_count(0)
    expect(assistant(page).last).to_have_text("Noted the extra request.")
    expect(state(page)).to_have_text("Idle")
    page.reload()
    expect(page.locator("#chat-log .entry.user .bubble")).to_have_text(
        ["steer-me: start", "also check the blockers"]
    )
    expect(assistant(page)).to_have_text(["Working on it. First part done.", "Noted the extra request."])


def test_a_failed_turn_says_why(page, script):
    script.on("fail-please", ErrorReply(400, message="The fake refuses this request."))
    new_chat(page)
    send(page, "fail-please")
    failure = page.locator("#chat-log .notice-line.failed")
    expect(failure).to_contain_text("The turn failed")
    expect(failure).to_contain_text("The fake refuses this request.")
    expect(state(page)).to_have_text("Failed")
    page.reload()
    expect(failure).to_contain_text("The fake refuses this request.")
    expect(state(page)).to_have_text("Failed")


def test_an_answer_cut_off_at_the_output_limit_keeps_its_text_and_says_why(page, script):
    script.on("cut-off", TextReply("The plan has three parts. First, the", stop_reason="max_tokens"))
    new_chat(page)
    send(page, "cut-off: the whole plan")
    expect(assistant(page)).to_have_text("The plan has three parts. First, the")
    failure = page.locator("#chat-log .notice-line.failed")
    expect(failure).to_contain_text("The answer hit the model's output limit")
    expect(state(page)).to_have_text("Failed")
    page.reload()
    expect(assistant(page)).to_have_text("The plan has three parts. First, the")
    expect(failure).to_contain_text("was cut off")


def slow_reply(words: int = 16, delay: float = 0.2) -> tuple[TextReply, str]:
    chunks = [f"word{i} " for i in range(words)]
    return TextReply(chunks=chunks, delay_between_deltas=delay), "".join(chunks).strip()


def test_a_reload_mid_turn_picks_the_turn_up_to_its_end(page, script):
    reply, full = slow_reply()
    script.on("slow-reload", reply)
    new_chat(page)
    send(page, "slow-reload: take your time")
    expect(assistant(page)).to_contain_text("word2")
    page.reload()
    expect(state(page)).to_have_text("Writing…")
    expect(assistant(page)).to_contain_text("word")
    expect(assistant(page)).to_have_text(full)
    expect(state(page)).to_have_text("Idle")
    expect(assistant(page)).to_have_count(1)
    expect(page.locator("#chat-log .entry.user")).to_have_count(1)


def test_a_dropped_socket_reconnects_without_losing_text(page, script):
    sockets: list[Any] = []

    def relay(ws: Any) -> None:
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r"/ws/planner/sessions/"), relay)
    reply, full = slow_reply()
    script.on("slow-drop", reply)
    new_chat(page)
    send(page, "slow-drop: take your time")
    expect(assistant(page)).to_contain_text("word3")
    assert len(sockets) == 1
    sockets[0].close(code=4000, reason="network blip")
    expect(page.locator("#chat-connection")).to_have_text("Reconnecting…")
    expect(page.locator("#chat-connection")).to_have_text("Live")
    expect(assistant(page)).to_have_text(full)
    expect(state(page)).to_have_text("Idle")
    expect(assistant(page)).to_have_count(1)
    expect(page.locator("#chat-log .entry.user")).to_have_count(1)
    assert len(sockets) == 2


def test_a_message_sent_before_the_chat_is_live_goes_once_it_is(page, script):
    script.on("early-bird", TextReply("Caught it."))
    script.on("second-bird", TextReply("Caught that too."))
    page.add_init_script(HOLD_OPEN)
    page.goto("/projects/DEMO/chat/")
    page.get_by_role("button", name="New chat").click()
    page.wait_for_url(CHAT_URL)
    box = page.get_by_label("Message to the planner")
    send(page, "early-bird: are you there?")  # the socket is still connecting
    expect(page.locator("#composer-status")).to_have_text(re.compile("goes as soon as the chat is live"))
    expect(box).to_have_value("early-bird: are you there?")  # kept until it goes
    expect(page.locator("#chat-log .entry.user")).to_have_count(0)
    release_open(page)
    expect(page.locator("#chat-connection")).to_have_text("Live")
    expect(page.locator("#chat-log .entry.user .bubble")).to_have_text(["early-bird: are you there?"])
    expect(assistant(page)).to_have_text("Caught it.")
    expect(box).to_have_value("")
    expect(page.locator("#composer-status")).to_have_text("")

    expect(state(page)).to_have_text("Idle")
    page.evaluate("window.__sockets[0].close(4000)")  # dropped: the page reconnects
    expect(page.locator("#chat-connection")).to_have_text("Reconnecting…")
    for _ in range(100):
        if page.evaluate("window.__sockets.length") == 2:
            break
        page.wait_for_timeout(50)
    send(page, "second-bird: still there?")
    expect(box).to_have_value("second-bird: still there?")
    release_open(page)
    expect(page.locator("#chat-log .entry.user .bubble")).to_have_text(
        ["early-bird: are you there?", "second-bird: still there?"]
    )
    expect(assistant(page).last).to_have_text("Caught that too.")
    expect(box).to_have_value("")


def test_model_output_never_runs_as_html(page, script):
    evil = (
        "Look: <script>window.__pwned=1</script> and "
        '<img src=x onerror="window.__pwned=2"> and [click me](javascript:window.__pwned=3) done'
    )
    script.on("inert-please", TextReply(evil, chunks=5))
    new_chat(page)
    send(page, "inert-please")
    for _ in range(2):  # streamed, then from the transcript
        bubble = assistant(page)
        expect(bubble).to_contain_text("<script>window.__pwned=1</script>")
        expect(bubble).to_contain_text('<img src=x onerror="window.__pwned=2">')
        expect(bubble).to_contain_text("click me")
        expect(bubble).to_contain_text("done")
        assert page.locator("#chat-log script, #chat-log img").count() == 0
        assert page.locator("#chat-log a[href^='javascript']").count() == 0
        bubble.get_by_text("click me").click()
        assert page.evaluate("window.__pwned") is None
        page.reload()


RENDER_CHECK = r"""(samples) => {
  const allowed = new Set(["P","BR","STRONG","EM","DEL","CODE","PRE","A","SPAN","H3","H4","H5","H6",
    "UL","OL","LI","BLOCKQUOTE","HR","TABLE","THEAD","TBODY","TR","TH","TD","DIV"]);
  const problems = [];
  for (const text of samples) {
    const box = document.createElement("div");
    box.append(window.BalletChat.renderMarkdown(text));
    for (const node of box.querySelectorAll("*")) {
      if (!allowed.has(node.tagName)) problems.push(`${node.tagName} from ${text}`);
      for (const attr of node.attributes) {
        if (!["href", "rel", "target", "class", "data-lang", "scope", "start"].includes(attr.name)) {
          // A box that scrolls sideways (a table, a code block) is reached with Tab, labelled by us.
          const scrolls = {
            tabindex: /^0$/,
            role: /^group$/,
            "aria-label": /^(Table|Code|Code \([\w+#.-]{1,40}\))$/,
          }[attr.name];
          if (!scrolls || !scrolls.test(attr.value)) problems.push(`${attr.name}=${attr.value} from ${text}`);
        }
      }
      const bad = node.tagName === "A" && !/^(https?:|mailto:)/.test(node.href);
      if (bad) problems.push(`${node.href} from ${text}`);
    }
  }
  return problems;
}"""

ATTACKS = [
    '<a href="javascript:alert(1)">x</a>',
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](java\tscript:alert(1))",
    "[x](  javascript:alert(1))",
    "[x](data:text/html,<script>alert(1)</script>)",
    "[x](vbscript:msgbox(1))",
    "![i](data:image/svg+xml,<svg onload=alert(1)>)",
    '<iframe src="https://evil.example"></iframe>',
    "<svg><script>alert(1)</script></svg>",
    "```\n<script>alert(1)</script>\n```",
    "`<b onmouseover=alert(1)>`",
    "| a | b |\n|---|---|\n| <i onclick=x>y</i> | [z](javascript:1) |",
    "- <style>body{display:none}</style>\n- **<u>x</u>**",
    "> <object data=x></object>",
    "# <h1>title</h1>",
    "<https://ok.example/path> and https://ok.example/?q=<b> and [rel](/projects/) [m](mailto:a@b.c)",
]


def test_the_markdown_renderer_builds_only_safe_elements(page):
    new_chat(page)
    assert page.evaluate(RENDER_CHECK, ATTACKS) == []
    links = page.evaluate(
        """(text) => Array.from(window.BalletChat.renderMarkdown(text).querySelectorAll("a"))
             .map((a) => [a.getAttribute("href"), a.rel, a.target])""",
        "[a](https://x.example/) [b](/projects/) [c](mailto:a@b.c) [d](javascript:1)",
    )
    origin = page.evaluate("location.origin")
    rel = "noopener noreferrer nofollow"
    assert links == [
        ["https://x.example/", rel, "_blank"],
        [f"{origin}/projects/", rel, "_blank"],
        ["mailto:a@b.c", rel, "_blank"],
    ]


def test_a_narrow_screen_needs_no_horizontal_scroll(browser, server, signed_in, script):
    wide = (
        "A long line: " + "x" * 300 + "\n\n```\n" + "code " * 80 + "\n```\n\n"
        "| " + " | ".join(f"column {i}" for i in range(12)) + " |\n|" + "---|" * 12 + "\n"
        "| " + " | ".join(f"value {i}" for i in range(12)) + " |\n\n"
        "https://example.com/" + "very-long-path-" * 20
    )
    script.on("narrow-please", ToolUseReply([ToolCallSpec("list_runnable", {})]), TextReply(wide, chunks=3))
    context = browser.new_context(
        base_url=server.url, storage_state=signed_in, viewport={"width": 375, "height": 740}
    )
    try:
        page = context.new_page()
        new_chat(page)
        send(page, "narrow-please")
        expect(assistant(page)).to_contain_text("A long line")
        expect(state(page)).to_have_text("Idle")
        page.locator("#chat-log details.tool summary").click()
        page.screenshot(path="/tmp/ballet-chat-375.png", full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
        send_box = page.get_by_role("button", name="Send").bounding_box()
        assert send_box is not None
        assert send_box["x"] + send_box["width"] <= 375
        page.goto("/projects/DEMO/chat/")
        assert page.evaluate("document.documentElement.scrollWidth") <= 375
    finally:
        context.close()
