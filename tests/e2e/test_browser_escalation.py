"""Questions, sub-chats and approvals end to end (docs/domain.md): a real server, a real Chromium, the
fake Messages API scripted by what each request says.

An agent (a token user) asks a question over REST; the planner of its sub-chat asks the project's
humans with ``ask_human``; another member finds the chat waiting, answers in the browser, and the
agent's waiting ``GET`` returns the planner's answer. In the owner's own chats: an ``ask_human``
answered with a click, and a tool in ``approve_tools`` approved (it runs once) or declined.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.chat_page import CHAT_URL, HOLD_OPEN, assistant, new_chat, release_open, send
from tests.e2e.conftest import Script
from tests.fakes.messages_api import Reply, TextReply, ToolCallSpec, ToolUseReply
from tests.fakes.servers import PASSWORD, Server

pytestmark = pytest.mark.browser


# A worker of its own (the seed's ``agent`` has a question of its own waiting): a member with a token.
MAKE_WORKER = """
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from tracker.models import Membership, Project
worker, _ = User.objects.get_or_create(username="builder")
demo = Project.objects.get(key="DEMO")
Membership.objects.get_or_create(user=worker, project=demo, defaults={"role": "member"})
print(Token.objects.get_or_create(user=worker)[0].key)
"""


# -- what the model reads: the results of its earlier calls -------------------------------------


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def last_result(request: dict[str, Any], tool: str) -> tuple[str, bool] | None:
    """The text and error flag of the last result of a call of ``tool`` in the request, if any."""
    names: dict[str, str] = {}
    found = None
    for message in request.get("messages", []):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            elif block.get("type") == "tool_result" and names.get(block.get("tool_use_id")) == tool:
                found = (result_text(block), bool(block.get("is_error")))
    return found


# -- a REST client of the server ----------------------------------------------------------------


@dataclass(frozen=True)
class Api:
    """A REST client of the server as one user (token authentication)."""

    base_url: str
    token: str = ""

    def call(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def signed_in(self, username: str) -> Api:
        status, body = self.call("POST", "/api/v1/auth/token/", {"username": username, "password": PASSWORD})
        assert status == 200, body
        return Api(self.base_url, body["token"])


@pytest.fixture(scope="module")
def worker(server: Server) -> Api:
    """The worker that asks: a member of DEMO with a token."""
    return Api(server.url, server.deployment.manage("shell", "-c", MAKE_WORKER).split()[-1])


@pytest.fixture(scope="module")
def demo_api(server: Server) -> Api:
    """``demo``, DEMO's owner, over REST."""
    return Api(server.url).signed_in("demo")


def set_approve_tools(demo_api: Api, tools: list[str]) -> None:
    status, body = demo_api.call("PATCH", "/api/v1/projects/DEMO/", {"settings": {"approve_tools": tools}})
    assert status == 200, body


@pytest.fixture
def approving(demo_api: Api) -> Iterator[None]:
    """DEMO's planner waits for approval before proposing a changeset, for one test."""
    set_approve_tools(demo_api, ["propose_changeset"])
    yield
    set_approve_tools(demo_api, [])


def changesets_titled(demo_api: Api, title: str) -> int:
    status, body = demo_api.call("GET", "/api/v1/projects/DEMO/changesets/?status=proposed")
    assert status == 200, body
    return sum(1 for changeset in body["results"] if changeset["title"] == title)


# -- (a) an agent's question, escalated to the project's humans ---------------------------------


def escalation(request: dict[str, Any]) -> Reply:
    """Ask the humans; answer the question with what they said; then say so."""
    if last_result(request, "answer_question") is not None:
        return TextReply("I answered the agent's question.")
    asked = last_result(request, "ask_human")
    if asked is None:
        return ToolUseReply(
            [ToolCallSpec("ask_human", {"question": "Should the export read the replica or the primary?"})]
        )
    answer = json.loads(asked[0])
    return ToolUseReply(
        [ToolCallSpec("answer_question", {"answer": f"{answer['answered_by']} says: {answer['answer']}"})]
    )


def waiting_count(page: Any) -> int:
    """The home page's count of DEMO's chats waiting for the reader (0 without the link)."""
    page.goto("/")
    link = page.get_by_role("link", name=re.compile(r"chats? waiting for you in DEMO"))
    return int(link.inner_text().split()[0]) if link.count() else 0


def wait_until_asked(worker: Api, session: str) -> None:
    """The planner of the sub-chat asked its humans: a request is pending (bounded wait)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, transcript = worker.call("GET", f"/api/v1/planner/sessions/{session}")
        assert status == 200, transcript
        if any(request["status"] == "pending" for request in transcript["requests"]):
            return
        time.sleep(0.1)
    raise AssertionError(f"the planner never asked: {transcript}")


def test_an_agents_question_escalates_to_another_member_who_answers_in_the_browser(page, script, worker):
    script.on("escalate-db", escalation)
    before = waiting_count(page)  # the seed's own question waits for demo too
    status, asked = worker.call(
        "POST", "/api/v1/projects/DEMO/questions/", {"text": "escalate-db: which database?"}
    )
    assert status == 201, asked
    wait_until_asked(worker, asked["session"])

    assert waiting_count(page) == before + 1
    page.get_by_role("link", name=re.compile(r"chats? waiting for you in DEMO")).click()
    listed = page.locator(".session-list li")
    ours = listed.filter(has_text="escalate-db")
    expect(ours).to_have_class(re.compile("waiting"))
    expect(ours).to_contain_text("waiting for you")
    expect(ours).to_contain_text("Question from builder")
    expect(ours.locator(".state-paused")).to_have_text("Paused")
    marks = [bool(li.get_attribute("class")) for li in listed.all()]
    assert marks == sorted(marks, reverse=True), marks  # those waiting come first
    ours.get_by_role("link").click()
    page.wait_for_url(CHAT_URL)
    open_entry = page.locator("#recent-chats li").filter(has=page.locator("a[aria-current='page']"))
    expect(open_entry).to_contain_text("waiting for you")

    expect(page.locator(".question-banner")).to_contain_text("Question from builder")
    expect(page.locator(".question-banner")).to_contain_text("escalate-db: which database?")
    first = page.locator("#chat-log .entry").first  # the agent's question as it asked it
    expect(first.locator(".bubble")).to_have_text("escalate-db: which database?")
    expect(first.locator(".meta")).to_contain_text("Question from builder")
    expect(page.locator("#chat-log")).not_to_contain_text("answer_question tool")
    expect(page.locator(".composer-off")).to_contain_text("Only builder, who asked, writes in this chat.")
    expect(page.get_by_label("Message to the planner")).to_have_count(0)
    expect(page.get_by_role("button", name="Stop")).to_have_count(0)
    card = page.locator("#chat-log .request-card.question")
    expect(card.locator(".request-question")).to_have_text(
        "Should the export read the replica or the primary?"
    )
    expect(card).to_contain_text("The planner asks the project's members")

    answers: list[tuple[int, Any]] = []
    url = f"/api/v1/projects/DEMO/questions/{asked['id']}/?wait=30"
    waiter = threading.Thread(target=lambda: answers.append(worker.call("GET", url, timeout=90)))
    waiter.start()
    box = card.get_by_label("Your answer")
    box.press_sequentially("The replica, always.")
    box.press("Enter")
    expect(card.locator(".request-outcome-line")).to_have_text("Answered by demo")
    expect(card.locator(".request-answer")).to_have_text("The replica, always.")
    expect(assistant(page).last).to_have_text("I answered the agent's question.")
    expect(page.locator("#question-status")).to_have_text("Answered")
    expect(page.locator("#question-answer")).to_have_text(
        "Answer by the planner, from demo's reply: demo says: The replica, always."
    )
    # The open chat's entry among the recent chats no longer says it waits, without a reload.
    expect(open_entry).not_to_contain_text("waiting for you")
    expect(open_entry).not_to_have_class(re.compile("waiting"))
    waiter.join(timeout=90)

    assert len(answers) == 1
    status, answered = answers[0]
    assert status == 200, answered
    assert (answered["status"], answered["answer"]) == ("answered", "demo says: The replica, always.")
    assert answered["answered_by"] == "user:demo"  # on whose reply
    assert answered["answered_via"] == f"planner:{asked['session']}"  # in the planner's words

    page.reload()
    expect(page.locator("#question-status")).to_have_text("Answered")
    expect(page.locator("#question-answer")).to_have_text(
        "Answer by the planner, from demo's reply: demo says: The replica, always."
    )
    expect(card.locator(".request-outcome-line")).to_have_text("Answered by demo")
    assert waiting_count(page) == before


# -- (b) ask_human with options, answered by a click --------------------------------------------


def choose_a_format(request: dict[str, Any]) -> Reply:
    asked = last_result(request, "ask_human")
    if asked is None:
        return ToolUseReply(
            [
                ToolCallSpec(
                    "ask_human", {"question": "Which export format?", "options": ["CSV", "JSON", "XML"]}
                )
            ]
        )
    return TextReply(f"Going with {json.loads(asked[0])['answer']}.")


def asked_for_a_format(page: Any, script: Script) -> Any:
    """A new chat whose planner asks which export format: the question's card."""
    script.on("format-choice", choose_a_format)
    new_chat(page)
    send(page, "format-choice: plan the export")
    card = page.locator("#chat-log .request-card.question")
    expect(card.locator(".request-question")).to_have_text("Which export format?")
    return card


def test_ask_human_with_options_is_answered_by_a_click(page, script):
    card = asked_for_a_format(page, script)
    expect(page.locator("#chat-state")).to_have_text("Waiting for an answer")
    expect(page.get_by_label("Message to the planner")).to_have_attribute(
        "placeholder", "A message answers the planner's question"
    )
    card.get_by_role("button", name="JSON").click()
    expect(card.locator(".request-outcome-line")).to_have_text("Answered by demo")
    expect(assistant(page)).to_have_text("Going with JSON.")
    expect(page.locator("#chat-state")).to_have_text("Idle")

    page.reload()
    expect(card.locator(".request-outcome-line")).to_have_text("Answered by demo")
    expect(card.locator(".request-answer")).to_have_text("JSON")
    expect(card.get_by_role("button")).to_have_count(0)
    expect(assistant(page)).to_have_text("Going with JSON.")


def test_an_answer_given_before_the_chat_is_live_goes_once_it_is(page, script):
    card = asked_for_a_format(page, script)
    page.add_init_script(HOLD_OPEN)
    page.reload()  # the page's new socket stays connecting until released
    box = card.get_by_label("Or answer in your own words")
    box.fill("YAML")
    box.press("Enter")
    expect(card.locator(".request-sending")).to_have_text("Sends as soon as the chat is live…")
    expect(card.get_by_role("button", name="JSON")).to_be_disabled()
    expect(box).to_have_value("YAML")
    release_open(page)
    expect(card.locator(".request-outcome-line")).to_have_text("Answered by demo")
    expect(card.locator(".request-answer")).to_have_text("YAML")
    expect(assistant(page)).to_have_text("Going with YAML.")
    expect(page.locator("#chat-state")).to_have_text("Idle")


# -- (c) a tool that waits for approval ---------------------------------------------------------


def proposing(title: str) -> Any:
    operations = [{"op": "create", "kind": "ticket", "fields": {"title": f"{title}: the ticket"}}]

    def reply(request: dict[str, Any]) -> Reply:
        result = last_result(request, "propose_changeset")
        if result is None:
            return ToolUseReply(
                [ToolCallSpec("propose_changeset", {"title": title, "operations": operations})]
            )
        text, is_error = result
        return TextReply(f"Result: {json.loads(text)['error']['message']}" if is_error else "Proposed.")

    return reply


@pytest.mark.usefixtures("approving")
def test_an_approved_call_runs_once(page, script, demo_api):
    script.on("approve-csv", proposing("Approved CSV export"))
    new_chat(page)
    send(page, "approve-csv: propose it")
    card = page.locator("#chat-log .request-card.approval")
    expect(card.locator(".card-title")).to_have_text("The planner wants to run propose_changeset")
    expect(card.locator('.preview-op[data-op="create"] h4')).to_have_text("1. Create: new ticket")
    expect(card.locator(".preview-op .after").first).to_have_text("Approved CSV export: the ticket")
    expect(page.locator("#chat-state")).to_have_text("Waiting for approval")
    fold = page.locator("#chat-log details.tool")
    expect(fold.locator(".tool-status")).to_have_text("Waiting for approval")
    assert changesets_titled(demo_api, "Approved CSV export") == 0  # nothing ran yet

    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".request-outcome-line")).to_have_text("Approved by demo")
    expect(assistant(page)).to_have_text("Proposed.")
    expect(page.locator("#chat-log .changeset-card .card-title")).to_contain_text("Approved CSV export")
    expect(fold.locator(".tool-label")).to_have_text(re.compile(r"^Proposed changeset #\d+$"))
    assert changesets_titled(demo_api, "Approved CSV export") == 1

    page.reload()
    expect(card.locator(".request-outcome-line")).to_have_text("Approved by demo")
    expect(page.locator("#chat-log .changeset-card")).to_have_count(1)


@pytest.mark.usefixtures("approving")
def test_a_declined_call_never_runs_and_the_planner_reads_the_reason(page, script, demo_api):
    script.on("decline-csv", proposing("Declined CSV export"))
    new_chat(page)
    send(page, "decline-csv: propose it")
    card = page.locator("#chat-log .request-card.approval")
    reason = card.get_by_label("Reason for declining (optional)")
    reason.fill("Wait for the schema.")
    card.get_by_role("button", name="Decline").click()
    expect(card.locator(".request-outcome-line")).to_have_text("Declined by demo")
    expect(card.locator(".request-answer")).to_have_text("Reason: Wait for the schema.")
    expect(assistant(page)).to_contain_text("declined by the human: Wait for the schema.")
    expect(page.locator("#chat-state")).to_have_text("Idle")
    assert changesets_titled(demo_api, "Declined CSV export") == 0


@pytest.mark.usefixtures("approving")
def test_a_message_while_an_approval_waits_declines_it_with_the_message(page, script, demo_api):
    script.on("message-csv", proposing("Messaged CSV export"))
    new_chat(page)
    send(page, "message-csv: propose it")
    card = page.locator("#chat-log .request-card.approval")
    box = page.get_by_label("Message to the planner")
    expect(box).to_have_attribute("placeholder", re.compile("declines the pending approval"))
    send(page, "No, split it in two first.")
    expect(card.locator(".request-outcome-line")).to_have_text("Declined by demo")
    expect(assistant(page)).to_contain_text("declined by the human: No, split it in two first.")
    assert changesets_titled(demo_api, "Messaged CSV export") == 0
