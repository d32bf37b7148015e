"""Static files through WhiteNoise (ballet/static.py): hashed names cached for a year after
collectstatic, plain names when the manifest lacks one, the apps' folders without collectstatic.

Requests go through Django's async handler, as under daphne; ``tests/e2e/test_static.py``
checks the same against a real server in the mode's own configuration.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import override_settings

ROOT = Path(__file__).resolve().parent.parent
SOURCE_CSS = ROOT / "tracker" / "static" / "tracker" / "ballet.css"
SOURCE_JS = ROOT / "planner" / "static" / "planner" / "chat.js"
HASHED = {"BACKEND": "ballet.static.ManifestStorage"}
PLAIN = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
YEAR = "max-age=315360000, public, immutable"
MINUTE = "max-age=60, public"

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A STATIC_ROOT filled by collectstatic with the production mode's storage."""
    root = tmp_path_factory.mktemp("static")
    storages = {**django_settings.STORAGES, "staticfiles": HASHED}
    with override_settings(STATIC_ROOT=root, STORAGES=storages):
        call_command("collectstatic", "--noinput", verbosity=0)
    return root


@pytest.fixture
def hashed(settings, collected: Path) -> Path:
    settings.STATIC_ROOT = collected
    settings.STORAGES = {**settings.STORAGES, "staticfiles": HASHED}
    settings.WHITENOISE_USE_FINDERS = False
    return collected


def stylesheet(html: str) -> str:
    match = re.search(r'href="(/static/tracker/ballet[^"]*\.css)"', html)
    assert match, html
    return match.group(1)


async def test_a_page_links_a_hashed_stylesheet_served_for_a_year(async_client, hashed):
    page = await async_client.get("/accounts/login/")
    assert page.status_code == 200
    url = stylesheet(page.content.decode())
    assert re.fullmatch(r"/static/tracker/ballet\.[0-9a-f]{12}\.css", url), url
    response = await async_client.get(url, headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200
    assert response["Cache-Control"] == YEAR
    assert response["Content-Type"].startswith("text/css")
    assert response["Content-Encoding"] == "gzip"
    assert gzip.decompress(response.content) == SOURCE_CSS.read_bytes()
    again = await async_client.get(url, headers={"If-None-Match": response["ETag"]})
    assert again.status_code == 304
    assert again.content == b""


async def test_a_name_missing_from_the_manifest_is_linked_plain_instead_of_failing_the_page(
    async_client, settings, hashed, tmp_path
):
    root = tmp_path / "static"
    shutil.copytree(hashed, root)
    manifest = json.loads((root / "staticfiles.json").read_text())
    del manifest["paths"]["tracker/ballet.css"]
    (root / "staticfiles.json").write_text(json.dumps(manifest))
    settings.STATIC_ROOT = root
    page = await async_client.get("/accounts/login/")
    assert page.status_code == 200
    assert stylesheet(page.content.decode()) == "/static/tracker/ballet.css"
    response = await async_client.get("/static/tracker/ballet.css")
    assert response.status_code == 200
    assert response["Cache-Control"] == MINUTE
    assert response.content == SOURCE_CSS.read_bytes()


async def test_pages_work_before_collectstatic_ever_ran(async_client, settings, tmp_path, caplog):
    settings.STATIC_ROOT = tmp_path / "never-collected"
    settings.STORAGES = {**settings.STORAGES, "staticfiles": HASHED}
    settings.WHITENOISE_USE_FINDERS = False
    with pytest.warns(UserWarning, match="No directory at"):
        page = await async_client.get("/accounts/login/")
    assert "run manage.py collectstatic" in caplog.text
    assert page.status_code == 200
    assert stylesheet(page.content.decode()) == "/static/tracker/ballet.css"


async def test_the_apps_files_are_served_without_collectstatic(async_client, settings, tmp_path):
    settings.STATIC_ROOT = tmp_path / "never-collected"
    settings.STORAGES = {**settings.STORAGES, "staticfiles": PLAIN}
    settings.WHITENOISE_USE_FINDERS = True
    page = await async_client.get("/accounts/login/")
    assert stylesheet(page.content.decode()) == "/static/tracker/ballet.css"
    response = await async_client.get("/static/planner/chat.js")
    assert response.status_code == 200
    assert response["Cache-Control"] == MINUTE
    assert response["Content-Type"].startswith("text/javascript")
    assert response.content == SOURCE_JS.read_bytes()
    head = await async_client.head("/static/planner/chat.js")
    assert head.status_code == 200
    assert head["Content-Length"] == str(SOURCE_JS.stat().st_size)
    assert head.content == b""
    missing = await async_client.get("/static/planner/nothing-here.js")
    assert missing.status_code == 404


def test_the_middleware_serves_in_a_sync_chain_too(client, hashed):
    url = stylesheet(client.get("/accounts/login/").content.decode())
    response = client.get(url)
    assert response.status_code == 200
    assert response["Cache-Control"] == YEAR
    assert b"".join(response.streaming_content) == SOURCE_CSS.read_bytes()


def test_the_chats_vendored_scripts_are_collected_under_hashed_names(collected: Path):
    """collectstatic's manifest fails on a source-map comment naming a map that is not shipped."""
    manifest = json.loads((collected / "staticfiles.json").read_text())["paths"]
    for name in (
        "planner/vendor/markdown-it.min.js",
        "planner/vendor/highlight.min.js",
        "planner/markdown.js",
    ):
        source = ROOT / "planner" / "static" / name
        assert b"sourceMappingURL" not in source.read_bytes()
        stem = name.removesuffix(".js")
        assert re.fullmatch(rf"{re.escape(stem)}\.[0-9a-f]{{12}}\.js", manifest[name]), manifest[name]
        assert (collected / manifest[name]).read_bytes() == source.read_bytes()
    for licence in ("markdown-it.LICENSE.txt", "highlight.js.LICENSE.txt"):
        assert (collected / "planner" / "vendor" / licence).is_file()
