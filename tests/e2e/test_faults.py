"""Faults of a production deployment, against real processes.

One deployment for the module (``cluster.py``): two daphnes A and B, a Celery worker with its
beat (the sweep that recovers dead turns), a fresh PostgreSQL database and a Redis server of the
tests' own, which the tests kill, start again and flush. Each test
opens its own sessions; the fake model answers by keyword (``Script``). A test
collects what it observed and compares it with what must hold in one assertion,
so a failure shows every expectation at once.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.cluster import BACK_SECONDS, RECOVERY_SECONDS, STREAM_SECONDS, Cluster, cluster_up, wait_for
from tests.e2e.conftest import Script, agent_key
from tests.e2e.work_steps import DEMO, WORK_STEPS, work_of, work_step, work_verdict, work_written
from tests.fakes.client import Client, rest_call
from tests.fakes.messages_api import (
    FakeMessagesAPI,
    HangReply,
    TextReply,
    ToolCallSpec,
    ToolUseReply,
)
from tests.fakes.servers import Server, production_mode
from tests.fakes.watchers import Frame, Watcher

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not production_mode(),
        reason="process deaths, Redis restarts and dropped PostgreSQL connections are faults of the "
        "production mode (two daphnes on PostgreSQL and Redis)",
    ),
]


@pytest.fixture(scope="module")
def cluster(
    fake_api: FakeMessagesAPI, script: Script, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster_up(tmp_path_factory.mktemp("faults"), fake_api, script) as up:
        yield up


@pytest.fixture(autouse=True)
def ready(cluster: Cluster) -> None:
    cluster.ready()


def keyword(name: str) -> str:
    return f"{name}{uuid.uuid4().hex[:8]}"


def _frame_or_none(watcher: Watcher, kind: str, timeout: float, *, after: int = 0) -> Frame | None:
    try:
        return watcher.frame(lambda f: f["type"] == kind, max(timeout, 0.1), kind, after=after)
    except AssertionError:
        return None


def _reason(frame: Frame | None, timeout: float) -> str:
    return frame["reason"] if frame is not None else f"no turn_ended within {timeout:.0f} s"


def _last_answer(body: dict[str, Any]) -> str:
    """The text of the transcript's last message if the planner wrote it, else ""."""
    messages = body["messages"]
    if not messages or messages[-1]["role"] != "assistant":
        return ""
    return "".join(b.get("text", "") for b in messages[-1]["content"] if b.get("type") == "text")


def _texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, text) of each human-side message of a transcript."""
    return [
        (m["kind"], "".join(b.get("text", "") for b in m["content"] if b.get("type") == "text"))
        for m in body["messages"]
        if m["role"] == "user"
    ]


def _ended(body: dict[str, Any]) -> list[str]:
    return [e["data"]["reason"] for e in body["events"] if e["kind"] == "turn_ended"]


def _connection_text(watcher: Watcher, ended: Frame) -> str:
    """The text the connection that received ``ended`` got before it (replay included)."""
    connection = next(r.connection for r in watcher.received if r.frame is ended)
    text = []
    for received in watcher.received:
        if received.frame is ended:
            break
        if received.connection == connection and received.frame["type"] == "text_delta":
            text.append(received.frame["text"])
    return "".join(text)


def _send_once_back(client: Client, session_id: str, text: str, timeout: float) -> int:
    """Send ``text`` until it is accepted (a process may answer 503 until it noticed Redis is
    back); the last status within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        status, _ = client.request("POST", f"/api/v1/planner/sessions/{session_id}/messages/", {"text": text})
        if status != 503 or time.monotonic() > deadline:
            return status
        time.sleep(0.25)


def _words(tag: str, count: int) -> list[str]:
    return [f"{tag}{i} " for i in range(count)]


# -- a. a process dies mid-turn ---------------------------------------------------------------------------


def test_watchers_everywhere_hear_that_a_dead_process_s_turn_failed(cluster: Cluster) -> None:
    hang = keyword("dies")
    cluster.script.on(hang, HangReply(after_deltas=1, reply=TextReply("Working on it", chunks=3)))
    session = cluster.session()
    with cluster.watch(cluster.a, session, name="on A"), cluster.watch(cluster.b, session) as on_b:
        assert (
            cluster.on_a.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": f"Plan {hang}"})[
                "meaning"
            ]
            == "started"
        )
        assert on_b.frame(lambda f: f["type"] == "text_delta", STREAM_SECONDS, "the turn streaming to B")
        cluster.a.kill()
        cluster.a.start(wait=False)  # back for the next test; it does not touch the session
        deadline = time.monotonic() + RECOVERY_SECONDS
        with cluster.watch(cluster.b, session, name="late on B") as late:
            first = late.frames[0]
            ended_b = _frame_or_none(on_b, "turn_ended", deadline - time.monotonic())
            ended_late = _frame_or_none(late, "turn_ended", deadline - time.monotonic())
    state = cluster.on_b.wait_for(session, lambda b: b["state"] != "running", RECOVERY_SECONDS)["state"]

    assert {
        "watcher on B before the kill": _reason(ended_b, RECOVERY_SECONDS),
        "watcher on B after the kill, first frame": (first["type"], first.get("state")),
        "watcher on B after the kill": _reason(ended_late, RECOVERY_SECONDS),
        "session": state,
    } == {
        "watcher on B before the kill": "failed",
        "watcher on B after the kill, first frame": ("state", "running"),
        "watcher on B after the kill": "failed",
        "session": "idle",
    }


# -- b. Redis restarts mid-turn ---------------------------------------------------------------------------


def test_a_redis_restart_mid_turn_is_a_clear_503_and_watchers_resync(cluster: Cluster) -> None:
    slow, fresh = keyword("outage"), keyword("after")
    release = threading.Event()
    first_words, fresh_words = _words("alpha", 20), _words("omega", 20)
    cluster.script.on(
        slow,
        HangReply(
            after_deltas=3,
            release=release,
            reply=TextReply(chunks=first_words, delay_between_deltas=0.2),
        ),
    )
    cluster.script.on(fresh, TextReply(chunks=fresh_words, delay_between_deltas=0.2))
    running, idle, later = cluster.session(), cluster.session(), cluster.session()
    w_running = cluster.watch(cluster.b, running, reconnect=True, name="B, running turn").start()
    w_later = cluster.watch(cluster.b, later, reconnect=True, name="B, the turn after").start()
    try:
        cluster.on_a.post(f"/api/v1/planner/sessions/{running}/messages/", {"text": f"Stream {slow}"})
        w_running.frame(lambda f: f["type"] == "text_delta", STREAM_SECONDS, "the turn streaming to B")

        cluster.redis.stop()
        try:
            status, body = cluster.on_b.request(
                "POST", f"/api/v1/planner/sessions/{idle}/messages/", {"text": "Sent during the outage"}
            )
            during = cluster.watch(cluster.b, idle, name="B, opened during the outage").start(wait_open=False)
            try:
                during.wait_for(lambda w: bool(w.closes or w.connect_failures), 10, "a close")
                opened = f"closed {during.closes[0]}" if during.closes else "could not connect"
            except AssertionError:
                opened = f"still open 10 s later, frames {[f['type'] for f in during.frames]}"
            finally:
                during.close()
        finally:
            cluster.redis.start()

        started_status = _send_once_back(cluster.on_a, later, f"Stream {fresh}", BACK_SECONDS)
        release.set()
        # Each turn streams 20 deltas 0.2 s apart (4 s) after the fresh one started or the hang ended.
        fresh_end = _frame_or_none(w_later, "turn_ended", 4 + 10)
        first_end = _frame_or_none(w_running, "turn_ended", 4 + 20)
        other_closes = [f"{w.name}: {c}" for w in (w_running, w_later) for c in w.closes if c != 4503]
    finally:
        w_running.close()
        w_later.close()

    error = body.get("error") if isinstance(body, dict) else None
    assert {
        "message during the outage": (
            status,
            error.get("code") if isinstance(error, dict) else str(body)[:120],
        ),
        "socket opened during the outage": opened,
        "running turn, on B": (
            _reason(first_end, 24),
            first_end is not None and _connection_text(w_running, first_end) == "".join(first_words),
        ),
        "turn sent to A once Redis is back": started_status,
        "that turn, on B": (
            _reason(fresh_end, 14),
            fresh_end is not None and _connection_text(w_later, fresh_end) == "".join(fresh_words),
        ),
        "watchers on B closed otherwise than with 4503": other_closes,
    } == {
        "message during the outage": (503, "unavailable"),
        "socket opened during the outage": "closed 4503",
        "running turn, on B": ("completed", True),  # all of its text on the connection that saw it end
        "turn sent to A once Redis is back": 202,
        "that turn, on B": ("completed", True),
        "watchers on B closed otherwise than with 4503": [],  # closed with 4503, or kept open
    }


def _status_and_code(answer: tuple[int, Any]) -> tuple[int, str | None]:
    status, body = answer
    error = body.get("error") if isinstance(body, dict) else None
    return status, error.get("code") if isinstance(error, dict) else None


def _tool_json(result: Any) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(result.content[0].text)
    return parsed


async def _mcp_calls(server: Server, token: str, item: str) -> dict[str, Any]:
    """What an MCP client sees of a read (get_item) and a write (ask_question): a tool result, or
    the exception the client raised (a bare 500, say)."""
    seen: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            got = await session.call_tool("get_item", {"project": "DEMO", "key": item})
            seen["get_item"] = ("error" if got.is_error else "ok", _tool_json(got).get("key"))
            asked = await session.call_tool("ask_question", {"project": "DEMO", "text": "Asked then?"})
            error = _tool_json(asked).get("error") or {}
            readable = "Redis" in str(error.get("message"))
            seen["ask_question"] = ("error" if asked.is_error else "ok", error.get("code"), readable)
    except Exception as exc:  # what the client met (a bare 500, say) is the observation
        seen["failed"] = f"{type(exc).__name__}: {exc}"[:200]
    return seen


def test_a_redis_outage_serves_agents_reads_and_refuses_their_writes_with_503(cluster: Cluster) -> None:
    questions = "/api/v1/projects/DEMO/questions/"
    asked = cluster.on_a.post(questions, {"text": f"Which court is booked {keyword('court')}?"})
    item = cluster.on_a.get("/api/v1/projects/DEMO/runnable/")["results"][0]["key"]
    cluster.redis.stop()
    try:
        on_b = cluster.on_b
        rest = {
            "list questions": _status_and_code(on_b.request("GET", questions)),
            "read a question": _status_and_code(on_b.request("GET", f"{questions}{asked['id']}/")),
            "ask": _status_and_code(on_b.request("POST", questions, {"text": "Asked during the outage?"})),
            "withdraw": _status_and_code(on_b.request("POST", f"{questions}{asked['id']}/withdraw/")),
        }
        mcp = asyncio.run(_mcp_calls(cluster.b, on_b.token, item))
    finally:
        cluster.redis.start()
    # Not withdrawn: open, or left to the humans once its sub-chat's turn ended without an answer.
    not_withdrawn = cluster.on_a.get(f"{questions}{asked['id']}/")["status"] in ("open", "needs_human")

    assert {"REST": rest, "MCP": mcp, "the question asked before is not withdrawn": not_withdrawn} == {
        "REST": {
            "list questions": (200, None),
            "read a question": (200, None),
            "ask": (503, "unavailable"),
            "withdraw": (503, "unavailable"),
        },
        "MCP": {
            "get_item": ("ok", item),
            "ask_question": ("error", "unavailable", True),  # a message naming Redis
        },
        "the question asked before is not withdrawn": True,
    }


def test_a_redis_outage_answers_an_agent_s_work_with_its_write_or_a_503_never_both(cluster: Cluster) -> None:
    key = agent_key(cluster.a)
    item = rest_call(cluster.a.url, f"Bearer {key}", "GET", f"{DEMO}runnable/")[1]["results"][0]["key"]
    verdicts: list[tuple[str, str]] = []
    claim, last = None, work_of(cluster.a, key, item)
    cluster.redis.stop()
    try:
        for step in WORK_STEPS:
            before = work_of(cluster.b, key, item)
            answer = work_step(cluster.b, key, step[0], item, claim)
            claim = answer[1].get("id", claim) if step[0] == "claim" and answer[0] == 201 else claim
            last = work_of(cluster.b, key, item)
            verdicts.append((step[0], work_verdict(answer, before, last, work_written(step, before))))
            if verdicts[-1][1] != "written":
                break  # what follows needs this step's write
    finally:
        cluster.redis.start()
    cluster.worker.wait_sweeps(1, timeout=BACK_SECONDS + 30)  # its broker back, the worker works
    unacceptable = [(what, verdict) for what, verdict in verdicts if verdict not in ("written", "refused")]
    # Once Redis is back nothing has changed behind the answers (no write came late, or twice).
    assert (unacceptable, work_of(cluster.a, key, item)) == ([], last), verdicts


# -- c. one liveness signal -------------------------------------------------------------------------------


def test_a_turn_with_a_fresh_heartbeat_is_never_recovered(cluster: Cluster) -> None:
    hang = keyword("alive")
    release = threading.Event()
    cluster.script.on(
        hang,
        HangReply(after_deltas=1, release=release, reply=TextReply("First thoughts", chunks=2)),
        TextReply("Noted your point."),
    )
    session = cluster.session()
    cluster.on_a.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": f"Think {hang}"})
    cluster.wait_requests(hang)
    try:
        cluster.redis.flushall()  # the processes' presence keys vanish; A's heartbeat is a second old
        seen_on_b = cluster.on_b.transcript(session)["state"]
        cluster.worker.wait_sweeps(1, timeout=RECOVERY_SECONDS + 30)
        steer = "Also weigh the audit trail"
        sent = cluster.on_b.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": steer})
    finally:
        release.set()
    body = cluster.on_a.wait_for(
        session,
        lambda b: b["state"] == "idle" and all(r.finished.is_set() for r in cluster.requests_naming(hang)),
        RECOVERY_SECONDS,
    )

    assert {
        "state read on B": seen_on_b,
        "message sent on B": sent["meaning"],
        "turns": body["turn_count"],
        "turn ends": _ended(body),
        "the message": [kind for kind, text in _texts(body) if text == steer],
    } == {
        "state read on B": "running",
        "message sent on B": "steered",
        "turns": 1,
        "turn ends": ["completed"],
        "the message": ["steer"],
    }


# -- d. steering just after the turn's process died -------------------------------------------------------


def test_a_message_sent_as_the_turn_s_process_dies_is_never_lost(cluster: Cluster) -> None:
    hang, steering, after = keyword("orphan"), keyword("steer"), keyword("next")
    cluster.script.on(hang, HangReply(after_deltas=1, reply=TextReply("Never finishing", chunks=2)))
    cluster.script.on(steering, TextReply("Taking your note into account."))
    cluster.script.on(after, TextReply("Here is where we are."))
    session = cluster.session()
    cluster.on_a.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": f"Plan {hang}"})
    cluster.wait_requests(hang)
    cluster.a.kill()
    cluster.a.start(wait=False)  # back for the next test
    # The turn that answers the steering sees both messages, merged into one: the hang's keyword
    # must not hang it too.
    cluster.script.on(hang, TextReply("Taking your note into account."))
    steer = f"Keep the audit trail {steering}"
    sent = cluster.on_b.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": steer})
    # Taken as steering of the dying turn, it is answered once the turn is recovered (or, sent after
    # the recovery, it starts the turn itself).
    body = cluster.on_b.wait_for(
        session,
        lambda b: b["state"] == "idle" and _last_answer(b) == "Taking your note into account.",
        RECOVERY_SECONDS + 30,
    )
    kept = any(steer in text for _, text in _texts(body))
    assert (
        cluster.on_b.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": f"And now? {after}"})[
            "meaning"
        ]
        == "started"
    )
    cluster.wait_requests(after)
    history = cluster.requests_naming(after)[0].body.decode()

    assert {
        "meaning": sent["meaning"] in ("steered", "started"),
        "the message in the transcript": kept,
        "the message in the next turn's history": steer in history,
    } == {
        "meaning": True,
        "the message in the transcript": True,
        "the message in the next turn's history": True,
    }


# -- e. a dropped PostgreSQL connection -------------------------------------------------------------------


def test_a_dropped_database_connection_does_not_discard_a_paid_answer(cluster: Cluster) -> None:
    hang = keyword("paid")
    release = threading.Event()
    cluster.script.on(
        hang, HangReply(after_deltas=1, release=release, reply=TextReply("The paid answer", chunks=2))
    )
    session = cluster.session()
    cluster.on_a.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": f"Answer {hang}"})
    cluster.wait_requests(hang)
    try:
        cluster.deployment.drop_connections()
    finally:
        release.set()
    body = cluster.on_a.wait_for(session, lambda b: b["state"] == "idle", RECOVERY_SECONDS)

    assert {
        "turn ends": _ended(body),
        "last message": (body["messages"][-1]["role"], body["messages"][-1]["content"]),
        "model requests": len(cluster.requests_naming(hang)),
    } == {
        "turn ends": ["completed"],
        "last message": ("assistant", [{"type": "text", "text": "The paid answer"}]),
        "model requests": 1,
    }


# -- e. requests to humans across processes ----------------------------------------------------------------


def test_a_request_and_its_answer_reach_watchers_in_every_process(cluster: Cluster) -> None:
    word = keyword("ask")
    ask = {"question": f"Which court {word}?", "options": ["One", "Two"]}
    cluster.script.on(
        word, ToolUseReply([ToolCallSpec("ask_human", ask)]), TextReply(f"Court two it is {word}.", chunks=2)
    )
    session = cluster.session()
    with cluster.watch(cluster.a, session, name="on A") as on_a, cluster.watch(cluster.b, session) as on_b:
        cluster.on_a.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": f"Book {word}"})
        request_on_b = on_b.frame(lambda f: f["type"] == "request", STREAM_SECONDS, "the request on B")
        on_a.frame(lambda f: f["type"] == "request", STREAM_SECONDS, "the request on A")
        # Answered through B: the turn resumes there, and A's watcher hears all of it.
        cluster.on_b.post(
            f"/api/v1/planner/sessions/{session}/answers/", {"request": request_on_b["id"], "text": "Two"}
        )
        resolved = _frame_or_none(on_a, "request_resolved", STREAM_SECONDS)
        ended = _frame_or_none(on_a, "turn_ended", STREAM_SECONDS)
    with cluster.watch(cluster.a, session, name="late on A") as late:
        first = late.frames[0]
    assert {
        "resolved on A": (resolved or {}).get("outcome"),
        "by": (resolved or {}).get("by"),
        "ended on A": _reason(ended, STREAM_SECONDS),
        "text on A": _connection_text(on_a, ended) if ended is not None else "",
        "late watcher": (first["type"], first.get("state")),
    } == {
        "resolved on A": "answered",
        "by": "demo",
        "ended on A": "completed",
        "text on A": f"Court two it is {word}.",
        "late watcher": ("state", "idle"),
    }


def test_a_changeset_decided_in_one_process_reaches_the_chat_s_watchers_in_every_process(
    cluster: Cluster,
) -> None:
    word = keyword("propose")
    operations = [{"op": "create", "kind": "ticket", "fields": {"title": f"Export {word}"}}]
    cluster.script.on(
        word,
        ToolUseReply(
            [ToolCallSpec("propose_changeset", {"title": f"Export {word}", "operations": operations})]
        ),
        TextReply(f"Proposed {word}."),
    )
    session = cluster.session()
    cluster.on_a.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": f"Plan {word}"})
    wait_for(
        lambda: cluster.on_a.get(f"/api/v1/planner/sessions/{session}")["state"] == "idle",
        STREAM_SECONDS,
        "the proposing turn",
    )
    number = cluster.on_a.get(f"/api/v1/planner/sessions/{session}")["changesets"][0]["number"]
    with cluster.watch(cluster.a, session, name="on A") as on_a, cluster.watch(cluster.b, session) as on_b:
        # Applied through B, as the admin or REST of any process would: A's watcher hears it too.
        cluster.on_b.post(f"/api/v1/projects/DEMO/changesets/{number}/apply/", {})
        heard = {
            name: watcher.frame(lambda f: f["type"] == "changeset", STREAM_SECONDS, f"the decision on {name}")
            for name, watcher in (("A", on_a), ("B", on_b))
        }
    assert {name: (f["number"], f["status"], f["decided_by"]) for name, f in heard.items()} == {
        "A": (number, "applied", "demo"),
        "B": (number, "applied", "demo"),
    }
