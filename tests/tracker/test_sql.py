"""Hot-path statements in SQL (tracker/db/sql.py) against their ORM twins, in both databases."""

from __future__ import annotations

import datetime
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from planner.agent.messages import ChatMessage, TextBlock, ToolUseBlock
from planner.domain.services import sessions
from planner.domain.services.sessions import rows
from planner.domain.tools.base import ToolOutcome
from planner.ground.process import PROCESS_ID
from planner.models import Event, Message, Session, SessionState, ToolCall, UsageRecord
from tracker.db import model_rows, sql
from tracker.errors import ConflictError
from tracker.services.activity import Actor
from tracker.services.projects import project_update
from tracker.services.skills import skill_version_create

pytestmark = pytest.mark.django_db


def fields_of(obj) -> dict:
    """Every concrete field's value (foreign keys by id)."""
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


@pytest.fixture
def session(project, member):
    return Session.objects.create(
        project=project,
        user=member,
        title="Plans",
        focus=["BAL-1", "BAL-2"],
        steering=[{"text": 'also ü and "quotes"', "author": member.username}],
        heartbeat_at=timezone.now(),
        resume_waiting=True,
        summary_up_to=None,
    )


def test_a_session_loaded_from_sql_equals_the_orm_s(session):
    statement = f"SELECT {model_rows.columns(Session, 's')} FROM planner_session s WHERE s.id = %s"
    found = sql.row(statement, [model_rows.prep(Session, "id", session.pk)])
    assert found is not None
    loaded = model_rows.load(Session, found)
    assert fields_of(loaded) == fields_of(Session.objects.get(pk=session.pk))
    assert loaded._state.adding is False  # saved through the ORM, it updates rather than inserts
    assert isinstance(loaded.heartbeat_at, datetime.datetime)
    assert timezone.is_aware(loaded.heartbeat_at)


def test_the_locked_session_comes_with_its_project_and_organization(session):
    with transaction.atomic():
        locked = rows.session_locked(session.pk)
    assert locked is not None
    orm = Session.objects.select_related("project__organization").get(pk=session.pk)
    assert fields_of(locked) == fields_of(orm)
    assert fields_of(locked.project) == fields_of(orm.project)
    assert fields_of(locked.project.organization) == fields_of(orm.project.organization)


def test_rows_inserted_in_sql_read_back_as_the_orm_writes_them(session, member):
    when = timezone.now()
    twins: dict[Any, Any] = {
        Message: lambda n: Message(
            session=session, seq=n, role="user", kind="human", content=[{"type": "text", "text": "ü"}], turn=1
        ),
        ToolCall: lambda n: ToolCall(
            session=session,
            turn=1,
            tool_use_id="toolu_1",
            name="get_item",
            input={"key": "BAL-1"},
            output={"items": [1, None, "x"]},
            is_error=True,
            duration_ms=1.5,
            actor="planner",
            on_behalf_of=member,
        ),
        UsageRecord: lambda n: UsageRecord(
            project=session.project, session=session, purpose="turn", model="m", input_tokens=3, outcome="ok"
        ),
        Event: lambda n: Event(session=session, kind="turn_started", turn=2, data={"skills": []}),
    }
    for model, make in twins.items():
        model_rows.insert([make(1), make(2)])
        make(3).save()
        ours_a, ours_b, orm = (
            model_to_dict(row, exclude=["id", "seq"]) for row in model.objects.order_by("pk")
        )
        assert ours_a == ours_b == orm, model.__name__
        assert all(row.created_at >= when for row in model.objects.all())


def test_an_update_in_sql_writes_what_the_orm_would(session):
    now = timezone.now()
    changed = model_rows.update(
        Session,
        {"focus": ["BAL-9"], "steering": [], "state": SessionState.RUNNING, "heartbeat_at": now},
        "id = %s AND steering <> %s",
        [model_rows.prep(Session, "id", session.pk), model_rows.prep(Session, "steering", [])],
    )
    assert changed == 1
    session.refresh_from_db()
    assert (session.focus, session.steering, session.state, session.heartbeat_at) == (
        ["BAL-9"],
        [],
        "running",
        now,
    )
    # JSON compares as the ORM compares it: the emptied queue now matches ``steering = []``.
    assert Session.objects.filter(pk=session.pk, steering=[]).exists()
    again = model_rows.update(
        Session,
        {"title": "x"},
        "id = %s AND steering = %s",
        [model_rows.prep(Session, "id", session.pk), model_rows.prep(Session, "steering", [])],
    )
    assert again == 1


def test_an_update_returning_gives_the_row_as_it_left_it_in_the_update_s_own_statement(session):
    key = model_rows.prep(Session, "id", session.pk)
    returning = (
        "title, steering, (SELECT COUNT(*) FROM planner_event e WHERE e.session_id = planner_session.id)"
    )
    where = "id = %s AND title = %s"

    def moved(title: str) -> sql.Row | None:
        changes = {"title": title, "steering": []}
        return model_rows.update_returning(
            Session, changes, where, [key, "Plans"], pk=key, returning=returning
        )

    with transaction.atomic(), sql.batched(), CaptureQueriesContext(connection) as sent:
        model_rows.insert([event(session, "waiting")])
        found = moved("Moved")
        missed = moved("Never")  # the title is no longer "Plans"
    assert found is not None
    title, steering, events = found
    assert (title, sql.json_out(steering), events) == ("Moved", [], 1)  # the waiting write went first
    assert missed is None
    assert Session.objects.get(pk=session.pk).title == "Moved"
    # PostgreSQL: the insert went with the first update, each update returned in its own statement;
    # SQLite reads the row after an update that changed it.
    assert len(sent) == (2 if connection.vendor == "postgresql" else 4)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("last", [False, True])
def test_a_step_s_save_is_one_round_trip_and_tells_what_waits(session, last):
    Session.objects.filter(pk=session.pk).update(
        state=SessionState.RUNNING, turn_owner=PROCESS_ID, turn_count=1
    )
    organization = session.project.organization
    organization.activity_seq = session.last_seen_seq + 1
    organization.save()
    answer = ChatMessage(role="assistant", content=(TextBlock("Looking"),), kind="assistant")
    with pipelines() as sent_in, CaptureQueriesContext(connection) as sent:
        saved = sessions.message_save(session_id=session.pk, turn=1, after_seq=0, message=answer, last=last)
    # The fixture's session has steering queued (so even the last answer does not end the turn),
    # and the organization moved on since it looked.
    assert (saved.message.seq, saved.inputs_waiting, saved.steering_waiting, saved.ended) == (
        1,
        True,
        True,
        False,
    )
    row = Session.objects.get(pk=session.pk)
    assert (row.last_message_seq, row.state, row.turn_owner) == (1, "running", PROCESS_ID)
    assert Message.objects.get(session=session).content == [{"type": "text", "text": "Looking"}]
    assert kinds(session) == []  # no turn_ended
    if connection.vendor == "postgresql":
        # Django logs its own BEGIN and COMMIT, which it never sends here
        statements = [q["sql"] for q in sent if q["sql"] not in {"BEGIN", "COMMIT"}]
        assert len(statements) == 1
        assert statements[0].startswith("WITH moved AS (UPDATE")
        # prepared, in one pipeline with its transaction's BEGIN and COMMIT
        assert "$1" in statements[0]
        (pipeline,) = sent_in
        assert pipeline is not None
        # its commit need not wait for the disk: the transaction says so in the same pipeline
        assert sent_in.control == [("BEGIN", pipeline), (sql.NO_FLUSH, pipeline), ("COMMIT", pipeline)]


def durability(cursor: Any) -> object:
    """What a commit on this connection waits for: PostgreSQL's ``synchronous_commit`` for the
    transaction at hand; SQLite's journal mode and ``synchronous`` (1: NORMAL)."""
    if connection.vendor == "postgresql":
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]
    cursor.execute("PRAGMA journal_mode")
    mode = cursor.fetchone()[0]
    cursor.execute("PRAGMA synchronous")
    return (mode, cursor.fetchone()[0])


def test_a_step_s_save_within_a_caller_s_transaction_leaves_its_commit_as_it_was(session):
    """The step's own commit waits for no disk (above, on PostgreSQL; SQLite's never does in the
    embedded mode); a caller's transaction around it, which may hold more, commits as it would."""
    Session.objects.filter(pk=session.pk).update(
        state=SessionState.RUNNING, turn_owner=PROCESS_ID, turn_count=1
    )
    answer = ChatMessage(role="assistant", content=(TextBlock("Looking"),), kind="assistant")
    with connection.cursor() as cursor:
        before = durability(cursor)

    saved = sessions.message_save(session_id=session.pk, turn=1, after_seq=0, message=answer)

    with connection.cursor() as cursor:  # still the test's transaction
        after = durability(cursor)
    assert saved.message.seq == 1
    if connection.vendor == "postgresql":
        assert before == after == "on"
    else:  # WAL and NORMAL: a commit may be lost to a crash of the machine, never half of one
        assert before == after == ("wal", 1)


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="an UPDATE with INSERTs in its WITH: PostgreSQL's")
def test_a_last_statement_after_waiting_writes_can_commit_without_the_disk_too(session):
    key = model_rows.prep(Session, "id", session.pk)
    with transaction.atomic(), sql.batched():
        model_rows.insert([event(session, "waiting")])
        found = model_rows.update_inserting(
            Session,
            {"title": "Moved"},
            "id = %s",
            [key],
            returning={"title": "title"},
            inserting=[(event(session, "after"), "")],
            no_flush=True,
        )
        with connection.cursor() as cursor:
            after = durability(cursor)
    assert (found, after) == (("Moved",), "off")
    assert kinds(session) == ["waiting", "after"]


def test_a_step_s_rows_are_stored_in_order_with_every_value(session, member):
    Session.objects.filter(pk=session.pk).update(
        state=SessionState.RUNNING, turn_owner=PROCESS_ID, turn_count=1
    )
    records = sessions.StepRecords(project_id=session.project_id)
    for n in range(5):
        call = ToolUseBlock(f"toolu_{n}", "get_item", {"key": f"BAL-{n}"})
        output: dict[str, Any] = {"n": n} if n % 2 else {"error": None}
        outcome = ToolOutcome(output=output, is_error=n == 3)
        records.tools.append(sessions.ToolRecord(call, outcome, 1.5 * n, "planner", member.pk))
    answer = ChatMessage(role="assistant", content=(TextBlock("Looking"),), kind="assistant")
    results = ChatMessage(role="user", content=(TextBlock("results"),), kind="tool_results")
    saved = sessions.message_save(
        session_id=session.pk, turn=1, after_seq=0, message=answer, then=results, records=records
    )
    assert [m.seq for m in saved.messages] == [1, 2]
    stored = list(ToolCall.objects.filter(session=session).order_by("pk"))
    assert [c.tool_use_id for c in stored] == [f"toolu_{n}" for n in range(5)]
    expected: list[tuple[dict[str, Any], bool, float]] = [
        ({"n": n} if n % 2 else {"error": None}, n == 3, 1.5 * n) for n in range(5)
    ]
    assert [(c.output, c.is_error, c.duration_ms) for c in stored] == expected
    assert {(c.on_behalf_of_id, c.actor, c.turn) for c in stored} == {(member.pk, "planner", 1)}
    assert list(Message.objects.filter(session=session).order_by("seq").values_list("kind", flat=True)) == [
        "assistant",
        "tool_results",
    ]


@pytest.mark.django_db(transaction=True)
def test_the_last_answer_s_save_ends_the_turn_when_no_steering_waits(session):
    Session.objects.filter(pk=session.pk).update(
        state=SessionState.RUNNING, turn_owner=PROCESS_ID, turn_count=1, steering=[]
    )
    answer = ChatMessage(role="assistant", content=(TextBlock("Done"),), kind="assistant")
    saved = sessions.message_save(session_id=session.pk, turn=1, after_seq=0, message=answer, last=True)
    assert (saved.ended, saved.inputs_waiting) == (True, False)
    row = Session.objects.get(pk=session.pk)
    assert (row.last_message_seq, row.state, row.turn_owner, row.heartbeat_at) == (1, "idle", "", None)
    assert kinds(session) == ["turn_ended"]
    assert Event.objects.get(session=session).data == {"reason": "completed"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("moved", ["superseded", "changed"])
def test_a_step_s_save_that_finds_its_row_moved_stores_nothing(session, moved):
    Session.objects.filter(pk=session.pk).update(
        state=SessionState.RUNNING,
        turn_owner=PROCESS_ID if moved == "changed" else "elsewhere:1:dead",
        turn_count=1,
        last_message_seq=1 if moved == "changed" else 0,
    )
    answer = ChatMessage(role="assistant", content=(TextBlock("Late"),), kind="assistant")
    usage = sessions.StepRecords(project_id=session.project_id)
    expected = sessions.TurnSupersededError if moved == "superseded" else ConflictError
    with pytest.raises(expected):
        sessions.message_save(
            session_id=session.pk, turn=1, after_seq=0, message=answer, records=usage, last=True
        )
    assert (Message.objects.filter(session=session).count(), kinds(session)) == (0, [])
    assert connection.get_autocommit()  # nothing left open
    row = Session.objects.get(pk=session.pk)
    assert row.state == "running"


@pytest.mark.django_db(transaction=True)
def test_a_step_s_save_that_fails_keeps_nothing_and_leaves_the_connection_usable(session):
    Session.objects.filter(pk=session.pk).update(
        state=SessionState.RUNNING, turn_owner=PROCESS_ID, turn_count=1, steering=[]
    )
    Message.objects.create(session=session, seq=1, role="user", kind="human", content=[], turn=1)
    answer = ChatMessage(role="assistant", content=(TextBlock("Done"),), kind="assistant")
    with pytest.raises(IntegrityError):  # seq 1 is taken: the insert fails after the update moved the row
        sessions.message_save(session_id=session.pk, turn=1, after_seq=0, message=answer, last=True)
    assert connection.get_autocommit()
    row = Session.objects.get(pk=session.pk)
    assert (row.last_message_seq, row.state, row.turn_owner) == (0, "running", PROCESS_ID)
    assert (kinds(session), Message.objects.filter(session=session).count()) == ([], 1)


def test_what_waits_reads_steering_and_the_organization_s_activity(session):
    assert rows.waiting(session.pk) == (True, False)
    session.project.organization.activity_seq = session.last_seen_seq + 1
    session.project.organization.save()
    Session.objects.filter(pk=session.pk).update(steering=[])
    assert rows.waiting(session.pk) == (False, True)


# --- writes sent with the next statement (sql.batched)


def event(session, kind: str) -> Event:
    return Event(session=session, kind=kind, turn=1, data={"n": kind})


def kinds(session) -> list[str]:
    return list(Event.objects.filter(session=session).order_by("pk").values_list("kind", flat=True))


def test_batched_writes_go_with_the_next_read_in_one_round_trip_on_postgresql(session):
    with transaction.atomic(), CaptureQueriesContext(connection) as sent, sql.batched():
        model_rows.insert([event(session, "a")])
        model_rows.insert([event(session, "b"), event(session, "c")])
        counted = sql.row(
            "SELECT COUNT(*) FROM planner_event WHERE session_id = %s",
            [model_rows.prep(Session, "id", session.pk)],
        )
    assert counted == (3,)  # the read ran after the writes
    assert kinds(session) == ["a", "b", "c"]
    # SQLite runs in the process: no round trip to save, each statement runs at once.
    assert len(sent) == (1 if connection.vendor == "postgresql" else 3)


def test_an_orm_statement_sends_what_waits_first_and_sees_it(session):
    with transaction.atomic(), sql.batched():
        model_rows.insert([event(session, "queued")])
        seen = kinds(session)  # through the ORM
        model_rows.update_later(
            Session, {"title": "Renamed"}, "id = %s", [model_rows.prep(Session, "id", session.pk)]
        )
        title = Session.objects.values_list("title", flat=True).get(pk=session.pk)
    assert (seen, title) == (["queued"], "Renamed")


def test_what_waits_at_the_end_of_the_batch_is_written(session):
    with transaction.atomic():
        with sql.batched():
            model_rows.insert([event(session, "last")])
        assert kinds(session) == ["last"]


def test_an_update_after_waiting_writes_counts_its_own_rows(session):
    where, params = "id = %s", [model_rows.prep(Session, "id", session.pk)]
    with transaction.atomic(), sql.batched():
        model_rows.insert([event(session, "a"), event(session, "b")])
        changed = model_rows.update(Session, {"title": "Once"}, where, params)
        missed = model_rows.update(
            Session, {"title": "Never"}, "id = %s", [model_rows.prep(Session, "id", uuid.uuid4())]
        )
    assert (changed, missed) == (1, 0)


def test_a_savepoint_rolled_back_undoes_the_writes_that_waited_inside_it(session):
    def inner() -> None:
        with transaction.atomic():
            model_rows.insert([event(session, "undone")])
            raise RuntimeError("the inner block fails")

    with transaction.atomic(), sql.batched():
        model_rows.insert([event(session, "kept")])
        with pytest.raises(RuntimeError):
            inner()
        assert kinds(session) == ["kept"]


def test_a_failing_write_fails_the_statement_it_went_with_and_nothing_is_kept(session):
    def message() -> Message:
        return Message(session=session, seq=1, role="user", kind="human", content=[], turn=1)

    def step() -> None:
        with transaction.atomic(), sql.batched():
            model_rows.insert([event(session, "lost")])
            model_rows.insert([message()])
            model_rows.insert([message()])  # the same seq again
            sql.row("SELECT 1")

    with pytest.raises(IntegrityError):
        step()
    assert (kinds(session), Message.objects.filter(session=session).count()) == ([], 0)


@contextmanager
def pipelines() -> Iterator[Sent]:
    """Per statement the connection ran meanwhile, the psycopg pipeline it was sent in (None when
    sent alone): statements of one pipeline go to PostgreSQL together, their answers read at its
    end, one round trip. The BEGIN and COMMIT sent straight on psycopg's connection, with theirs,
    are in ``control``."""
    connection.ensure_connection()
    raw = connection.connection
    opened: list[object] = []
    sent_in = Sent()

    @contextmanager
    def pipeline() -> Iterator[Any]:
        with type(raw).pipeline(raw) as opening:
            opened.append(opening)
            yield opening

    def seen(execute: Any, sql_: str, params: Any, many: bool, context: Any) -> Any:
        piped = connection.vendor == "postgresql" and raw.pgconn.pipeline_status
        sent_in.append(opened[-1] if piped else None)
        return execute(sql_, params, many, context)

    if connection.vendor != "postgresql":  # SQLite runs in the process: nothing to send together
        with connection.execute_wrapper(seen):
            yield sent_in
        return

    def execute(query: Any, *args: Any, **kwargs: Any) -> Any:
        sent_in.control.append((str(query), opened[-1] if raw.pgconn.pipeline_status else None))
        return type(raw).execute(raw, query, *args, **kwargs)

    raw.pipeline, raw.execute = pipeline, execute
    try:
        with connection.execute_wrapper(seen):
            yield sent_in
    finally:
        del raw.pipeline, raw.execute


class Sent(list[Any]):
    """:func:`pipelines`' record."""

    def __init__(self) -> None:
        super().__init__()
        self.control: list[tuple[str, Any]] = []


def test_result_sets_reads_each_statement_s_rows_in_one_round_trip_on_postgresql(session):
    where = [model_rows.prep(Session, "id", session.pk)]
    statements = [
        ("SELECT title FROM planner_session WHERE id = %s", where),
        ("SELECT 1 WHERE 1 = 0", []),
        ("SELECT 2 UNION ALL SELECT 3 ORDER BY 1", []),
    ]
    with pipelines() as sent_in:
        found = sql.result_sets(statements)
    assert found == [[("Plans",)], [], [(2,), (3,)]]
    if connection.vendor == "postgresql":
        assert len(sent_in) == 3
        assert sent_in[0] is not None
        assert len(set(map(id, sent_in))) == 1
    else:
        assert sent_in == [None, None, None]


def test_reads_read_ahead_are_answered_from_what_was_read_once_each(session):
    where = [model_rows.prep(Session, "id", session.pk)]
    title = ("SELECT title FROM planner_session WHERE id = %s", where)
    states = [("SELECT state FROM planner_session WHERE id = %s", where), ("SELECT 2", [])]
    with pipelines() as sent_in, CaptureQueriesContext(connection) as sent:
        with sql.reading_ahead([title, title, *states]):
            ahead = len(sent)
            Session.objects.filter(pk=session.pk).update(title="Renamed")
            answers = [sql.row(*title), sql.rows(*title), sql.result_sets(states)]
            again = [
                sql.row(*title),
                sql.row(
                    "SELECT title FROM planner_session WHERE id = %s",
                    [model_rows.prep(Session, "id", uuid.uuid4())],
                ),
            ]
        after = sql.row(*title)
    # read before the update, each once; asked for again, or with other parameters, sent
    assert answers == [("Plans",), [("Plans",)], [[("idle",)], [(2,)]]]
    assert again == [("Renamed",), None]
    assert after == ("Renamed",)
    assert ahead == 4
    assert len(sent) == ahead + 1 + 3  # the update, the three reads asked for again
    if connection.vendor == "postgresql":
        assert sent_in[0] is not None
        assert len(set(map(id, sent_in[:4]))) == 1


def test_now_is_the_time_a_statement_is_sent_and_one_statement_whenever_it_is_built(session):
    def beats_later() -> sql.Statement:  # built afresh each time, as a tool builds what it reads
        return ("SELECT COUNT(*) FROM planner_session WHERE heartbeat_at > %s", [sql.NOW])

    Session.objects.filter(pk=session.pk).update(heartbeat_at=timezone.now() + datetime.timedelta(seconds=1))
    assert sql.row(*beats_later()) == (1,)
    Session.objects.filter(pk=session.pk).update(heartbeat_at=timezone.now() - datetime.timedelta(seconds=1))
    assert sql.rows(*beats_later()) == [(0,)]
    assert sql.result_sets([beats_later()]) == [[(0,)]]
    with CaptureQueriesContext(connection) as sent, sql.reading_ahead([beats_later()]):
        assert sql.row(*beats_later()) == (0,)  # served from what was read ahead
    assert len(sent) == 1


def test_reads_ahead_with_the_next_go_in_its_round_trip(session):
    where = [model_rows.prep(Session, "id", session.pk)]
    title = ("SELECT title FROM planner_session WHERE id = %s", where)
    with (
        pipelines() as sent_in,
        CaptureQueriesContext(connection) as sent,
        sql.reading_ahead([title], with_next=True),
    ):
        assert len(sent) == 0  # nothing yet
        first = sql.row("SELECT 2")
        Session.objects.filter(pk=session.pk).update(title="Renamed")
        ahead = sql.row(*title)
    assert (first, ahead) == ((2,), ("Plans",))
    assert [q["sql"].split()[1] for q in sent] == ["2", "title", '"planner_session"']
    if connection.vendor == "postgresql":
        assert sent_in[0] is not None
        assert sent_in[1] is sent_in[0]
    with CaptureQueriesContext(connection) as unread, sql.reading_ahead([title], with_next=True):
        pass
    assert len(unread) == 0


def test_result_sets_read_ahead_only_in_part_are_all_sent(session):
    where = [model_rows.prep(Session, "id", session.pk)]
    title = ("SELECT title FROM planner_session WHERE id = %s", where)
    with sql.reading_ahead([title]):
        Session.objects.filter(pk=session.pk).update(title="Renamed")
        both = sql.result_sets([title, ("SELECT 2", [])])
        kept = sql.row(*title)
    assert both == [[("Renamed",)], [(2,)]]
    assert kept == ("Plans",)  # what was read ahead still waits for its asker


def test_reads_are_prepared_and_planned_once_per_connection_on_postgresql_and_answer_as_before(session):
    where = [model_rows.prep(Session, "id", session.pk)]
    statement = "SELECT title, state FROM planner_session WHERE id = %s"
    with CaptureQueriesContext(connection) as sent:
        answers = [sql.row(statement, where), sql.rows(statement, where)]
    assert answers == [("Plans", "idle"), [("Plans", "idle")]]
    assert [q["sql"].startswith("SELECT title, state FROM planner_session") for q in sent] == [True, True]
    if connection.vendor == "postgresql":
        for _ in range(6):  # past the five runs PostgreSQL would plan afresh before it weighs a generic plan
            sql.row(statement, where)
        with connection.cursor() as cursor:
            as_prepared = statement.replace("%s", "$1")
            cursor.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = %s",
                [as_prepared],
            )
            # Prepared once; planned once, the generic plan kept for every run since
            assert cursor.fetchall() == [(8, 0)]


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="psycopg's conversion of a prepared statement")
def test_a_prepared_statement_of_many_parameters_is_converted_once_and_answers_as_before(session):
    where = [model_rows.prep(Session, "id", session.pk)]
    many = list(range(60))  # past the 50 parameters psycopg keeps the conversion of
    others = sql.placeholders(len(many))
    statement = f"SELECT title, %s + %s FROM planner_session WHERE id = %s AND 0 NOT IN ({others})"
    sql._converted.cache_clear()

    answers = [sql.row(statement, [1, 2, *where, *[n + 1 for n in many]]) for _ in range(3)]
    named = sql.row("SELECT %(a)s::int + %(b)s::int", {"a": 2, "b": 3})  # type: ignore[arg-type]

    assert answers == [("Plans", 3)] * 3
    assert named == (5,)
    cached = sql._converted.cache_info()
    assert (cached.misses, cached.hits) == (2, 2)  # each statement split once, then reused


def test_result_sets_after_waiting_writes_reads_its_own_results_and_sees_the_writes(session):
    where = [model_rows.prep(Session, "id", session.pk)]
    with transaction.atomic(), sql.batched():
        model_rows.insert([event(session, "a"), event(session, "b")])
        model_rows.update_later(Session, {"title": "Renamed"}, "id = %s", where)
        found = sql.result_sets(
            [
                ("SELECT title FROM planner_session WHERE id = %s", where),
                ("SELECT kind FROM planner_event WHERE session_id = %s ORDER BY id", where),
            ]
        )
    assert found == [[("Renamed",)], [("a",), ("b",)]]


@pytest.mark.django_db(transaction=True)
def test_a_batch_that_ends_its_transaction_sends_what_waits_with_the_commit(session):
    committed = []
    with CaptureQueriesContext(connection) as sent, transaction.atomic(), sql.batched(ends_transaction=True):
        transaction.on_commit(lambda: committed.append(kinds(session)))
        model_rows.insert([event(session, "a")])
        model_rows.insert([event(session, "b")])
    assert committed == [["a", "b"]]  # committed, and the hooks ran after it as ever
    assert connection.get_autocommit()
    if connection.vendor == "postgresql":
        writes = [q["sql"] for q in sent if "INSERT" in q["sql"]]
        assert writes == [writes[0]]  # the whole transaction in one round trip
        assert writes[0].startswith("BEGIN; INSERT")
        assert writes[0].count("INSERT") == 2
        assert writes[0].endswith("; COMMIT")
        assert connection.connection.info.transaction_status == 0  # idle: nothing left open
    with transaction.atomic():  # the connection goes on as ever
        model_rows.insert([event(session, "c")])
    assert kinds(session) == ["a", "b", "c"]


@pytest.mark.django_db(transaction=True)
def test_a_failing_write_sent_with_the_commit_keeps_nothing(session):
    def message() -> Message:
        return Message(session=session, seq=1, role="user", kind="human", content=[], turn=1)

    def step() -> None:
        with transaction.atomic(), sql.batched(ends_transaction=True):
            model_rows.insert([event(session, "lost")])
            model_rows.insert([message()])
            model_rows.insert([message()])  # the same seq again

    with pytest.raises(IntegrityError):
        step()
    assert (kinds(session), Message.objects.filter(session=session).count()) == ([], 0)
    with transaction.atomic(), sql.batched(ends_transaction=True):
        model_rows.insert([event(session, "kept")])
    assert kinds(session) == ["kept"]


def test_a_batch_within_an_outer_transaction_leaves_the_commit_to_it(session):
    with transaction.atomic():  # as a test's or a caller's transaction
        with transaction.atomic(), sql.batched(ends_transaction=True):
            model_rows.insert([event(session, "inner")])
        assert kinds(session) == ["inner"]
        transaction.set_rollback(True)
    assert kinds(session) == []  # the outer rollback took it back: nothing was committed early


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["prepared read", "write"])
def test_a_batched_transaction_is_open_from_its_first_statement(session, first):
    """Its BEGIN goes with its first statement: a row that statement locks stays locked for
    the whole transaction, and its changes come and go with the transaction."""
    where = [model_rows.prep(Session, "id", session.pk)]
    seen_by_others: list[object] = []
    piped: list[object] = []

    def look_from_elsewhere() -> None:
        try:
            with transaction.atomic():
                seen_by_others.append(
                    sql.rows(
                        f"SELECT title FROM planner_session WHERE id = %s{sql.for_update()} NOWAIT", where
                    )
                    if connection.vendor == "postgresql"
                    else sql.rows("SELECT title FROM planner_session WHERE id = %s", where)
                )
        except DatabaseError as exc:
            seen_by_others.append(type(exc).__name__)
        finally:
            connection.close()

    def step() -> None:
        with transaction.atomic(), sql.batched(ends_transaction=True):
            if first == "prepared read":
                with pipelines() as sent_in:
                    sql.row(f"SELECT title FROM planner_session WHERE id = %s{sql.for_update()}", where)
                piped.extend(sent_in)
            else:
                model_rows.update(Session, {"title": "Changed"}, "id = %s", where)
            if connection.vendor == "postgresql":  # SQLite's write lock would keep the look waiting
                looking = threading.Thread(target=look_from_elsewhere)
                looking.start()
                looking.join()
            raise RuntimeError("rolled back")

    with CaptureQueriesContext(connection) as sent, pytest.raises(RuntimeError):
        step()
    assert Session.objects.get(pk=session.pk).title == "Plans"
    if connection.vendor == "postgresql":
        assert seen_by_others == ["OperationalError"]  # locked: the transaction was open
        # Django logs its own "BEGIN" when it opens the block; nothing is sent then
        opened = next(q["sql"] for q in sent.captured_queries if q["sql"] != "BEGIN")
        assert opened.startswith("BEGIN; UPDATE" if first == "write" else "SELECT title")
        if first == "prepared read":  # sent in one pipeline with its BEGIN
            assert len(piped) == 1
            assert piped[0] is not None


@pytest.mark.django_db(transaction=True)
def test_a_new_chat_s_turn_starts_in_two_round_trips_on_postgresql(session, member):
    """The session's row lock, the human's access, the project's row lock and the turns running
    there in one pipeline with the BEGIN; the turn's writes with the COMMIT. Nothing is stored
    yet, so no history is read."""
    with pipelines() as sent_in, CaptureQueriesContext(connection) as sent:
        begun = sessions.session_begin(session_id=session.pk, user=member, text="Plan the beta")
    assert (begun.meaning, begun.turn) == ("started", 1)
    row = Session.objects.get(pk=session.pk)
    assert (row.state, row.turn_owner, row.last_message_seq) == ("running", PROCESS_ID, 1)
    assert kinds(session) == ["turn_started"]
    statements = [q["sql"] for q in sent.captured_queries if q["sql"] not in {"BEGIN", "COMMIT"}]
    assert not any("planner_message" in s and s.startswith("SELECT") for s in statements)
    if connection.vendor != "postgresql":
        return
    assert len(sent_in) == 5
    assert sent_in[0] is not None
    assert len(set(map(id, sent_in[:4]))) == 1
    assert sent_in[4:] == [None]
    # Django logs its own BEGIN and COMMIT, which it never sends here
    assert statements[2].endswith(" FOR NO KEY UPDATE")  # docs/architecture.md#row-locks
    assert statements[2].startswith("SELECT id FROM tracker_project")
    assert statements[4].startswith("INSERT INTO")
    assert "turn_started" in statements[4]
    assert statements[4].endswith("; COMMIT")


@pytest.mark.django_db(transaction=True)
def test_a_turn_with_no_history_kept_starts_in_three_round_trips_on_postgresql(session, member):
    """As a new chat's, with the history's read between them: the session's messages, stored by
    a turn whose process kept no history of them (another process's, or one that restarted)."""
    sessions.session_begin(session_id=session.pk, user=member, text="Plan the beta")
    Session.objects.filter(pk=session.pk).update(state=SessionState.IDLE, turn_owner="")
    with pipelines() as sent_in, CaptureQueriesContext(connection) as sent:
        begun = sessions.session_begin(session_id=session.pk, user=member, text="And the launch")
    assert (begun.meaning, begun.turn) == ("started", 2)
    assert begun.setup is not None
    assert [m.text for m in begun.setup.history.messages] == ["Plan the beta", "And the launch"]
    if connection.vendor != "postgresql":
        return
    assert len(sent_in) == 6
    assert len(set(map(id, sent_in[:4]))) == 1
    assert sent_in[4:] == [None, None]
    statements = [q["sql"] for q in sent.captured_queries if q["sql"] not in {"BEGIN", "COMMIT"}]
    assert statements[4].startswith('SELECT "planner_message"')
    assert statements[5].startswith("INSERT INTO")
    assert statements[5].endswith("; COMMIT")


@pytest.mark.django_db(transaction=True)
def test_a_session_s_next_turn_reads_its_prompt_s_skill_with_its_locks(session, member, owner):
    skill_version_create(actor=Actor(user=owner), project=session.project, name="planner", body="Estimate.")
    project_update(actor=Actor(user=owner), project=session.project, settings={"skill": "planner"})
    first = sessions.session_begin(session_id=session.pk, user=member, text="One")
    assert first.setup is not None
    assert first.setup.skills == (("planner", 1),)
    Session.objects.filter(pk=session.pk).update(state=SessionState.IDLE, turn_owner="")
    with pipelines() as sent_in, CaptureQueriesContext(connection) as sent:
        second = sessions.session_begin(session_id=session.pk, user=member, text="Two")
    assert second.setup is not None
    # Which version is read in the turn's own transaction (a new one: tests/planner/live/test_turns.py)
    assert second.setup.skills == (("planner", 1),)
    statements = [q["sql"] for q in sent.captured_queries if q["sql"] not in {"BEGIN", "COMMIT"}]
    skill_reads = [n for n, statement in enumerate(statements) if "tracker_skillpin" in statement]
    assert len(skill_reads) == 1
    if connection.vendor == "postgresql":  # in the first round trip, with the session's locks
        assert sent_in[0] is not None
        assert sent_in[skill_reads[0]] is sent_in[0]
