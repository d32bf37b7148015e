"""``manage.py backup`` of a live instance and ``manage.py restore`` into an empty database
(docs/operations.md#backups), in the mode the suite runs: PostgreSQL with ``pg_dump`` and
``pg_restore`` in production mode, SQLite's online backup API in the embedded mode.

The instance serves while it is backed up; a second daphne serves the restored database, and
what a person and a worker had there is all still there: the chat's transcript, the plan, the
knowledge entry, the API key, and search over documents whose vectors came along.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.fakes.client import Client, rest_call
from tests.fakes.messages_api import FakeMessagesAPI, TextReply
from tests.fakes.servers import PASSWORD, Deployment, Server, _psql, production_mode

pytestmark = pytest.mark.e2e

# The hashing backend: vectors without loading the local model into three more processes.
ENV = {"BALLET_SEARCH_EMBEDDING_BACKEND": "tracker.search.embeddings.HashingBackend"}
VECTORS = (
    "from tracker.models import SearchDocument; "
    "print(SearchDocument.objects.filter(embedding__isnull=False, deleted=False).count())"
)


@pytest.fixture
def fake() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture
def deployment(tmp_path: Path, fake: FakeMessagesAPI) -> Iterator[Deployment]:
    created = Deployment.create(tmp_path, fake.base_url, extra_env=ENV)
    yield created
    created.drop()


@pytest.fixture
def empty(tmp_path: Path, deployment: Deployment) -> Iterator[Deployment]:
    """The deployment's configuration on an empty database of its own, with the same keys, as an
    operator restoring elsewhere sets it up: ``createdb``, or a new SQLite path."""
    env = dict(deployment.env)
    cleanup = name = None
    if production_mode():
        name = f"ballet_restore_{uuid.uuid4().hex[:10]}"
        _psql(f'CREATE DATABASE "{name}"')
        env["DATABASE_URL"] = env["DATABASE_URL"].rsplit("/", 1)[0] + f"/{name}"
        cleanup = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    else:
        home = tmp_path / "restored"
        home.mkdir()
        env["BALLET_SQLITE_PATH"] = str(home / "live.sqlite3")
        # The embedded mode keeps its keys beside its database (unless the environment has them):
        # the operator keeps them apart from the backup and brings them along.
        for key in ("secret_key", "credential_key"):
            if (tmp_path / key).exists():
                shutil.copy2(tmp_path / key, home / key)
    restored = replace(deployment, env=env, cleanup_sql=cleanup, database=name)
    yield restored
    restored.drop()


def _kept(client: Client, session: str) -> dict[str, Any]:
    """What the instance holds that the restore must bring back, as the API shows it."""
    return {
        "transcript": [(m["role"], m["content"]) for m in client.transcript(session)["messages"]],
        "items": sorted(
            item["key"] for item in client.get("/api/v1/projects/DEMO/items/?limit=200")["results"]
        ),
        "knowledge": [e["id"] for e in client.get("/api/v1/knowledge/?q=quokka")["results"]],
    }


def test_a_live_instance_backed_up_is_restored_whole_into_an_empty_database(
    tmp_path: Path, fake: FakeMessagesAPI, deployment: Deployment, empty: Deployment
) -> None:
    server = Server(deployment, log=tmp_path / "live.log").start()
    try:
        client = Client(server.url, "demo", PASSWORD)
        session = client.post("/api/v1/planner/sessions/", {"project": "DEMO"})["id"]
        fake.enqueue(TextReply("Noted: the nightly backup runs at two.", chunks=3))
        client.post(f"/api/v1/planner/sessions/{session}/messages/", {"text": "When do backups run?"})
        client.wait_for(session, lambda b: b["state"] == "idle" and b["messages"][-1]["role"] == "assistant")
        entry = client.post(
            "/api/v1/knowledge/",
            {
                "kind": "decision",
                "title": "Quokka backups",
                "body": "Nightly, kept a month.",
                "projects": ["DEMO"],
            },
        )
        key = client.post("/api/v1/keys/", {"name": "backup test", "scopes": ["read"]})["key"]
        # Production mode indexes on the worker, which this deployment has none of: index as
        # `make seed` does, so that the backup holds documents with their vectors.
        deployment.manage("search_backfill", "--all")
        vectors = int(deployment.manage("shell", "-c", VECTORS).strip().splitlines()[-1])
        item = client.get("/api/v1/projects/DEMO/items/?limit=1")["results"][0]
        kept = _kept(client, session)
        assert kept["knowledge"] == [entry["id"]]
        assert vectors > len(kept["items"])  # the items, the entry, the skill: each with a vector
        report = deployment.manage("backup", str(tmp_path / "backup"))  # while the server serves
    finally:
        server.stop()
    assert "Not in the backup" in report
    assert "BALLET_CREDENTIAL_KEY" in report

    with pytest.raises(RuntimeError, match="is not empty"):
        deployment.manage("restore", str(tmp_path / "backup"))
    empty.manage("restore", str(tmp_path / "backup"))

    restored = Server(empty, log=tmp_path / "restored.log").start()
    try:
        client = Client(restored.url, "demo", PASSWORD)
        assert _kept(client, session) == kept
        status, items = rest_call(
            restored.url, f"Bearer {key}", "GET", "/api/v1/projects/DEMO/items/?limit=200"
        )
        assert status == 200
        assert sorted(i["key"] for i in items["results"]) == kept["items"]
        assert rest_call(restored.url, f"Bearer {key}x", "GET", "/api/v1/projects/DEMO/items/")[0] == 401
        assert int(empty.manage("shell", "-c", VECTORS).strip().splitlines()[-1]) == vectors
        status, found = rest_call(
            restored.url, f"Bearer {key}", "GET", f"/api/v1/projects/DEMO/search/?q={quote(item['title'])}"
        )
        assert status == 200
        assert item["key"] in [hit["key"] for hit in found["results"]]
    finally:
        restored.stop()


def test_a_restore_refuses_what_is_not_a_backup(tmp_path: Path, empty: Deployment) -> None:
    (tmp_path / "half").mkdir()
    with pytest.raises(RuntimeError, match=r"has no manifest\.json"):
        empty.manage("restore", str(tmp_path / "half"))
    with pytest.raises(RuntimeError, match="No backup folder"):
        empty.manage("restore", str(tmp_path / "nowhere"))
    with pytest.raises(RuntimeError, match="No folder"):
        empty.manage("backup", str(tmp_path / "nowhere" / "backup"))
