"""Tool calls in words (docs/protocol.md#tool-calls-in-words): each tool running, done and failed,
on the frames, in the transcript, and the fold of a call that waits for a human tied to its request."""

from __future__ import annotations

import pytest

from planner.agent import frames
from planner.agent.tool_words import PHRASES, tool_label
from planner.domain.tools import TOOLS
from planner.models import HumanRequest
from tests.fakes.scripted import call, say
from tests.planner.api_client import client_for
from tests.planner.conftest import drive, frames_until, open_socket, sync

# name, input, output when done: running, done, failed
WORDS = [
    (
        "list_items",
        {"kind": "ticket", "state": "in_progress", "epic": "DEMO-2"},
        {"items": []},
        ("Listing in progress tickets of DEMO-2…", "Listed in progress tickets of DEMO-2"),
        "Could not list in progress tickets of DEMO-2",
    ),
    ("list_items", {}, {}, ("Listing items…", "Listed items"), "Could not list items"),
    ("get_item", {"key": "DEMO-4"}, {}, ("Reading DEMO-4…", "Read DEMO-4"), "Could not read DEMO-4"),
    (
        "list_runnable",
        {"limit": 3},
        {"tickets": []},
        ("Looking up runnable tickets…", "Looked up runnable tickets"),
        "Could not look up runnable tickets",
    ),
    (
        "search_project",
        {"query": "export"},
        {},
        ("Searching the project for “export”…", "Searched the project for “export”"),
        "Could not search the project for “export”",
    ),
    (
        "list_changesets",
        {"status": "proposed"},
        {},
        ("Listing proposed changesets…", "Listed proposed changesets"),
        "Could not list proposed changesets",
    ),
    (
        "propose_changeset",
        {"title": "Split the export", "operations": []},
        {"changeset": {"number": 7, "status": "proposed"}},
        ("Proposing a changeset…", "Proposed changeset #7"),
        "Could not propose a changeset",
    ),
    ("list_skills", {}, {}, ("Listing the skills…", "Listed the skills"), "Could not list the skills"),
    (
        "read_skill",
        {"name": "planning"},
        {},
        ("Reading the skill “planning”…", "Read the skill “planning”"),
        "Could not read the skill “planning”",
    ),
    (
        "search_knowledge",
        {"query": "booking rules"},
        {},
        ("Searching knowledge for “booking rules”…", "Searched knowledge for “booking rules”"),
        "Could not search knowledge for “booking rules”",
    ),
    (
        "get_knowledge",
        {"id": 12},
        {},
        ("Reading knowledge #12…", "Read knowledge #12"),
        "Could not read knowledge #12",
    ),
    (
        "create_knowledge",
        {"kind": "decision", "title": "Replica"},
        {"id": 13, "version": 1},
        ("Writing a knowledge entry…", "Wrote knowledge #13"),
        "Could not write a knowledge entry",
    ),
    (
        "update_knowledge",
        {"id": 12, "version": 2},
        {},
        ("Updating knowledge #12…", "Updated knowledge #12"),
        "Could not update knowledge #12",
    ),
    (
        "repo_tree",
        {"path": "src"},
        {"entries": []},
        ("Listing the files in “src”…", "Listed the files in “src”"),
        "Could not list the files in “src”",
    ),
    (
        "repo_tree",
        {"repository": "app"},
        {},
        ("Listing the repository's files in “app”…", "Listed the repository's files in “app”"),
        "Could not list the repository's files in “app”",
    ),
    (
        "repo_read",
        {"path": "src/booking.py"},
        {},
        ("Reading “src/booking.py”…", "Read “src/booking.py”"),
        "Could not read “src/booking.py”",
    ),
    (
        "repo_search",
        {"pattern": "book_court"},
        {"hits": []},
        ("Searching the code for “book_court”…", "Searched the code for “book_court”"),
        "Could not search the code for “book_court”",
    ),
    (
        "repo_log",
        {"path": "src", "repository": "app"},
        {},
        ("Reading the history of “src” in “app”…", "Read the history of “src” in “app”"),
        "Could not read the history of “src” in “app”",
    ),
    (
        "repo_log",
        {},
        {},
        ("Reading the commit history…", "Read the commit history"),
        "Could not read the commit history",
    ),
    (
        "ask_human",
        {"question": "Friday?"},
        {"answer": "yes"},
        ("Asking a question…", "Asked a question"),
        "Could not ask a question",
    ),
    (
        "start_subchat",
        {"brief": "Replan the Accounts epic."},
        {"session": "x", "outcome": "completed", "answer": "Done.", "changesets": []},
        ("Starting a sub-chat…", "Started a sub-chat"),
        "Could not start a sub-chat",
    ),
    (
        "answer_question",
        {"answer": "Use the replica."},
        {"question": 1, "status": "answered"},
        ("Answering the question…", "Answered the question"),
        "Could not answer the question",
    ),
]


@pytest.mark.parametrize(("name", "args", "output", "ran", "failed"), WORDS)
def test_each_tool_says_in_words_what_it_does_did_or_could_not_do(name, args, output, ran, failed):
    running, done = ran
    assert tool_label(name, args, stage="running") == running
    assert tool_label(name, args, stage="done", output=output) == done
    error = {"error": {"code": "not_found", "message": "No such thing."}}
    assert tool_label(name, args, stage="failed", output=error) == failed


def test_every_tool_of_the_planner_has_its_words():
    assert set(PHRASES) == set(TOOLS)
    assert {name for name, *_ in WORDS} == set(TOOLS)


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("get_item", {"key": 42}, "Could not read an item"),  # the model's input is not the schema's
        ("get_item", "not an object", "Could not read an item"),
        ("get_knowledge", {"id": True}, "Could not read a knowledge entry"),
        ("search_project", {"query": "  "}, "Could not search the project"),
        ("list_items", {"kind": ["ticket"], "state": "<b>"}, "Could not list items"),
        ("drop_tables", {}, "Could not use the tool “drop_tables”"),
    ],
)
def test_input_of_the_wrong_shape_gives_plain_words(name, args, expected):
    assert tool_label(name, args, stage="failed") == expected


def test_a_long_query_is_cut_and_kept_on_one_line():
    words = tool_label("search_project", {"query": "export\n" + "x" * 200}, stage="done")
    assert words.startswith("Searched the project for “export xxx")
    assert words.endswith("…”")
    assert "\n" not in words
    assert len(words) < 100


def test_the_tool_frames_carry_the_words_of_their_stage():
    call_frame = frames.tool_call(id="t1", name="get_item", input={"key": "DEMO-4"})
    assert call_frame["label"] == "Reading DEMO-4…"
    done = frames.tool_result(id="t1", name="get_item", input={"key": "DEMO-4"}, is_error=False, output={})
    assert done["label"] == "Read DEMO-4"
    assert "input" not in done  # the input only words the label
    failed = frames.tool_result(
        id="t1", name="get_item", input={"key": "DEMO-99"}, is_error=True, output="No item DEMO-99."
    )
    assert failed["label"] == "Could not read DEMO-99"


@pytest.mark.django_db(transaction=True)
async def test_the_live_frames_and_the_transcript_say_the_same_words(scripted, session, member):
    scripted.add(call("list_runnable", {"limit": 3}), call("get_item", {"key": "NOPE-99"}), say("Done."))
    ws = await open_socket(session, member)
    await ws.send_json_to({"type": "message", "text": "What can run?"})
    seen = await frames_until(ws, "turn_ended")
    await ws.disconnect()

    labels = [(f["type"], f["label"]) for f in seen if f["type"] in ("tool_call", "tool_result")]
    assert labels == [
        ("tool_call", "Looking up runnable tickets…"),
        ("tool_result", "Looked up runnable tickets"),
        ("tool_call", "Reading NOPE-99…"),
        ("tool_result", "Could not read NOPE-99"),
    ]
    body = (await (await client_for(member)).get(f"/api/v1/planner/sessions/{session.pk}")).json()
    assert [c["label"] for c in body["tool_calls"]] == [
        "Looked up runnable tickets",
        "Could not read NOPE-99",
    ]
    by_message = [m["labels"] for m in body["messages"] if "labels" in m]
    assert [list(labels.values()) for labels in by_message] == [
        ["Looked up runnable tickets"],
        ["Could not read NOPE-99"],
    ]


@pytest.mark.django_db(transaction=True)
async def test_a_request_frame_names_its_call_live_on_connect_and_in_the_transcript(
    scripted, session, member
):
    scripted.add(call("ask_human", {"question": "Friday or Monday?"}))
    ws = await open_socket(session, member)
    await ws.send_json_to({"type": "message", "text": "Plan the release."})
    seen = await frames_until(ws, "request")
    await ws.disconnect()
    asked = next(f for f in seen if f["type"] == "tool_call")
    assert (asked["name"], asked["label"]) == ("ask_human", "Asking a question…")
    assert seen[-1]["tool_use_id"] == asked["id"]

    late = await open_socket(session, member)  # a page that connects while the turn waits
    replayed = await late.receive_json_from()
    await late.disconnect()
    assert (replayed["type"], replayed["tool_use_id"]) == ("request", asked["id"])

    body = (await (await client_for(member)).get(f"/api/v1/planner/sessions/{session.pk}")).json()
    (pending,) = [r for r in body["requests"] if r["status"] == "pending"]
    assert pending["tool_use_id"] == asked["id"]
    (labels,) = [m["labels"] for m in body["messages"] if "labels" in m]
    assert labels == {asked["id"]: "Asking a question…"}  # not run: it waits for the human
    request = await sync(HumanRequest.objects.get)(session=session)
    assert request.tool_use_id == asked["id"]


@pytest.mark.django_db(transaction=True)
async def test_a_stopped_call_without_a_record_reads_as_failed_in_the_transcript(
    planner, model, session, member
):
    model.add(call("ask_human", {"question": "Friday?"}))
    await drive(planner, session, member, "Plan.")
    await planner.stop(session_id=session.pk, user=member)

    body = (await (await client_for(member)).get(f"/api/v1/planner/sessions/{session.pk}")).json()

    (labels,) = [m["labels"] for m in body["messages"] if "labels" in m]
    assert list(labels.values()) == ["Could not ask a question"]
