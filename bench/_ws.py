"""Plumbing of the benchmarks that drive a real daphne process: log in, REST calls, WebSockets, /proc.

The server runs in its own process (``tests/fakes/servers.py``); the bench talks to it as a browser
and a script would: the Django session cookie from the login form (with its CSRF token) for the
WebSocket, an API token for REST.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import os
import re
import resource
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None  # a 302 after logging in is the answer, not something to follow


def login_cookie(base_url: str, username: str, password: str) -> str:
    """The ``Cookie`` header of a browser logged in through ``/accounts/login/`` (CSRF and all)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect())
    with opener.open(f"{base_url}/accounts/login/", timeout=30) as response:
        page = response.read().decode()
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if match is None:
        raise RuntimeError("the login page has no CSRF token")
    form = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": match.group(1)}
    ).encode()
    request = urllib.request.Request(f"{base_url}/accounts/login/", data=form, method="POST")
    request.add_header("Referer", f"{base_url}/accounts/login/")
    try:
        with opener.open(request, timeout=30) as response:
            status = response.status
    except urllib.error.HTTPError as exc:  # the 302 that a successful login answers
        status = exc.code
    cookies = {cookie.name: cookie.value for cookie in jar}
    if status != 302 or "sessionid" not in cookies:
        raise RuntimeError(f"logging in as {username} failed (HTTP {status})")
    return "; ".join(f"{name}={value}" for name, value in cookies.items())


def api(base_url: str, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
    """One JSON REST call; raises on an HTTP error."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{base_url}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Token {token}")
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read() or b"null")


def api_token(base_url: str, username: str, password: str) -> str:
    token: str = api(base_url, "POST", "/api/v1/auth/token/", {"username": username, "password": password})[
        "token"
    ]
    return token


def raise_fd_limit() -> int:
    """Raise this process's open-file limit to the hard limit (children started later inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def proc_status_kb(pid: int, field: str) -> int:
    """A ``kB`` field of ``/proc/PID/status``: ``VmRSS`` (now) or ``VmHWM`` (peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise KeyError(field)


def process_group(pid: int) -> list[int]:
    """The processes of a process group (the worker's: its main process, its beat and its pool)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) == pid:
                members.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return members


def proc_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextlib.contextmanager
def checkout(rev: str, tmp: Path) -> Iterator[tuple[Path, str]]:
    """A detached git worktree of ``rev`` (with this checkout's .venv) in ``tmp``, removed on
    leaving; with the short hash of its commit."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", f"{rev}^{{commit}}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    path = tmp / "baseline"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(path), commit], cwd=ROOT, check=True, capture_output=True
    )
    try:
        (path / ".venv").symlink_to((ROOT / ".venv").resolve())
        yield path, commit
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False, capture_output=True
        )
