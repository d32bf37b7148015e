"""The planner admin for operators: sessions with their transcript, tool calls and usage records,
read-only and scoped to the projects where the staff user holds project.admin."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.html import strip_tags

from planner.domain.services.sessions import session_create
from planner.models import Event, Message, Session, ToolCall
from tests.factories import MembershipFactory, UserFactory
from tests.planner.metering import metered
from tracker.models import Role

SCRIPT = '<script>alert("pwned")</script>'
MODELS = ("session", "toolcall", "usagerecord")


def admin_url(name: str, *args: Any) -> str:
    return reverse(f"admin:planner_{name}", args=args)


def rows_text(response) -> str:
    """The text of a changelist's rows (not its filters)."""
    table = re.search(r'<table id="result_list">.*?</table>', response.content.decode(), re.S)
    return re.sub(r"\s+", " ", strip_tags(table.group(0))) if table else ""


def row_count(response) -> int:
    return response.context["cl"].result_count


def tool_call(session: Session, name: str, *, duration_ms: float, is_error: bool = False) -> ToolCall:
    return ToolCall.objects.create(
        session=session,
        turn=1,
        tool_use_id=f"toolu_{name}_{duration_ms}",
        name=name,
        input={"kind": "ticket"},
        output={"error": "boom"} if is_error else {"items": []},
        is_error=is_error,
        duration_ms=duration_ms,
        actor=f"planner:{session.pk}",
        on_behalf_of=session.user,
    )


@pytest.fixture
def world(project, other_project, staff):
    """A session with a tool call and a usage record in BAL and in OTH (owned by ``outsider``)."""
    outsider: Any = UserFactory(username="outsider", is_staff=True)
    MembershipFactory(project=other_project, user=outsider, role=Role.OWNER)
    own = session_create(user=staff["member"], project=project, title="Plan the BAL release")
    foreign = session_create(user=outsider, project=other_project, title="Secret OTH plans")
    return {
        "own": own,
        "foreign": foreign,
        "outsider": outsider,
        "own_call": tool_call(own, "list_items", duration_ms=12.5),
        "foreign_call": tool_call(foreign, "secret_tool", duration_ms=99.0),
        "own_usage": metered(project, tokens=(1_000_000, 0), session=own),
        "foreign_usage": metered(other_project, tokens=(31_337, 0), session=foreign),
    }


def objects(world, prefix: str) -> dict[str, Any]:
    return {
        "session": world[prefix],
        "toolcall": world[f"{prefix}_call"],
        "usagerecord": world[f"{prefix}_usage"],
    }


# -- scoping -------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_an_owner_lists_only_their_projects_rows(client: Client, staff, world, model):
    client.force_login(staff["owner"])
    response = client.get(admin_url(f"{model}_changelist"))
    assert response.status_code == 200
    assert row_count(response) == 1
    assert "OTH" not in rows_text(response)
    assert "Secret" not in response.content.decode()
    assert "secret_tool" not in response.content.decode()


@pytest.mark.parametrize("model", MODELS)
def test_another_projects_row_is_not_found(client: Client, staff, world, model):
    client.force_login(staff["owner"])
    foreign = objects(world, "foreign")[model]
    assert client.get(admin_url(f"{model}_change", foreign.pk)).status_code == 404
    assert client.get(admin_url(f"{model}_history", foreign.pk)).status_code == 404
    own = objects(world, "own")[model]
    assert client.get(admin_url(f"{model}_change", own.pk)).status_code == 200


@pytest.mark.parametrize("model", MODELS)
def test_the_other_projects_owner_sees_theirs_only(client: Client, world, model):
    client.force_login(world["outsider"])
    response = client.get(admin_url(f"{model}_changelist"))
    assert row_count(response) == 1
    assert client.get(admin_url(f"{model}_change", objects(world, "own")[model].pk)).status_code == 404


@pytest.mark.parametrize("role", ["viewer", "member", "maintainer", "stranger"])
def test_below_owner_the_planner_admin_is_closed(client: Client, staff, world, role):
    """Operator data is for project admins: transcripts of everyone's chats, costs, tool timings."""
    client.force_login(staff[role])
    for model in MODELS:
        assert client.get(admin_url(f"{model}_changelist")).status_code == 403
        assert client.get(admin_url(f"{model}_change", objects(world, "own")[model].pk)).status_code in {
            403,
            404,
        }
    assert "Planner" not in client.get(reverse("admin:index")).content.decode()


def test_a_removed_owner_loses_access_at_once(client: Client, staff, world, project):
    client.force_login(staff["owner"])
    assert client.get(admin_url("session_changelist")).status_code == 200
    staff["owner"].memberships.filter(project=project).delete()
    assert client.get(admin_url("session_changelist")).status_code == 403
    assert client.get(admin_url("session_change", world["own"].pk)).status_code in {403, 404}


@pytest.mark.parametrize("model", MODELS)
def test_a_superuser_sees_every_project(client: Client, superuser, world, model):
    client.force_login(superuser)
    assert row_count(client.get(admin_url(f"{model}_changelist"))) == 2
    assert client.get(admin_url(f"{model}_change", objects(world, "foreign")[model].pk)).status_code == 200


@pytest.mark.parametrize("model", MODELS)
def test_nothing_can_be_added_changed_or_deleted(client: Client, superuser, world, model):
    client.force_login(superuser)
    row = objects(world, "own")[model]
    assert client.get(admin_url(f"{model}_add")).status_code == 403
    assert client.post(admin_url(f"{model}_delete", row.pk), {"post": "yes"}).status_code == 403
    page = client.get(admin_url(f"{model}_change", row.pk))
    assert 'name="_save"' not in page.content.decode()
    changelist = client.get(admin_url(f"{model}_changelist"))
    assert "delete_selected" not in changelist.content.decode()
    bulk = client.post(
        admin_url(f"{model}_changelist"),
        {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"},
    )
    assert bulk.status_code in {200, 302, 403}
    assert type(row).objects.filter(pk=row.pk).exists()
    if model == "session":
        client.post(admin_url("session_change", row.pk), {"title": "renamed", "state": "idle"})
        row.refresh_from_db()
        assert row.title == "Plan the BAL release"


# -- filters, search, ordering -------------------------------------------------


def test_sessions_filter_by_project_state_and_user_and_search_by_title(
    client: Client, superuser, world, project, staff
):
    session_create(user=staff["owner"], project=project, title="Owner roadmap chat")
    Session.objects.filter(pk=world["foreign"].pk).update(state="paused")
    client.force_login(superuser)
    url = admin_url("session_changelist")

    by_project = client.get(url, {"project__id__exact": project.pk})
    assert row_count(by_project) == 2
    assert row_count(client.get(url, {"state": "paused"})) == 1
    by_user = client.get(url, {"user__id__exact": staff["owner"].pk})
    assert (row_count(by_user), "roadmap" in rows_text(by_user)) == (1, True)
    found = client.get(url, {"q": "roadmap"})
    assert (row_count(found), "Owner roadmap chat" in rows_text(found)) == (1, True)


def test_the_user_filter_offers_only_users_of_visible_sessions(client: Client, staff, world):
    client.force_login(staff["owner"])
    response = client.get(admin_url("session_changelist"))
    filters = response.content.decode().split('<table id="result_list">')[0]
    assert "member" in filters
    assert "outsider" not in filters


def test_tool_calls_are_slowest_first_and_filter_by_tool_and_outcome(client: Client, staff, world):
    own = world["own"]
    tool_call(own, "search", duration_ms=500.0)
    tool_call(own, "get_item", duration_ms=3.0, is_error=True)
    client.force_login(staff["owner"])
    url = admin_url("toolcall_changelist")

    names = [call.name for call in client.get(url).context["cl"].result_list]
    assert names == ["search", "list_items", "get_item"]
    assert [c.name for c in client.get(url, {"outcome": "error"}).context["cl"].result_list] == ["get_item"]
    assert row_count(client.get(url, {"outcome": "ok"})) == 2
    assert [c.name for c in client.get(url, {"name": "search"}).context["cl"].result_list] == ["search"]
    assert "secret_tool" not in client.get(url).content.decode()  # the name filter is scoped too


def test_usage_records_filter_and_show_the_estimated_cost(client: Client, staff, world, project):
    metered(project, tokens=(10, 10), model="claude-unknown", purpose="compaction", outcome="error")
    client.force_login(staff["owner"])
    url = admin_url("usagerecord_changelist")

    everything = client.get(url)
    assert row_count(everything) == 2
    assert "$3.00" in rows_text(everything)  # 1M input tokens of claude-sonnet-5-5 at $3
    assert "unknown (no price)" in rows_text(everything)
    assert row_count(client.get(url, {"purpose": "compaction"})) == 1
    assert row_count(client.get(url, {"model": "claude-sonnet-5-5"})) == 1
    assert row_count(client.get(url, {"outcome": "error"})) == 1
    today = timezone.now()
    by_day = client.get(url, {"created_at__year": today.year, "created_at__month": today.month})
    assert row_count(by_day) == 2
    last_year = client.get(url, {"created_at__year": (today - timedelta(days=400)).year})
    assert row_count(last_year) == 0


def more_rows(world, count: int) -> None:
    for _ in range(count):
        session = session_create(user=world["outsider"], project=world["foreign"].project, title="More")
        tool_call(session, "list_items", duration_ms=1.0)
        metered(world["foreign"].project, tokens=(1, 1), session=session)


@pytest.mark.parametrize("model", MODELS)
def test_change_lists_do_not_query_per_row(client: Client, superuser, world, model):
    client.force_login(superuser)
    url = admin_url(f"{model}_changelist")
    client.get(url)  # the first request of a login reads more (the session, content types)
    with CaptureQueriesContext(connection) as few:
        assert row_count(client.get(url)) == 2
    more_rows(world, 5)
    with CaptureQueriesContext(connection) as many:
        assert row_count(client.get(url)) == 7
    assert len(many) == len(few)
    assert len(few) <= 12


# -- the transcript ------------------------------------------------------------


@pytest.fixture
def transcript_session(world, staff):
    session = world["own"]
    rows = [
        ("user", "human", [{"type": "text", "text": f"Hello {SCRIPT}"}]),
        (
            "assistant",
            "assistant",
            [
                {"type": "text", "text": f"Let me look {SCRIPT}"},
                {"type": "tool_use", "id": "toolu_1", "name": "list_items", "input": {"q": SCRIPT}},
            ],
        ),
        (
            "user",
            "tool_results",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": f"none {SCRIPT}",
                    "is_error": True,
                }
            ],
        ),
        ("assistant", "assistant", [{"type": "text", "text": "All done: <b>bold</b> & more"}]),
    ]
    for seq, (role, kind, content) in enumerate(rows, start=1):
        Message.objects.create(session=session, seq=seq, role=role, kind=kind, content=content, turn=1)
    Event.objects.create(
        session=session, kind="turn_ended", turn=1, data={"outcome": "failed", "error": SCRIPT}
    )
    ToolCall.objects.filter(pk=world["own_call"].pk).update(output={"text": SCRIPT}, is_error=True)
    return session


def test_the_transcript_shows_messages_calls_and_events_in_order(
    client: Client, superuser, transcript_session
):
    client.force_login(superuser)
    response = client.get(admin_url("session_change", transcript_session.pk))
    html = response.content.decode()
    text = re.sub(r"\s+", " ", strip_tags(html))

    order = [html.index(f'id="message-{seq}"') for seq in (1, 2, 3, 4)]
    assert order == sorted(order)
    assert "#2 assistant · assistant · turn 1" in text
    assert "tool_use list_items (toolu_1)" in text
    assert "tool_result for toolu_1 (error)" in text
    assert "list_items (toolu_list_items_12.5) · turn 1 · 12.5 ms · error" in text
    assert "turn_ended" in text
    assert tuple(re.findall(r"(Messages \(\d+\)|Tool calls \(\d+\)|Events \(\d+\))", text)) == (
        "Messages (4)",
        "Tool calls (1)",
        "Events (1)",
    )


def test_model_text_in_the_transcript_is_escaped(client: Client, superuser, transcript_session):
    client.force_login(superuser)
    html = client.get(admin_url("session_change", transcript_session.pk)).content.decode()
    assert SCRIPT not in html
    assert "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in html
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; more" in html


def test_a_session_title_with_markup_is_escaped_in_the_list(client: Client, superuser, world):
    Session.objects.filter(pk=world["own"].pk).update(title=SCRIPT)
    client.force_login(superuser)
    html = client.get(admin_url("session_changelist")).content.decode()
    assert SCRIPT not in html
    assert "&lt;script&gt;" in html


def test_a_tool_calls_page_shows_its_input_and_output_escaped(
    client: Client, superuser, transcript_session, world
):
    client.force_login(superuser)
    html = client.get(admin_url("toolcall_change", world["own_call"].pk)).content.decode()
    assert SCRIPT not in html
    assert "&quot;text&quot;: &quot;&lt;script&gt;" in html
    assert "12.5 ms" in html


# -- what was said and read: superusers only ------------------------------------

MEMO = "Acme buys Initech"


@pytest.fixture
def memo_read(world):
    """The member's planner read another project's memo in their own chat (the member may read
    it; the project's owner may not)."""
    session = world["own"]
    Session.objects.filter(pk=session.pk).update(title=f"About {MEMO}", summary=f"They read {MEMO}.")
    rows = [
        ("user", "human", [{"type": "text", "text": f"What does the memo say? {MEMO}?"}]),
        (
            "assistant",
            "assistant",
            [{"type": "tool_use", "id": "toolu_1", "name": "get_knowledge", "input": {"id": 7}}],
        ),
        ("user", "tool_results", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": MEMO}]),
    ]
    for seq, (role, kind, content) in enumerate(rows, start=1):
        Message.objects.create(session=session, seq=seq, role=role, kind=kind, content=content, turn=1)
    Event.objects.create(session=session, kind="turn_ended", turn=1, data={"reason": "failed", "error": MEMO})
    ToolCall.objects.filter(pk=world["own_call"].pk).update(
        name="get_knowledge", input={"id": 7, "note": MEMO}, output={"body": MEMO}
    )
    return session


def operator_pages(world) -> list[str]:
    return [
        admin_url("session_changelist"),
        admin_url("session_change", world["own"].pk),
        admin_url("toolcall_changelist"),
        admin_url("toolcall_change", world["own_call"].pk),
        admin_url("usagerecord_changelist"),
        admin_url("usagerecord_change", world["own_usage"].pk),
    ]


def test_a_project_admin_sees_how_anothers_chat_went_not_what_was_said_or_read(
    client: Client, staff, world, memo_read
):
    client.force_login(staff["owner"])
    for url in operator_pages(world):
        response = client.get(url)
        assert response.status_code == 200, url
        assert "Initech" not in response.content.decode(), url
    text = page_text(client.get(admin_url("session_change", memo_read.pk)))
    assert "#1 user · human · turn 1" in text  # who wrote which kind of message, when
    assert "#2 assistant · assistant · turn 1" in text
    assert "get_knowledge (toolu_list_items_12.5) · turn 1 · 12.5 ms · ok" in text  # which tool, how
    assert "turn_ended" in text
    assert "&quot;reason&quot;: &quot;failed&quot;" in text  # how it ended, not its error text
    assert "shown only to superusers" in text
    call_page = page_text(client.get(admin_url("toolcall_change", world["own_call"].pk)))
    for shown in ("get_knowledge", "12.5 ms", "member", "ok"):
        assert shown in call_page


def page_text(response) -> str:
    return re.sub(r"\s+", " ", strip_tags(response.content.decode()))


def test_a_superuser_reads_what_was_said_and_read(client: Client, superuser, world, memo_read):
    client.force_login(superuser)
    for url in operator_pages(world)[:2] + operator_pages(world)[3:4]:  # a chat's list row, its page, a call
        assert "Initech" in client.get(url).content.decode(), url


def test_a_project_admin_reads_their_own_chat(client: Client, staff, project):
    own = session_create(user=staff["owner"], project=project, title=f"About {MEMO}")
    Message.objects.create(
        session=own, seq=1, role="user", kind="human", content=[{"type": "text", "text": MEMO}], turn=1
    )
    client.force_login(staff["owner"])
    assert client.get(admin_url("session_change", own.pk)).content.decode().count("Initech") >= 2
