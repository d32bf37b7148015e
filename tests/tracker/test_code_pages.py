"""A commit and a file of a linked repository (SPEC § 16, item 4 of issue 45): their pages for the
project's readers, 404 for anyone else and for what names nothing, a denied file refused; hashes
and paths in a description, a comment or a report linked only where they are real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from pytest_django.asserts import assertContains, assertNotContains

from tests.factories import MembershipFactory, ProjectFactory
from tests.tracker.repo_helpers import commit, configured, git, source_repo
from tracker.models import Repository
from tracker.services import repositories
from tracker.services.activity import Actor
from tracker.services.comments import comment_add
from tracker.services.members import membership_remove
from tracker.services.repositories import repository_fetch, repository_link
from tracker.templatetags.markdown_text import markdown

pytestmark = pytest.mark.django_db
SECRET = "hunter2-NEVER-SHOWN"


@pytest.fixture(autouse=True)
def _nothing_kicked(monkeypatch, settings, tmp_path):
    configured(settings, tmp_path)
    monkeypatch.setattr(repositories, "fetch_kick", lambda: None)


@pytest.fixture
def linked(owner, project, tmp_path) -> dict[str, Any]:
    """The project's repository ``app``, fetched: a first commit, then one that adds code and two
    denied files."""
    source = source_repo(tmp_path / "src" / "app")
    first = commit(source, {"README.md": "# Courtside\n\nShown as source.\n"}, "Second readme")
    second = commit(
        source,
        {
            "src/app/models.py": "class Court:\n    pass\n",
            ".env": f"TOKEN={SECRET}\n",
            "config/secret.yml": f"token: {SECRET}\n",
        },
        "Add the models\n\n    indented body <b>kept</b>",
    )
    repo = repository_link(actor=Actor(user=owner), project=project, name="app", local_path=str(source))
    assert repository_fetch(repo.pk) is not None
    return {"repo": repo, "first": first, "second": second}


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def commit_page(sha: str) -> str:
    return f"/projects/BAL/code/app/commit/{sha}/"


def abbreviated(sha: str, length: int) -> str:
    """``sha`` cut to ``length`` characters, or more until one is a letter: an all-digit word is a
    number, never a commit (a hash's first 8 are all digits about once in 43)."""
    return next(sha[:n] for n in range(length, len(sha) + 1) if not sha[:n].isdigit())


def test_a_reader_sees_a_commit_with_its_message_as_text_and_its_files(viewer, linked):
    page = signed_in(viewer).get(commit_page(linked["second"][:9]))

    assertContains(page, linked["second"])
    assertContains(page, "    indented body &lt;b&gt;kept&lt;/b&gt;")  # text, whitespace kept
    assertContains(page, "Tester")
    assertContains(page, f'href="/projects/BAL/code/app/file/{linked["second"]}/src/app/models.py"')
    assertContains(page, "(denied: never shown)")
    assertNotContains(page, "/file/" + linked["second"] + "/.env")
    assertNotContains(page, SECRET)


def test_a_reader_sees_a_file_with_line_numbers(viewer, linked):
    page = signed_in(viewer).get("/projects/BAL/code/app/file/main/src/app/models.py")

    assertContains(page, 'id="L2"')
    assertContains(page, "class Court:")
    assertContains(page, linked["second"][:12])


def test_a_markdown_file_is_shown_as_its_source(viewer, linked):
    page = signed_in(viewer).get(f"/projects/BAL/code/app/file/{linked['first']}/README.md")

    assertContains(page, "# Courtside")
    assertContains(page, "shown as its source")


@pytest.mark.parametrize("who", ["stranger", "viewer_of_other", "owner_of_a_sibling", "removed_member"])
def test_someone_who_cannot_read_the_project_gets_404(who, users, owner, project, other_project, linked):
    user = users["stranger"]
    if who == "viewer_of_other":
        MembershipFactory(project=other_project, user=user, role="viewer")
    if who == "owner_of_a_sibling":
        sibling = ProjectFactory(organization=project.organization, key="SIB")
        MembershipFactory(project=sibling, user=user, role="owner")
    client = signed_in(user)
    if who == "removed_member":
        user = users["viewer"]
        client = signed_in(user)
        assert client.get(commit_page(linked["second"])).status_code == 200
        membership_remove(actor=Actor(user=owner), project=project, username=user.username)

    assert client.get(commit_page(linked["second"])).status_code == 404
    assert client.get("/projects/BAL/code/app/file/main/src/app/models.py").status_code == 404


def test_a_denied_file_is_refused_and_never_shown(viewer, linked):
    page = signed_in(viewer).get("/projects/BAL/code/app/file/main/.env")

    assert page.status_code == 403
    assertContains(page, "deny list", status_code=403)
    assertNotContains(page, SECRET, status_code=403)


@pytest.mark.parametrize(
    "url",
    [
        "/projects/BAL/code/app/file/main/src/../.env",
        "/projects/BAL/code/app/file/main/src/%00x.py",
        "/projects/BAL/code/app/file/nobranch/README.md",
        "/projects/BAL/code/app/file/main/no/such.py",
        "/projects/BAL/code/app/file/main/src",
        "/projects/BAL/code/app/commit/abcdef1234/",
        "/projects/BAL/code/app/commit/not-a-sha/",
        "/projects/BAL/code/nope/commit/abcdef1234/",
    ],
)
def test_what_names_nothing_is_a_readable_404(viewer, linked, url):
    page = signed_in(viewer).get(url)

    assert page.status_code == 404
    assertNotContains(page, SECRET, status_code=404)
    assertNotContains(page, "Traceback", status_code=404)


def test_a_description_links_real_commits_and_paths_only(viewer, make_item, linked):
    text = (
        f"Fixed in {abbreviated(linked['second'], 8)}, not in deadbee1 nor 1234567.\n\n"
        "See src/app/models.py and app:README.md, not src/app/views.py nor config/secret.yml."
    )
    item = make_item(description=text)

    page = signed_in(viewer).get(f"/projects/BAL/items/{item.key}/")

    assertContains(page, f'href="/projects/BAL/code/app/commit/{linked["second"]}/"')
    assertContains(page, 'href="/projects/BAL/code/app/file/main/src/app/models.py"')
    assertContains(page, 'href="/projects/BAL/code/app/file/main/README.md"')
    assertNotContains(page, "deadbee1/")
    assertNotContains(page, 'views.py"')
    assertNotContains(page, 'secret.yml"')
    assert page.content.decode().count('class="code-ref"') == 3
    assertContains(page, "config/secret.yml")


def test_a_comment_links_a_commit_and_a_path(owner, viewer, make_item, linked):
    item = make_item()
    comment_add(
        actor=Actor(user=owner),
        item=item,
        body=f"In `{abbreviated(linked['first'], 7)}`: see `src/app/models.py`.",
    )

    page = signed_in(viewer).get(f"/projects/BAL/items/{item.key}/")

    assertContains(
        page, f'<a href="/projects/BAL/code/app/commit/{linked["first"]}/" class="code-ref"><code>'
    )
    assertContains(page, 'href="/projects/BAL/code/app/file/main/src/app/models.py"')


def test_a_report_summary_links_only_what_exists(project, linked):
    html = markdown(
        f"Done: {abbreviated(linked['second'], 10)} touches src/app/models.py and src/gone.py", project
    )

    assert f"/code/app/commit/{linked['second']}/" in html
    assert "/code/app/file/main/src/app/models.py" in html
    assert "src/gone.py</a>" not in html


def test_nothing_links_in_a_project_without_repositories(other_project, linked):
    html = markdown(f"{abbreviated(linked['second'], 10)} src/app/models.py app:README.md", other_project)

    assert "/code/" not in html
    assert not Repository.objects.filter(project=other_project).exists()


def test_a_mirror_not_fetched_yet_links_nothing(owner, project, tmp_path):
    source = source_repo(tmp_path / "src" / "late")
    repository_link(actor=Actor(user=owner), project=project, name="late", local_path=str(source))

    html = markdown("late:README.md and abcdef1234", project)

    assert "/code/" not in html
    assert Path(source).exists()


def test_a_branch_with_a_slash_links_files_at_its_commit(owner, project, tmp_path):
    source = source_repo(tmp_path / "src" / "rel", {"src/app/main.py": "print(1)\n"})
    sha = commit(source, {"src/app/main.py": "print(2)\n"}, "Two")
    repo = repository_link(
        actor=Actor(user=owner), project=project, name="rel", local_path=str(source), default_branch="main"
    )
    Repository.objects.filter(pk=repo.pk).update(default_branch="release/1.0")
    git(source, "branch", "release/1.0")
    assert repository_fetch(repo.pk) is not None

    html = markdown("See src/app/main.py", project)

    assert f"/code/rel/file/{sha}/src/app/main.py" in html


def test_the_chat_s_refs_endpoint_answers_only_real_commits_and_files(viewer, users, linked):
    short = abbreviated(linked["second"], 8)
    query = f"code={short},deadbee1,1234567,src/app/models.py,config/secret.yml,app:README.md,src/gone.py"

    body = signed_in(viewer).get(f"/projects/BAL/refs/?{query}").json()["code"]

    assert body == {
        short: {"url": f"/projects/BAL/code/app/commit/{linked['second']}/", "title": f"Commit {short}"},
        "src/app/models.py": {
            "url": "/projects/BAL/code/app/file/main/src/app/models.py",
            "title": "File src/app/models.py",
        },
        "app:README.md": {"url": "/projects/BAL/code/app/file/main/README.md", "title": "File app:README.md"},
    }
    assert signed_in(users["stranger"]).get(f"/projects/BAL/refs/?{query}").status_code == 404


def test_a_binary_file_is_described_and_a_link_named(viewer, linked, tmp_path):
    source = tmp_path / "src" / "app"
    (source / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (source / "models").symlink_to("src/app/models.py")
    commit(source, {}, "Logo and a link")
    assert repository_fetch(linked["repo"].pk) is not None
    client = signed_in(viewer)

    image = client.get("/projects/BAL/code/app/file/main/logo.png")
    link = client.get("/projects/BAL/code/app/file/main/models")

    assertContains(image, "A binary file (PNG image")
    assertContains(link, 'href="/projects/BAL/code/app/file/main/src/app/models.py"')
