"""The worker's pass over what waits for a free turn (planner/tasks.py): it runs on an event loop
of its own that ends with it, in a process that lives on, so it leaves no model client behind.
Each pass left one, with its loop (the worker grew 6 MB a minute so, docs/benchmarks.md#soak)."""

from __future__ import annotations

import gc

import pytest
from django.conf import settings

from planner.agent.demo import DemoGateway
from planner.agent.gateway import AnthropicGateway
from planner.agent.providers import ProviderGateway
from planner.domain.services.agent_questions import question_create
from planner.live.runner import runner
from planner.tasks import start_waiting_work
from tests.fakes.messages_api import FakeMessagesAPI, TextReply, ToolCallSpec, ToolUseReply

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        settings.PRODUCTION_MODE,
        reason="the task runs the hub on an event loop of its own, which in the test process would "
        "take the process's Redis relay from the tests after it; bench/soak.py measures the real "
        "worker's memory in production mode",
    ),
]


@pytest.fixture
def messages_api():
    """The runner on the real gateway, talking to a local fake of the Messages API."""
    previous = runner._gateway
    with FakeMessagesAPI() as fake:
        anthropic = AnthropicGateway(base_url=fake.base_url, max_retries=0)
        runner.gateway = ProviderGateway(anthropic=anthropic, demo=DemoGateway())
        yield fake, anthropic
    runner.gateway = previous


def test_each_pass_closes_the_model_clients_its_loop_opened(messages_api, chat_project, member, make_item):
    fake, anthropic = messages_api
    for number in range(3):
        ticket = make_item(title=f"Export {number}")
        question = question_create(
            user=member, project=chat_project, text="Which format?", item_key=ticket.key
        )
        fake.enqueue(ToolUseReply([ToolCallSpec("answer_question", {"answer": "CSV."})]), TextReply("Done."))

        started = start_waiting_work()

        question.refresh_from_db()
        assert started == 1
        assert (question.status, question.answer) == ("answered", "CSV.")
    gc.collect()

    assert len(fake.requests) == 6  # the passes did call the model through the SDK
    assert dict(anthropic._wires) == {}  # no loop of an ended pass is kept, nor its clients
