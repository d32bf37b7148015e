"""A rolling upgrade with a chat open (docs/operations.md#upgrades): the previous release's daphne
serves a chat over its socket; the new code's ``collectstatic`` and ``migrate`` run against the
same database while it serves; the new code's daphne starts beside it, the two relay each
other's turns, the old one stops, and the chat goes on.

The previous release (``tests/releases.py``) is the commit before the latest migration, exported
with ``git archive`` and run from its own tree with the same virtualenv, as ``Deployment.root``
allows. ``tests/test_migrations_rolling.py`` checks that the migrations since then only expand.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.client import Client, frames_until
from tests.fakes.messages_api import FakeMessagesAPI, TextReply
from tests.fakes.servers import PASSWORD, ROOT, Deployment, Server, production_mode
from tests.releases import PREVIOUS_RELEASE, previous_release_migrations

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not production_mode(),
        reason="a rolling upgrade needs several processes, on PostgreSQL and Redis",
    ),
]

ENV = {"BALLET_SEARCH_EMBEDDING_BACKEND": "tracker.search.embeddings.HashingBackend"}


@pytest.fixture
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture
def previous_release(tmp_path: Path) -> Path:
    """The previous release's tree, as ``git archive`` exports it."""
    tree = tmp_path / "previous"
    archive = subprocess.run(
        ["git", "archive", "--format=tar", PREVIOUS_RELEASE],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    return tree


@pytest.fixture
def old(tmp_path: Path, fake: FakeMessagesAPI, previous_release: Path) -> Iterator[Deployment]:
    """A deployment migrated, seeded and collected by the previous release."""
    created = Deployment.create(tmp_path, fake.base_url, extra_env=ENV, root=previous_release)
    yield created
    created.drop()


def test_a_chat_goes_on_across_a_rolling_upgrade(
    tmp_path: Path, fake: FakeMessagesAPI, old: Deployment
) -> None:
    new = replace(old, root=ROOT)  # the same database, Redis and static folder; this checkout's code
    a = Server(old, log=tmp_path / "old.log")
    b = Server(new, log=tmp_path / "new.log")
    try:
        a.start()
        asyncio.run(_roll(fake, new, a, b))
    finally:
        a.stop()
        b.stop()


def _said(frames: list[dict[str, Any]]) -> str:
    return "".join(frame["text"] for frame in frames if frame["type"] == "text_delta")


async def _turn(fake: FakeMessagesAPI, ws: Any, text: str, answer: str) -> list[dict[str, Any]]:
    """Send ``text`` over ``ws``; the frames up to its turn's end, which must have said ``answer``."""
    fake.enqueue(TextReply(answer, chunks=3))
    await ws.send(json.dumps({"type": "message", "text": text}))
    frames = await frames_until(ws, "turn_ended")
    assert frames[-1]["reason"] == "completed", frames[-3:]
    assert _said(frames) == answer
    return frames


async def _roll(fake: FakeMessagesAPI, new: Deployment, a: Server, b: Server) -> None:
    client = await asyncio.to_thread(Client, a.url, "demo", PASSWORD)
    session = (await asyncio.to_thread(client.post, "/api/v1/planner/sessions/", {"project": "DEMO"}))["id"]
    async with client.websocket(session) as on_old:
        await frames_until(on_old, "state")
        await _turn(fake, on_old, "First, before", "One, on the previous release.")
        # The new release's files and schema, while the old process serves the open socket.
        await asyncio.to_thread(new.manage, "collectstatic", "--noinput")
        migrated = await asyncio.to_thread(new.manage, "migrate", "--noinput")
        applied = set(re.findall(r"Applying (\S+)\.\.\. OK", migrated))
        assert applied  # the new release changes the schema under the old process
        assert not applied & previous_release_migrations()
        await _turn(fake, on_old, "Second, migrated", "Two, old code on the new schema.")
        await asyncio.to_thread(b.start)
        async with client.websocket(session, base_url=b.url) as on_new:
            await frames_until(on_new, "state")
            # Both releases serve at once: a turn on the new process reaches the old one's socket.
            await _turn(fake, on_new, "Third, both serve", "Three, on the new release.")
            relayed = await frames_until(on_old, "turn_ended")
            assert _said(relayed) == "Three, on the new release."
            await asyncio.to_thread(a.stop)
            await _turn(fake, on_new, "Fourth, old one gone", "Four, the old process has left.")
    on_new_client = await asyncio.to_thread(Client, b.url, "demo", PASSWORD)
    body = await asyncio.to_thread(on_new_client.transcript, session)
    said = [block["text"] for m in body["messages"] if m["role"] == "assistant" for block in m["content"]]
    assert said == [
        "One, on the previous release.",
        "Two, old code on the new schema.",
        "Three, on the new release.",
        "Four, the old process has left.",
    ]
    assert body["state"] == "idle"
