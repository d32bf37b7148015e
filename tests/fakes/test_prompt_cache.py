"""The fake's prompt-cache simulation (tests/fakes/prompt_cache.py)."""

from __future__ import annotations

from typing import Any

import anthropic

from tests.fakes.messages_api import FakeMessagesAPI, TextReply
from tests.fakes.prompt_cache import PromptCache

CACHE = {"type": "ephemeral"}


def body(*texts: str, tools: str = "t" * 400) -> dict:
    messages: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": text}]}
        for i, text in enumerate(texts)
    ]
    messages[-1]["content"][-1]["cache_control"] = CACHE
    return {
        "tools": [
            {
                "name": "lookup",
                "description": tools,
                "input_schema": {"type": "object"},
                "cache_control": CACHE,
            }
        ],
        "system": [{"type": "text", "text": "s" * 400, "cache_control": CACHE}],
        "messages": messages,
    }


def test_a_request_reads_the_longest_prefix_an_earlier_one_cached():
    cache = PromptCache()
    uncached, written, first = cache.usage(body("a" * 400))
    assert (uncached, first) == (0, 0)
    assert written > 300
    uncached, written2, read = cache.usage(body("a" * 400, "b" * 400, "c" * 400))
    assert (read, uncached) == (written, 0)
    assert 190 < written2 < 230  # the two new messages
    _, _, again = cache.usage(body("a" * 400, "b" * 400, "c" * 400))
    assert again == read + written2


def test_a_change_early_in_the_prefix_reads_only_what_comes_before_it():
    cache = PromptCache()
    cache.usage(body("a" * 400, "b" * 400, "c" * 400))
    _, written, read = cache.usage(body("x" * 400, "b" * 400, "c" * 400))
    assert 190 < read < 230  # tools and system, cached at their breakpoints
    assert written > 290
    _, _, nothing = cache.usage(body("a" * 400, tools="other"))
    assert nothing == 0


def test_the_fake_reports_the_simulated_usage_through_the_sdk():
    with FakeMessagesAPI([TextReply("one"), TextReply("two")], prompt_cache=True) as fake:
        client = anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0)
        first = client.messages.create(model="m", max_tokens=10, **body("a" * 400))
        second = client.messages.create(model="m", max_tokens=10, **body("a" * 400, "b" * 400, "c" * 400))
    assert first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert fake.requests[1].usage is not None
    assert fake.requests[1].usage.cache_read_input_tokens == second.usage.cache_read_input_tokens
