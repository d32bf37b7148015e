"""The read layer over a bare mirror (tracker/repos/reads.py): a real repository built with git in a
temporary folder, mirrored with ``git clone --mirror`` as the worker does."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tracker.repos import reads
from tracker.repos.plumbing import RepoError, denied

SECRET = "hunter2"  # in every denied file, nowhere else
DENIED = {
    ".env": f"TOKEN={SECRET}-env\n",
    "config/secret.yml": f"password: {SECRET}-yml\n",
    "id_rsa": f"-----BEGIN {SECRET}-key\n",
    "server.pem": f"{SECRET}-pem\n",
    "deploy/.env.production": f"DB={SECRET}-prod\n",
    "Secrets/notes.txt": f"{SECRET}-dir\n",
    "CREDENTIALS.txt": f"{SECRET}-upper\n",
    "notes/a\nsecret.txt": f"{SECRET}-newline\n",
}
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def run_git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)


def mirror_of(work: Path, into: Path) -> Path:
    mirror = into / "mirror.git"
    run_git(into, "clone", "--quiet", "--mirror", str(work), str(mirror))
    return mirror


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> dict[str, Any]:
    """A small app over two commits and a tag, with denied files, a binary, big files, links."""
    base = tmp_path_factory.mktemp("repo")
    work = base / "work"
    work.mkdir()
    run_git(work, "init", "--quiet", "-b", "main")
    write(
        work,
        {
            "README.md": "# Courtside\nBook a court.\n",
            "src/app.py": "from booking import book_court\n\n\ndef main():\n    book_court()\n",
            "src/booking/service.py": "def book_court(court, slot):\n    return (court, slot)\n",
        },
    )
    run_git(work, "add", "-A")
    run_git(work, "commit", "--quiet", "-m", "Start the app")
    run_git(work, "tag", "v1")
    first = run_git(work, "rev-parse", "HEAD")
    write(
        work,
        {
            **DENIED,
            "docs/logo.png": b"\x89PNG\r\n\x1a\n" + b"\x00" * 100 + b"booking",
            "big.txt": "".join(f"line {n} booking\n" for n in range(1, 5001)),
            "wide.txt": "".join(f"{n:04d} " + "x" * 195 + "\n" for n in range(1, 2001)),
            "long.txt": "y" * 5000 + "\n",
            "-rf": "not an option booking\n",
            "odd\nname.txt": "a newline in my name booking\n",
        },
    )
    (work / "passwd").symlink_to("/etc/passwd")
    (work / "up").symlink_to("../../etc/hosts")
    (work / "etc").symlink_to("/etc")
    (work / "src" / "main.py").symlink_to("app.py")
    run_git(work, "add", "-A")
    run_git(work, "commit", "--quiet", "-m", "Add docs, data and configuration\n\nThe body says more.")
    second = run_git(work, "rev-parse", "HEAD")
    return {"mirror": mirror_of(work, base), "first": first, "second": second}


def shown(output: Any) -> str:
    return json.dumps(output, ensure_ascii=False)


def error_of(call, *args, **kwargs) -> RepoError:
    with pytest.raises(RepoError) as caught:
        call(*args, **kwargs)
    return caught.value


# --- happy paths -----------------------------------------------------------------------------


def test_the_tree_lists_names_types_and_sizes(repo):
    root = reads.tree(repo["mirror"])
    by_name = {entry["name"]: entry for entry in root["entries"]}
    assert root["commit"] == repo["second"]
    assert by_name["README.md"] == {"name": "README.md", "type": "file", "size": 26}
    assert by_name["src"] == {"name": "src", "type": "dir"}
    assert by_name["passwd"] == {"name": "passwd", "type": "symlink"}
    assert by_name["-rf"]["type"] == "file"
    assert "cut" not in root

    src = reads.tree(repo["mirror"], None, "src/")
    assert {e["name"] for e in src["entries"]} == {"app.py", "booking", "main.py"}
    assert src["path"] == "src"


def test_the_tree_at_an_older_ref_a_tag_or_a_short_hash(repo):
    for ref in ("v1", repo["first"][:7], repo["first"]):
        names = {e["name"] for e in reads.tree(repo["mirror"], ref)["entries"]}
        assert names == {"README.md", "src"}


def test_a_file_is_read_with_line_numbers(repo):
    found = reads.read(repo["mirror"], "main", "src/booking/service.py")
    assert found["type"] == "file"
    assert found["text"] == "     1\tdef book_court(court, slot):\n     2\t    return (court, slot)"
    assert (found["start"], found["end"], found["total_lines"]) == (1, 2, 2)
    assert "cut" not in found

    part = reads.read(repo["mirror"], None, "big.txt", start=4999, lines=10)
    assert part["text"].splitlines() == ["  4999\tline 4999 booking", "  5000\tline 5000 booking"]


def test_search_finds_fixed_strings_by_default_and_regexes_when_asked(repo):
    found = reads.search(repo["mirror"], None, "book_court(", path_glob="src")
    assert {(hit["path"], hit["line"]) for hit in found["hits"]} == {
        ("src/app.py", 5),
        ("src/booking/service.py", 1),
    }
    assert reads.search(repo["mirror"], None, "book_court(c.*)", path_glob="src")["hits"] == []

    regex = reads.search(repo["mirror"], None, r"def book_court\(c", path_glob="*.py", regex=True)
    assert regex["hits"] == [
        {"path": "src/booking/service.py", "line": 1, "text": "def book_court(court, slot):"}
    ]
    assert reads.search(repo["mirror"], "v1", "Book a court")["hits"][0]["path"] == "README.md"


def test_a_bad_regex_is_a_readable_error(repo):
    error = error_of(reads.search, repo["mirror"], None, "(unclosed", regex=True)
    assert error.code == "invalid_pattern"


def test_the_log_gives_commits_newest_first(repo):
    log = reads.log(repo["mirror"])
    assert [c["sha"] for c in log["commits"]] == [repo["second"], repo["first"]]
    newest = log["commits"][0]
    assert newest["author"] == "Ada"
    assert newest["subject"] == "Add docs, data and configuration"
    assert newest["files_changed"] == len(DENIED) + 10
    assert log["commits"][1]["files_changed"] == 3

    by_path = reads.log(repo["mirror"], None, "src/booking")
    assert [c["sha"] for c in by_path["commits"]] == [repo["first"]]
    cut = reads.log(repo["mirror"], limit=1)
    assert len(cut["commits"]) == 1
    assert "limit" in cut["cut"]


def test_a_commit_has_its_message_and_files(repo):
    found = reads.commit(repo["mirror"], repo["second"][:10])
    assert found["sha"] == repo["second"]
    assert found["message"] == "Add docs, data and configuration\n\nThe body says more."
    assert found["parents"] == [repo["first"]]
    files = {change["path"]: change for change in found["files"]}
    assert files["big.txt"]["status"] == "A"
    assert "README.md" not in files
    assert files[".env"] == {"status": "A", "path": ".env", "denied": True}
    assert "denied" not in files["big.txt"]
    assert reads.commit(repo["mirror"], repo["first"])["parents"] == []


# --- bounds ----------------------------------------------------------------------------------


def test_a_long_file_is_cut_at_two_thousand_lines_saying_where_to_read_on(repo):
    found = reads.read(repo["mirror"], None, "big.txt")
    assert (found["start"], found["end"], found["total_lines"]) == (1, 2000, 5000)
    assert len(found["text"].splitlines()) == 2000
    assert "read on with start 2001" in found["cut"]
    assert reads.read(repo["mirror"], None, "big.txt", lines=100_000)["end"] == 2000


def test_a_read_stays_under_a_hundred_kilobytes(repo):
    found = reads.read(repo["mirror"], None, "wide.txt")
    assert len(found["text"].encode()) <= reads.MAX_BYTES
    assert found["end"] < 2000
    assert f"start {found['end'] + 1}" in found["cut"]


def test_a_huge_file_is_read_only_so_far(repo, monkeypatch):
    monkeypatch.setattr(reads, "MAX_SCAN_BYTES", 1000)
    found = reads.read(repo["mirror"], None, "big.txt")
    assert found["total_lines"] < 100  # of those scanned: the rest was never read
    assert found["text"].endswith(f"line {found['total_lines']} booking")
    assert "first 1,000 bytes" in found["cut"]


def test_a_very_long_line_is_cut(repo):
    found = reads.read(repo["mirror"], None, "long.txt")
    assert len(found["text"]) < 2100
    assert "long line" in found["cut"]


def test_reading_past_the_end_is_a_readable_error(repo):
    error = error_of(reads.read, repo["mirror"], None, "README.md", start=50)
    assert error.code == "invalid_range"
    assert "2 lines" in error.message


def test_a_binary_file_is_described_not_shown(repo):
    found = reads.read(repo["mirror"], None, "docs/logo.png")
    assert found["type"] == "binary"
    assert "PNG image" in found["text"]
    assert found["size"] == 115
    assert "\x00" not in shown(found)
    assert all(
        hit["path"] != "docs/logo.png" for hit in reads.search(repo["mirror"], None, "booking")["hits"]
    )


def test_a_repository_of_many_files_stays_bounded(tmp_path):
    work = tmp_path / "many"
    work.mkdir()
    run_git(work, "init", "--quiet", "-b", "main")
    write(work, {f"f{n:04d}.txt": "needle\n" * 30 for n in range(1500)})
    run_git(work, "add", "-A")
    run_git(work, "commit", "--quiet", "-m", "Many")
    mirror = mirror_of(work, tmp_path)

    listed = reads.tree(mirror)
    assert len(listed["entries"]) == reads.MAX_ENTRIES
    assert "subdirectory" in listed["cut"]
    found = reads.search(mirror, None, "needle")
    assert len(found["hits"]) == reads.MAX_HITS
    assert "narrow" in found["cut"]
    assert len(shown(found)) < 4 * reads.MAX_BYTES
    few = reads.search(mirror, None, "needle", limit=3)
    assert len(few["hits"]) == 3
    assert "first 3 hits" in few["cut"]


def test_git_past_its_time_is_stopped_with_a_readable_error(repo):
    error = error_of(reads.tree, repo["mirror"], timeout=0)
    assert error.code == "timeout"
    assert "took longer than 0 s" in error.message


# --- the deny list ---------------------------------------------------------------------------


def test_the_deny_list_matches_any_component_or_the_whole_path_in_any_case():
    deny = reads.DEFAULT_DENY
    for path in DENIED:
        assert denied(path, deny), path
    assert denied("a/b/ID_ED25519", deny)
    assert not denied("src/booking/service.py", deny)
    assert not denied("docs/environment.md", deny)


@pytest.mark.parametrize("path", sorted(DENIED))
def test_a_denied_file_is_never_read(repo, path):
    error = error_of(reads.read, repo["mirror"], None, path)
    assert error.code == "denied"
    assert "deny list" in error.message
    assert SECRET not in error.message
    assert error_of(reads.log, repo["mirror"], None, path).code == "denied"


def test_denied_content_never_appears_in_any_output(repo):
    mirror = repo["mirror"]
    outputs = [
        reads.tree(mirror),
        reads.tree(mirror, None, "config"),
        reads.tree(mirror, None, "deploy"),
        reads.search(mirror, None, SECRET),
        reads.search(mirror, None, "hunter.", regex=True),
        reads.search(mirror, None, SECRET, path_glob=".env"),
        reads.search(mirror, None, SECRET, path_glob="*secret*"),
        reads.log(mirror),
        reads.commit(mirror, repo["second"]),
    ]
    for output in outputs:
        assert SECRET not in shown(output)
    # What the deny list keeps out is there to find: without it, every denied file is a hit.
    unguarded = reads.search(mirror, None, SECRET, deny=())
    assert {hit["path"] for hit in unguarded["hits"]} == set(DENIED)
    for search in outputs[3:7]:
        assert search["hits"] == []
    # A denied entry is named, flagged and nothing more.
    config = reads.tree(mirror, None, "config")["entries"]
    assert config == [{"name": "secret.yml", "type": "file", "denied": True}]
    assert error_of(reads.tree, mirror, None, "Secrets").code == "denied"


def test_hits_in_denied_files_are_dropped_even_past_gits_exclusions(repo):
    """A deny list git's pathspecs do not cover (a pattern only this module's matching knows) still
    keeps the hits out."""
    found = reads.search(repo["mirror"], None, "booking", deny=["big.txt"])
    assert found["hits"]
    assert all(hit["path"] != "big.txt" for hit in found["hits"])


# --- what cannot leave the tree --------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("../etc/passwd", "invalid_path"),
        ("src/../../etc/passwd", "invalid_path"),
        ("/etc/passwd", "invalid_path"),
        ("src/app.py\x00.txt", "invalid_path"),
        ("x" * 5000, "invalid_path"),
        ("etc/passwd", "not_found"),  # etc is a link to /etc: never walked through
        ("src", "is_directory"),
        ("", "invalid_path"),
    ],
)
def test_paths_outside_or_not_in_the_tree_are_readable_errors(repo, path, code):
    error = error_of(reads.read, repo["mirror"], None, path)
    assert error.code == code
    assert "root:" not in error.message


def test_a_symbolic_link_out_of_the_tree_is_never_followed(repo):
    for link in ("passwd", "up"):
        error = error_of(reads.read, repo["mirror"], None, link)
        assert error.code == "outside_tree"
        assert "/etc" not in error.message
    assert error_of(reads.tree, repo["mirror"], None, "etc").code == "not_a_directory"
    for output in (reads.search(repo["mirror"], None, "root:"), reads.tree(repo["mirror"])):
        assert "root:x" not in shown(output)


def test_a_symbolic_link_inside_the_tree_names_its_target(repo):
    found = reads.read(repo["mirror"], None, "src/main.py")
    assert found["type"] == "symlink"
    assert found["target"] == "src/app.py"
    assert "book_court" not in shown(found)


def test_a_path_with_a_newline_is_one_path(repo):
    found = reads.search(repo["mirror"], None, "a newline in my name")
    assert found["hits"] == [{"path": "odd\nname.txt", "line": 1, "text": "a newline in my name booking"}]
    assert reads.read(repo["mirror"], None, "odd\nname.txt")["total_lines"] == 1


def test_a_file_named_like_an_option_is_a_file(repo):
    assert reads.read(repo["mirror"], None, "-rf")["text"] == "     1\tnot an option booking"
    assert any(hit["path"] == "-rf" for hit in reads.search(repo["mirror"], None, "not an option")["hits"])
    assert reads.log(repo["mirror"], None, "-rf")["commits"][0]["sha"] == repo["second"]
    assert reads.search(repo["mirror"], None, "-rf")["hits"] == []  # a pattern, not an option


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ("nope", "unknown_ref"),
        ("deadbeef", "unknown_ref"),
        ("--output=x", "invalid_ref"),
        ("-h", "invalid_ref"),
        ("main..v1", "invalid_ref"),
        ("main@{1}", "invalid_ref"),
        ("main:README.md", "invalid_ref"),
        ("main\x00", "invalid_ref"),
        ("", "invalid_ref"),
    ],
)
def test_unknown_or_malformed_refs_are_readable_errors(repo, ref, code):
    before = set(repo["mirror"].iterdir())
    for call in (reads.tree, reads.log):
        assert error_of(call, repo["mirror"], ref).code == code
    assert error_of(reads.read, repo["mirror"], ref, "README.md").code == code
    assert error_of(reads.search, repo["mirror"], ref, "book").code == code
    assert set(repo["mirror"].iterdir()) == before  # --output=x wrote nothing
    assert not Path("x").exists()


def test_a_commit_hash_must_look_like_one(repo):
    assert error_of(reads.commit, repo["mirror"], "HEAD").code == "invalid_ref"
    assert error_of(reads.commit, repo["mirror"], "0" * 40).code == "unknown_ref"


def test_a_mirror_not_fetched_yet_is_a_readable_error(tmp_path):
    assert error_of(reads.tree, tmp_path / "missing.git").code == "no_mirror"


def test_a_pattern_must_be_one_line(repo):
    for pattern in ("", "a\nb", "a\x00b", "x" * 501):
        assert error_of(reads.search, repo["mirror"], None, pattern).code == "invalid_pattern"


def test_a_hostile_repository_of_100000_files_cannot_exhaust_a_read(tmp_path):
    """Issue 45's hostile repository: a hundred thousand files, five thousand of them in one
    folder (made with ``git fast-import`` in a second: every path shares one blob), and a file
    named ``-rf``."""
    work = tmp_path / "hostile"
    work.mkdir()
    run_git(work, "init", "--quiet", "--bare", "-b", "main")
    wide = [f"files/{n:05d}.txt" for n in range(5_000)]
    paths = [*wide, *(f"deep/{n // 1000:03d}/{n:06d}.txt" for n in range(95_000))]
    stream = "".join(
        [
            "blob\nmark :1\ndata 7\nneedle\n\n",
            "commit refs/heads/main\nmark :2\ncommitter Tester <t@example.com> 0 +0000\ndata 5\nMany\n\n",
            *(f"M 100644 :1 {path}\n" for path in paths),
            "M 100644 :1 -rf\n\n",
        ]
    )
    subprocess.run(["git", "fast-import", "--quiet"], cwd=work, input=stream.encode(), check=True)
    mirror = mirror_of(work, tmp_path)

    listed = reads.tree(mirror, "main", "files")
    assert len(listed["entries"]) == reads.MAX_ENTRIES
    assert listed["cut"]
    found = reads.search(mirror, "main", "needle")
    assert len(found["hits"]) == reads.MAX_HITS
    assert found["cut"]
    assert len(shown(found)) < 4 * reads.MAX_BYTES
    dashed = reads.read(mirror, "main", "-rf")  # a file, never an option of git
    assert "needle" in shown(dashed)
    assert [e["name"] for e in reads.tree(mirror, "main")["entries"]] == ["-rf", "deep", "files"]


def test_a_file_over_the_search_bound_is_left_out_and_said(repo, monkeypatch):
    """git grep inflates each file whole: a 1 GB file of text (a few MB packed, under the size cap)
    would take 1 GB of memory a search, so files over the bound are never grepped, only named."""
    monkeypatch.setattr(reads, "MAX_SEARCH_BYTES", 50_000)  # big.txt (90 KB) and wide.txt (400 KB)

    found = reads.search(repo["mirror"], None, "booking")

    paths = {hit["path"] for hit in found["hits"]}
    assert "big.txt" not in paths
    assert {"src/app.py", "-rf"} <= paths
    assert "2 file(s) over 50,000 bytes not searched (such as big.txt)" in found["cut"]
    assert "repo_read" in found["cut"]
    assert reads.read(repo["mirror"], None, "big.txt", lines=1)["text"] == "     1\tline 1 booking"
    monkeypatch.undo()
    unbounded = reads.search(repo["mirror"], None, "booking")
    assert "big.txt" in {hit["path"] for hit in unbounded["hits"]}


def test_a_denied_file_over_the_search_bound_is_not_named(repo, monkeypatch):
    monkeypatch.setattr(reads, "MAX_SEARCH_BYTES", 10)  # every denied file is larger

    found = reads.search(repo["mirror"], None, SECRET)

    assert found["hits"] == []
    assert SECRET not in shown(found)
    assert not any(name in found["cut"] for name in (".env", "secret", "id_rsa", ".pem", "CREDENTIALS"))


def test_too_many_files_over_the_search_bound_refuse_the_search(repo, monkeypatch):
    monkeypatch.setattr(reads, "MAX_SEARCH_BYTES", 10)
    monkeypatch.setattr(reads, "MAX_LARGE", 3)

    error = error_of(reads.search, repo["mirror"], None, "booking")

    assert error.code == "too_large"
    assert "more than 3 files over 10 bytes" in error.message
