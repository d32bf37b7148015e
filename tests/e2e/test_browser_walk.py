"""A team lead's morning on the seeded demo, in a real Chromium, wide and on a 375 px phone, in both
modes (docs/domain.md#people): accept the agent's reported ticket from its page, comment mentioning
a teammate who finds it in their inbox, invite a colleague who accepts, make an agent and its key
and hand the key to an MCP client, which reads the plan and claims a ticket with it.

Each width walks a server of its own, since the walk changes the demo; every page it passes is
checked for sideways scroll."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import VIEWPORTS, shell
from tests.e2e.test_mcp import body, mcp_session
from tests.fakes.messages_api import FakeMessagesAPI
from tests.fakes.servers import PASSWORD, Server, served

# Not a page-only test: the production mode walks it too (tests/conftest.py).
pytestmark = pytest.mark.browser

COLLEAGUE_PASSWORD = "colleague-password-1"


@pytest.fixture(scope="module", params=["wide", "375"])
def width(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def server(
    fake_api: FakeMessagesAPI, width: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """A fresh demo for each width, with a colleague who belongs to no project yet."""
    with served(tmp_path_factory.mktemp(f"walk-{width}"), fake_api.base_url) as server:
        shell(
            server,
            "from django.contrib.auth.models import User; "
            f"User.objects.create_user('colleague', 'sam@example.com', {COLLEAGUE_PASSWORD!r}); print('ok')",
        )
        yield server


def signed_in(browser: Any, server: Server, width: str, username: str, password: str) -> Any:
    """A tab of ``username``, signed in through the login form; any script error fails the test."""
    context = browser.new_context(base_url=server.url, viewport=VIEWPORTS[width])
    context.set_default_timeout(10_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    tab.goto("/accounts/login/?next=/")
    tab.get_by_label("Username").fill(username)
    tab.get_by_label("Password").fill(password)
    tab.get_by_role("button", name="Sign in").click()
    tab.wait_for_url(f"{server.url}/")
    tab.errors = errors  # read when the walk ends
    return tab


def fits(tab: Any) -> None:
    wide = tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert wide <= 1, f"{tab.url} scrolls sideways by {wide}px"


def in_thread(coroutine: Any) -> Any:
    """Run an MCP client's coroutine on a loop of its own, away from Playwright's."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_a_team_leads_morning(browser: Any, server: Server, width: str) -> None:
    lead = signed_in(browser, server, width, "demo", PASSWORD)

    # The inbox says what waits: the agent's mention and the ticket it reported.
    header = lead.locator(".inbox-link")
    expect(header).to_contain_text(re.compile(r"Inbox \d+"))
    header.click()
    expect(lead.get_by_role("heading", level=1, name="Inbox")).to_be_visible()
    fits(lead)
    inbox = lead.locator("main")
    expect(inbox).to_contain_text("agent mentioned you on DEMO-8")
    expect(inbox).to_contain_text("Ticket in review")
    inbox.get_by_role("link", name=re.compile("agent mentioned you on DEMO-8")).click()
    expect(lead).to_have_url(re.compile(r"/projects/DEMO/items/DEMO-8/#comment-\d+$"))
    comment = lead.locator("li.comment").first.locator(".prose")
    expect(comment.locator("strong")).to_have_text("accept")  # Markdown rendered, not typed
    expect(comment.locator(".mention")).to_have_text("@demo")
    fits(lead)

    # Accept the reported ticket from its page: on a phone its actions come under its title.
    expect(lead.locator(".item-badges")).to_contain_text("in review")
    lead.wait_for_load_state("load")  # the stylesheets too: without them there is no layout to measure
    actions, text = (lead.locator(f"#{name}-heading").bounding_box() for name in ("actions", "description"))
    assert actions
    assert text
    if width == "375":
        assert actions["y"] < text["y"], (actions, text)
    else:  # beside the text, in the column of the ticket's details
        assert actions["x"] > text["x"] + text["width"], (actions, text)
    lead.get_by_role("button", name="Accept (done)").click()
    expect(lead.locator(".messages")).to_contain_text("Applied as changeset")
    expect(lead.locator(".item-badges")).to_contain_text("done")
    expect(lead.get_by_role("button", name="Accept (done)")).to_have_count(0)
    fits(lead)

    # A comment mentioning the teammate, who finds it in their inbox.
    lead.get_by_label(re.compile("Your comment")).fill(
        "Accepted. @viewer can you try the reset mail on **your phone**?"
    )
    lead.get_by_role("button", name="Comment", exact=True).click()
    expect(lead.locator(".messages")).to_contain_text("Your comment on DEMO-8 was added.")
    mine = lead.locator(".comments").get_by_text("can you try the reset mail")
    expect(mine).to_be_visible()
    teammate = signed_in(browser, server, width, "viewer", PASSWORD)
    teammate.goto("/inbox/")
    expect(teammate.locator("main")).to_contain_text("demo mentioned you on DEMO-8")
    expect(teammate.locator(".inbox-count")).not_to_have_text("0")
    fits(teammate)
    expect(teammate.get_by_role("button", name="Accept (done)")).to_have_count(0)

    # Invite a colleague, who accepts in their inbox and then reads the plan.
    lead.goto("/projects/DEMO/members/")
    fits(lead)
    lead.get_by_label("Username or e-mail").fill("sam@example.com")
    lead.get_by_role("button", name="Invite", exact=True).click()
    expect(lead.locator("main")).to_contain_text("colleague")
    colleague = signed_in(browser, server, width, "colleague", COLLEAGUE_PASSWORD)
    assert colleague.request.get("/projects/DEMO/").status == 404  # not a member before accepting
    colleague.goto("/inbox/")
    expect(colleague.locator("main")).to_contain_text("DEMO")
    fits(colleague)
    colleague.get_by_role("button", name=re.compile(r"^Accept")).click()
    colleague.goto("/projects/DEMO/")
    expect(colleague.get_by_role("heading", level=1)).to_contain_text("Courtside")

    # An agent and its key in one step; the key reaches the plan over MCP, and only DEMO.
    lead.goto("/projects/DEMO/members/")
    form = lead.locator("form", has=lead.get_by_role("button", name="Create the agent and its key"))
    form.get_by_label("Name").fill("CI bot")
    for scope in form.get_by_role("checkbox").all():
        scope.set_checked(scope.get_attribute("value") in ("read", "work"))
    form.get_by_role("button", name="Create the agent and its key").click()
    secret = lead.get_by_label("The agent's key").input_value()
    assert secret.startswith("ballet_")
    expect(lead.get_by_label("MCP configuration (.mcp.json)")).to_contain_text(secret)
    fits(lead)
    lead.reload()  # shown once: a reload shows it no more
    expect(lead.get_by_label("The agent's key")).to_have_count(0)

    async def agents_day() -> tuple[dict[str, Any], dict[str, Any], bool]:
        async with mcp_session(server, secret) as session:
            runnable = body(await session.call_tool("list_runnable", {"project": "DEMO"}))
            ticket = runnable["results"][0]["key"]
            claimed = body(await session.call_tool("claim_ticket", {"project": "DEMO", "item": ticket}))
            elsewhere = await session.call_tool("list_runnable", {"project": "WEB"})
            return runnable, claimed, elsewhere.is_error

    runnable, claimed, refused_elsewhere = in_thread(agents_day())
    assert runnable["results"], runnable
    assert claimed["status"] == "active", claimed
    assert refused_elsewhere
    lead.goto(f"/projects/DEMO/items/{runnable['results'][0]['key']}/")
    expect(lead.locator("main")).to_contain_text("ci-bot")
    for tab in (lead, teammate, colleague):
        assert not tab.errors, tab.errors
        tab.context.close()
