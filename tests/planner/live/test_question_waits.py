"""An agent's wait for its question's outcome is woken through the hub, not by polling: it reads
the status once, then again only when the news comes, from this process (a service's commit on
another thread) or from another one (over the relay, production mode); with the channel layer
down it still hears this process and reads again now and then."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.conf import settings

from planner.domain.signals import question_settled
from planner.live import question_waits
from planner.live.broadcast import Broadcast
from planner.live.hub import hub
from planner.live.question_waits import question_await, question_topic
from tracker.errors import UnavailableError

# The bridge's threads check their connection now and then, as they do for every wait.
pytestmark = pytest.mark.django_db(transaction=True)


class Question:
    """A question's status as the wait's reader sees it, counting the reads."""

    def __init__(self) -> None:
        self.status = "open"
        self.reads = 0

    def read(self) -> str:
        self.reads += 1
        return self.status


async def listening(topic: str) -> None:
    for _ in range(300):
        if topic in hub.listeners:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"nobody listens to {topic}")


def settle_on_another_thread(question: Question, question_id: int) -> None:
    """What a service does on a database thread: commit the outcome, then send the signal."""

    def commit() -> None:
        question.status = "answered"
        question_settled.send(sender=None, question_id=question_id)

    thread = threading.Thread(target=commit)
    thread.start()
    thread.join()


async def test_the_wait_reads_again_only_when_the_outcome_is_told():
    question = Question()
    waiting = asyncio.create_task(question_await(question_id=101, status=question.read, seconds=10))
    await listening(question_topic(101))
    await asyncio.sleep(1.3)  # a poll would have read again by now
    assert question.reads == 1

    settle_on_another_thread(question, 101)

    assert await waiting == "answered"
    assert question.reads == 2
    assert question_topic(101) not in hub.listeners  # the wait stopped listening


async def test_news_of_another_question_does_not_end_the_wait():
    question = Question()
    waiting = asyncio.create_task(question_await(question_id=102, status=question.read, seconds=1))
    await listening(question_topic(102))
    question_settled.send(sender=None, question_id=103)
    await asyncio.sleep(0.3)
    assert question.reads == 1  # not woken
    assert await waiting == "open"  # the deadline ended it


async def test_an_outcome_told_before_the_first_read_is_read():
    question = Question()
    question.status = "needs_human"
    assert await question_await(question_id=104, status=question.read, seconds=5) == "needs_human"
    assert question.reads == 1


@pytest.mark.skipif(not settings.PRODUCTION_MODE, reason="other processes exist in production mode")
async def test_the_outcome_told_by_another_process_wakes_the_wait():
    question = Question()
    waiting = asyncio.create_task(question_await(question_id=105, status=question.read, seconds=10))
    await listening(question_topic(105))
    await asyncio.sleep(0.2)  # the relay joined the news group before the wait's first read
    question.status = "answered"
    await Broadcast().send_news(question_topic(105))  # as another process's hub tells it

    assert await waiting == "answered"
    assert question.reads == 2


async def test_with_the_other_processes_out_of_reach_the_wait_hears_this_one_and_reads_again(monkeypatch):
    async def unavailable(topic: str) -> None:
        raise UnavailableError("Redis is down")

    monkeypatch.setattr(hub.relay, "listen", unavailable)
    monkeypatch.setattr(question_waits, "DEAF_READ_SECONDS", 0.2)
    question = Question()
    waiting = asyncio.create_task(question_await(question_id=106, status=question.read, seconds=10))
    await listening(question_topic(106))
    await asyncio.sleep(0.5)
    assert question.reads >= 2  # deaf to the others, it reads again now and then
    question.status = "withdrawn"
    assert await waiting == "withdrawn"


async def test_a_relay_that_lost_the_other_processes_wakes_every_wait_to_read_again():
    question = Question()
    waiting = asyncio.create_task(question_await(question_id=107, status=question.read, seconds=10))
    await listening(question_topic(107))
    question.status = "answered"  # told to a process that could not hear it
    hub._lost()
    assert await waiting == "answered"
