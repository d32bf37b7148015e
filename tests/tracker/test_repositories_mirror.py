"""The mirrors of linked repositories (SPEC § 16, tracker/repos/mirror.py): a local repository is
cloned and a new commit found by the next fetch; a failed fetch, a repository past the size cap or
a git that hangs keeps the last good mirror and says why; nothing of the repository runs; the
credential reaches git through GIT_ASKPASS only, never an argument, an error, a log or an answer."""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import pytest

from ballet.env import RepositoriesTable
from tests.tracker.repo_helpers import commit, configured, git, source_repo
from tracker.errors import ValidationError
from tracker.models import Repository
from tracker.repos import mirror as mirror_module
from tracker.repos.selectors import mirror_path, repositories_of
from tracker.services import repositories
from tracker.services.activity import Actor
from tracker.services.repositories import repositories_due, repository_fetch, repository_link
from tracker.trust import crypto

pytestmark = pytest.mark.django_db
SECRET = "s3cr3t-T0KEN-xyz"


@pytest.fixture(autouse=True)
def _no_kick(monkeypatch):
    monkeypatch.setattr(repositories, "fetch_kick", lambda: None)


@pytest.fixture
def roots(settings, tmp_path) -> Path:
    return configured(settings, tmp_path)


def linked(owner, project, path: Path, **fields) -> Repository:
    return repository_link(
        actor=Actor(user=owner), project=project, name="app", local_path=str(path), **fields
    )


def fetch(repo: Repository) -> Repository:
    """Fetch ``repo`` now; how it stands after."""
    fetched = repository_fetch(repo.pk)
    assert fetched is not None
    return fetched


def mirrored_head(repo: Repository, branch: str = "main") -> str:
    return git(mirror_path(repo), "rev-parse", f"refs/heads/{branch}")


def test_a_local_repository_is_mirrored_and_a_new_commit_found_by_the_next_fetch(owner, project, roots):
    source = source_repo(roots / "app", {"src/booking.py": "def book():\n    pass\n"})
    first = git(source, "rev-parse", "HEAD")
    repo = linked(owner, project, source)

    fetched = repository_fetch(repo.pk)

    assert fetched is not None
    assert (fetched.last_commit, fetched.last_error) == (first, "")
    assert fetched.size_bytes > 0
    assert fetched.last_fetch_at is not None
    assert mirror_path(repo) == roots.parent / "mirrors" / str(project.pk) / f"{repo.pk}.git"
    assert git(mirror_path(repo), "rev-parse", "--is-bare-repository") == "true"
    assert repositories_of(project) == [fetched]
    second = commit(source, {"src/cancel.py": "WINDOW = 24\n"}, "Cancellation window")

    again = repository_fetch(repo.pk)

    assert again is not None
    assert again.last_commit == second != first
    assert mirrored_head(repo) == second
    assert "WINDOW = 24" in git(mirror_path(repo), "show", f"{second}:src/cancel.py")


def test_a_failed_fetch_keeps_the_last_good_mirror_and_says_why(owner, project, roots):
    source = source_repo(roots / "app")
    good = git(source, "rev-parse", "HEAD")
    repo = linked(owner, project, source)
    repository_fetch(repo.pk)
    before = Repository.objects.get().last_fetch_at
    assert before is not None
    source.rename(roots / "gone")

    failed = repository_fetch(repo.pk)

    assert failed is not None
    assert failed.last_error
    assert "git failed" in failed.last_error
    assert failed.last_commit == good
    assert failed.last_fetch_at is not None
    assert failed.last_fetch_at > before
    assert mirrored_head(repo) == good


def test_a_repository_past_the_size_cap_keeps_the_previous_mirror(owner, project, roots, settings, tmp_path):
    configured(settings, tmp_path, max_mb=1)
    source = source_repo(roots / "app")
    good = git(source, "rev-parse", "HEAD")
    repo = linked(owner, project, source)
    assert fetch(repo).last_commit == good
    size = Repository.objects.get().size_bytes
    commit(source, {"blob.bin": os.urandom(3 * 2**20).hex()}, "A large file")

    capped = repository_fetch(repo.pk)

    assert capped is not None
    assert "larger than the cap of 1 MB" in capped.last_error
    assert (capped.last_commit, capped.size_bytes) == (good, size)
    assert mirrored_head(repo) == good
    assert [path.name for path in mirror_path(repo).parent.iterdir()] == [
        mirror_path(repo).name
    ]  # no leftovers


def test_a_first_clone_past_the_size_cap_leaves_no_mirror(owner, project, roots, settings, tmp_path):
    configured(settings, tmp_path, max_mb=1)
    source = source_repo(roots / "app", {"blob.bin": os.urandom(3 * 2**20).hex()})
    repo = linked(owner, project, source)

    capped = fetch(repo)

    assert "larger than the cap of 1 MB" in capped.last_error
    assert (capped.last_commit, capped.size_bytes) == ("", 0)
    assert list(mirror_path(repo).parent.iterdir()) == []


def test_the_swap_leaves_one_mirror_and_no_scratch(owner, project, roots):
    source = source_repo(roots / "app")
    repo = linked(owner, project, source)
    inode = None
    for number in range(3):
        commit(source, {f"f{number}.txt": str(number)}, f"Round {number}")
        fetch(repo)
        assert [path.name for path in mirror_path(repo).parent.iterdir()] == [mirror_path(repo).name]
        assert mirror_path(repo).stat().st_ino != inode  # a new folder each time, swapped in
        inode = mirror_path(repo).stat().st_ino
    assert mirrored_head(repo) == git(source, "rev-parse", "HEAD")


def test_a_missing_default_branch_is_said(owner, project, roots):
    source = source_repo(roots / "app")
    repo = linked(owner, project, source, default_branch="develop")

    fetched = repository_fetch(repo.pk)

    assert fetched is not None
    assert fetched.last_commit == ""
    assert "“develop” is not in the repository" in fetched.last_error
    assert mirror_path(repo).exists()


def test_no_hook_of_the_source_runs(owner, project, roots, tmp_path):
    source = source_repo(roots / "app")
    marker = tmp_path / "hook-ran"
    hooks = source / "hooks-elsewhere"
    hooks.mkdir()
    for folder in (source / ".git" / "hooks", hooks):
        for name in ("post-checkout", "reference-transaction", "post-update", "pre-upload", "post-receive"):
            hook = folder / name
            hook.write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
            hook.chmod(0o755)
    git(source, "config", "core.hooksPath", str(hooks))
    repo = linked(owner, project, source)

    assert fetch(repo).last_error == ""
    # A hook inside the mirror too (a template's, or one planted): the next fetch updates refs.
    planted = mirror_path(repo) / "hooks" / "reference-transaction"
    planted.parent.mkdir(exist_ok=True)
    planted.write_text(f"#!/bin/sh\necho mirror >> {marker}\n")
    planted.chmod(0o755)
    commit(source, {"b.txt": "b"}, "Second")
    assert fetch(repo).last_error == ""

    assert not marker.exists()


def fake_ssh(monkeypatch, tmp_path: Path, body: str) -> Path:
    """Git's ssh is this script: what a server or a hostile transport would do."""
    script = tmp_path / "fake-ssh"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    monkeypatch.setattr(mirror_module, "SSH_COMMAND", str(script))
    return script


def ssh_linked(owner, project) -> Repository:
    """An ssh repository with a credential, which the services only take for https: the way git
    hands one to its transport (GIT_ASKPASS) is the same, and a fake ssh can show what it got."""
    repo = repository_link(
        actor=Actor(user=owner), project=project, name="remote", url="ssh://git@git.example.com/team/app.git"
    )
    Repository.objects.filter(pk=repo.pk).update(credential_encrypted=crypto.encrypt(f"deploy:{SECRET}"))
    return repo


def test_the_credential_reaches_git_only_through_askpass_and_is_scrubbed(
    owner, project, roots, monkeypatch, tmp_path, caplog, client_for
):
    seen = tmp_path / "seen"
    fake_ssh(
        monkeypatch,
        tmp_path,
        f'echo "argv: $*" >> {seen}\n'
        f"tr '\\0' ' ' < /proc/$PPID/cmdline >> {seen}; echo >> {seen}\n"
        f'echo "askpass: $("$SSH_ASKPASS" "Password for ssh://deploy@git.example.com: ")" >> {seen}\n'
        f'echo "fatal: could not log in with password $("$SSH_ASKPASS" Password) for deploy" >&2\n'
        "exit 1\n",
    )
    repo = ssh_linked(owner, project)

    with caplog.at_level(logging.DEBUG):
        failed = repository_fetch(repo.pk)

    assert failed is not None
    assert failed.last_error
    lines = seen.read_text().splitlines()
    assert f"askpass: {SECRET}" in lines  # git can use it ...
    assert not [
        line for line in lines if SECRET in line and not line.startswith("askpass: ")
    ]  # ... nowhere else
    assert "could not log in with password ***" in failed.last_error
    assert SECRET not in failed.last_error
    assert SECRET not in caplog.text
    answer = client_for(owner).get(f"/api/v1/projects/BAL/repositories/{repo.pk}/")
    assert answer.status_code == 200
    assert SECRET not in answer.content.decode()


def test_a_git_that_hangs_is_killed_with_its_children_at_the_time_limit(
    owner, project, roots, settings, monkeypatch, tmp_path
):
    configured(settings, tmp_path, timeout_seconds=1)
    child = tmp_path / "child-pid"
    fake_ssh(monkeypatch, tmp_path, f"sleep 60 &\necho $! > {child}\nsleep 60\n")
    repo = ssh_linked(owner, project)

    started = time.monotonic()
    failed = repository_fetch(repo.pk)

    assert time.monotonic() - started < 15
    assert failed is not None
    assert failed.last_error == "Timed out after 1 s."
    pid = int(child.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    assert not mirror_path(repo).exists()


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def test_due_repositories_follow_fetch_minutes_and_requests(owner, project, roots, settings, tmp_path):
    source = source_repo(roots / "app")
    repo = linked(owner, project, source)
    assert repositories_due() == [repo.pk]
    repository_fetch(repo.pk)

    assert repositories_due() == []
    Repository.objects.filter(pk=repo.pk).update(last_fetch_at=repo.created_at.replace(year=2000))
    assert repositories_due() == [repo.pk]


def test_a_fetch_on_its_way_is_not_run_twice(owner, project, roots):
    source = source_repo(roots / "app")
    repo = linked(owner, project, source)
    Repository.objects.filter(pk=repo.pk).update(fetching_since=repo.created_at)

    assert repository_fetch(repo.pk) is None
    assert not mirror_path(repo).exists()


def test_an_error_is_scrubbed_of_the_credential_its_parts_and_any_url_password():
    text = "fatal: bad pass:word:9 for bob at https://bob:pass:word:9@h.example/x and https://u:pw99@h/y"

    scrubbed = mirror_module.scrub(text, "bob:pass:word:9")

    assert "pass:word:9" not in scrubbed
    assert "pw99" not in scrubbed
    assert scrubbed.endswith("https://u:***@h/y")
    assert len(mirror_module.scrub("x" * 5000, "")) == mirror_module.ERROR_CHARS


def test_a_local_path_no_longer_under_the_roots_is_fetched_no_more(owner, project, roots, settings, tmp_path):
    """The roots are checked again at each fetch: a folder the operator has taken out of
    local_roots, or one replaced by a link out of them, keeps its last mirror and says why."""
    source = source_repo(roots / "app")
    good = git(source, "rev-parse", "HEAD")
    repo = linked(owner, project, source)
    assert fetch(repo).last_commit == good
    elsewhere = source_repo(tmp_path / "elsewhere")
    commit(elsewhere, {"stolen.txt": "from outside the roots\n"}, "Outside")
    source.rename(roots / "moved")
    source.symlink_to(elsewhere)

    linked_out = fetch(repo)

    assert "no longer under [repositories] local_roots" in linked_out.last_error
    assert linked_out.last_commit == good
    assert mirrored_head(repo) == good
    source.unlink()
    (roots / "moved").rename(source)
    settings.BALLET_REPOSITORIES = RepositoriesTable(local_roots=(str(tmp_path / "other"),))

    taken_out = fetch(repo)

    assert "no longer under" in taken_out.last_error
    assert mirrored_head(repo) == good
    configured(settings, tmp_path)
    assert fetch(repo).last_error == ""


def packs(repo: Repository) -> list[Path]:
    return sorted((mirror_path(repo) / "objects" / "pack").glob("*.pack"))


def test_the_packs_fetches_bring_are_made_one_past_the_limit(owner, project, roots, monkeypatch):
    monkeypatch.setattr(mirror_module, "MAX_PACKS", 3)
    source = source_repo(roots / "app", {"README.md": "# App\n"})
    repo = linked(owner, project, source)
    fetch(repo)
    counts = []
    for n in range(4):
        latest = commit(source, {f"src/step{n}.py": f"STEP = {n}\n"}, f"Step {n}")
        fetch(repo)
        counts.append(len(packs(repo)))

    assert counts == [2, 3, 1, 2]  # the clone's and each fetch's, until a fourth makes them one
    assert mirrored_head(repo) == latest
    assert "STEP = 2" in git(mirror_path(repo), "show", "HEAD:src/step2.py")
    git(mirror_path(repo), "fsck", "--no-progress")


def test_a_repack_cut_short_keeps_the_fetch_and_leaves_no_unfinished_pack(owner, project, roots, monkeypatch):
    monkeypatch.setattr(mirror_module, "MAX_PACKS", 1)
    source = source_repo(roots / "app", {"README.md": "# App\n"})
    repo = linked(owner, project, source)
    fetch(repo)
    latest = commit(source, {"src/booking.py": "WINDOW = 24\n"}, "Booking")
    real = mirror_module._run

    def repack_cut(args, *, env, limits, watch, started):
        if "repack" not in args:
            return real(args, env=env, limits=limits, watch=watch, started=started)
        (watch / "objects" / "pack" / ".tmp-99-pack-unfinished.pack").write_bytes(b"PACK")
        raise mirror_module.GitError("Timed out after 60 s.")

    monkeypatch.setattr(mirror_module, "_run", repack_cut)

    fetched = fetch(repo)

    assert (fetched.last_commit, fetched.last_error) == (latest, "")
    assert len(packs(repo)) == 2
    assert not list((mirror_path(repo) / "objects" / "pack").glob(".tmp-*"))
    git(mirror_path(repo), "fsck", "--no-progress")


def test_a_repository_whose_git_files_point_outside_the_roots_is_not_linked(owner, project, roots, tmp_path):
    outside = source_repo(tmp_path / "outside", {"secret.txt": "from outside the roots\n"})
    pointing = roots / "pointing"
    pointing.mkdir()
    (pointing / ".git").write_text(f"gitdir: {outside / '.git'}\n")
    borrowing = roots / "borrowing.git"
    git(roots, "init", "-q", "--bare", "borrowing.git")
    (borrowing / "objects" / "info" / "alternates").write_text(f"{outside / '.git' / 'objects'}\n")
    nul = roots / "nul"
    nul.mkdir()
    (nul / ".git").write_text("gitdir: ../\x00\n")
    linking = source_repo(roots / "linking")
    shutil.rmtree(linking / ".git" / "objects")
    (linking / ".git" / "objects").symlink_to(outside / ".git" / "objects")

    for folder in (pointing, borrowing, nul, linking):
        with pytest.raises(ValidationError) as refused:
            linked(owner, project, folder)
        assert refused.value.errors == {"local_path": [repositories.READS_OUTSIDE]}
    assert not Repository.objects.exists()


def test_a_worktree_and_alternates_within_the_roots_are_linked_and_fetched(owner, project, roots):
    main = source_repo(roots / "main", {"src/app.py": "APP = 1\n"})
    git(main, "worktree", "add", "-q", "-b", "feature", str(roots / "feature"))
    borrowing = roots / "borrowing.git"
    git(roots, "clone", "-q", "--bare", "--shared", str(main), "borrowing.git")
    assert (borrowing / "objects" / "info" / "alternates").is_file()

    for name, folder in (("feature", roots / "feature"), ("borrowing", borrowing)):
        repo = repository_link(actor=Actor(user=owner), project=project, name=name, local_path=str(folder))
        fetched = fetch(repo)
        assert (fetched.last_error, fetched.last_commit) == ("", git(main, "rev-parse", "main"))


def test_a_linked_repository_since_pointed_outside_the_roots_is_fetched_no_more(
    owner, project, roots, tmp_path
):
    source = source_repo(roots / "app")
    good = git(source, "rev-parse", "HEAD")
    repo = linked(owner, project, source)
    assert fetch(repo).last_commit == good
    outside = source_repo(tmp_path / "outside", {"secret.txt": "from outside the roots\n"})
    alternates = source / ".git" / "objects" / "info" / "alternates"
    alternates.write_text(f"{outside / '.git' / 'objects'}\n")

    refused = fetch(repo)

    assert refused.last_error == repositories.NO_LONGER_ALLOWED
    assert (refused.last_commit, mirrored_head(repo)) == (good, good)
    alternates.unlink()
    assert fetch(repo).last_error == ""
