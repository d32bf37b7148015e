"""The README's embedded walk as a newcomer copies it: ``make run`` on an empty database, the
banner it ends with, ``demo`` signed in with the banner's password, then every shell block marked
``<!-- walk: embedded NAME -->`` in README.md and then docs/agents.md, run in order in one bash
as a terminal would run them (variables carry from block to block), against that server.

What the reader does in the browser, the test does first, over HTTP as ``demo``: it answers the
agent's question in its sub-chat (which the ``question`` block then reads) and makes the key with
the ``read`` and ``plan`` scopes that the planner's block asks for, as ``/keys/`` does. The
values the README leaves to the reader are the port (``make run PORT=…``, the blocks' ``8000``)
and the keys of ``export NAME=ballet_…`` lines. Every ``curl`` fails on an HTTP error
(``--fail-with-body``), bash stops at the first command that fails (``set -euo pipefail``, traced
with ``-x`` for the failure's message), and an id captured with ``NAME=$(…)`` must be neither
empty nor ``null``. At the end ``make run`` gets a Ctrl-C, which must end every process it started.

The walk is the embedded mode's: production mode's run deselects it (marker ``embedded``), the
README's production block being followed by tests/e2e/test_production_setup.py.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.client import Client
from tests.fakes.servers import ROOT, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.embedded]

MARKER = re.compile(
    r"^(?P<indent> *)<!-- walk: embedded (?P<name>[\w-]+) -->\n(?P=indent)```(?P<lang>\w+)\n", re.M
)
PLACEHOLDER = re.compile(r"^export (?P<name>\w+)=ballet_…$")
CAPTURE = re.compile(r"^(?P<name>\w+)=\$\(")
README_PORT = "http://127.0.0.1:8000"
ANSWER = "Leave cancelled bookings out of the export"
# What bash runs before the README's lines: each command traced, curl failing on an HTTP error.
PROLOGUE = """set -euxo pipefail
curl() { command curl --fail-with-body --silent --show-error "$@"; }
"""


@dataclass(frozen=True)
class Block:
    source: str
    name: str
    lang: str
    text: str


def blocks(path: Path) -> list[Block]:
    """The marked blocks of ``path``, in order, their list item's indent taken off."""
    text = path.read_text()
    found = []
    for match in MARKER.finditer(text):
        start = match.end()
        fence = f"\n{match['indent']}```\n"
        end = text.index(fence, start - 1)
        lines = text[start:end].splitlines()
        body = "\n".join(line.removeprefix(match["indent"]) for line in lines)
        found.append(Block(path.name, match["name"], match["lang"], body))
    return found


def walk() -> list[Block]:
    found = blocks(ROOT / "README.md") + blocks(ROOT / "docs" / "agents.md")
    names = [block.name for block in found]
    assert len(set(names)) == len(names), f"two walk blocks share a name: {names}"
    for needed in ("make-run", "banner", "question", "planner", "mcp", "worker-day"):
        assert needed in names, f"no <!-- walk: embedded {needed} --> block: {names}"
    return found


def commands(text: str) -> list[str]:
    """The block's commands, a line each (continued lines joined)."""
    return [line for line in text.replace("\\\n", " ").splitlines() if line.strip()]


def script(block: Block, port: int, keys: dict[str, str]) -> str:
    """The block as bash runs it: this server's port, the reader's keys, each captured id checked."""
    lines = [f"echo '== {block.source}: {block.name}'"]
    for line in commands(block.text.replace(README_PORT, f"http://127.0.0.1:{port}")):
        placeholder = PLACEHOLDER.match(line)
        if placeholder:
            assert placeholder["name"] in keys, f"the walk has no value for {line!r}"
        command = f"export {placeholder['name']}={keys[placeholder['name']]}" if placeholder else line
        lines.append(command)
        captured = CAPTURE.match(command)
        if captured:
            name = captured["name"]
            lines.append(
                f'if [ -z "${name}" ] || [ "${name}" = null ]; then '
                f"echo 'the walk captured no {name}: {block.name}' >&2; exit 1; fi"
            )
    return "\n".join(lines) + "\n"


def banner_pattern(block: Block, port: int) -> re.Pattern[str]:
    """The README's banner as the end of ``make run``'s output: its ``…`` the values printed."""
    lines = [
        line for line in block.text.replace(README_PORT, f"http://127.0.0.1:{port}").splitlines() if line
    ]
    # The word an ellipsis ends (``ballet_…``) is part of the value.
    parts = [re.sub(r"(\w*)…", r"(\1\\S+)", re.escape(line)) for line in lines]
    return re.compile(r"\n\s*".join(parts) + r"\s*\Z")


def environment(home: Path) -> dict[str, str]:
    """A newcomer's shell: no configuration, no credential, no outer make; the data in ``home``."""
    dropped = ("DATABASE_URL", "REDIS_URL", "ANTHROPIC_API_KEY", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in dropped and not name.startswith(("PYTEST", "DJANGO_", "BALLET_"))
    }
    return env | {
        "BALLET_SQLITE_PATH": str(home / "db" / "ballet.sqlite3"),
        # A call that reached for Anthropic would fail: nobody listens there.
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{free_port()}",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture
def made_run(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, int, dict[str, str]]]:
    """``make run`` as the README's first block says, on a port of its own; Ctrl-C'd at the end."""
    for tool in ("curl", "jq"):
        assert shutil.which(tool), f"the README's walk needs {tool} (apt-get install {tool}; .ci/run does)"
    [make_run] = [block for block in walk() if block.name == "make-run"]
    line = commands(make_run.text)[0].split("#")[0].split()
    assert line == ["make", "run"], make_run.text
    env = environment(tmp_path)
    port = free_port()
    log = tmp_path / "make-run.log"
    # As a terminal starts it: Ctrl-C heard. A shell without job control (CI's `make test &`)
    # starts its background jobs with SIGINT ignored, and children inherit an ignored signal.
    heard = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [*line, f"PORT={port}"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    finally:
        signal.signal(signal.SIGINT, heard)
    try:
        yield process, log, port, env
    finally:
        left = _interrupt(process)
        text = log.read_text(errors="replace")
        assert left is None, f"make run outlived its Ctrl-C; its processes left:\n{left}\n{text[-3000:]}"
        assert "Traceback" not in text, text[-5000:]


def _group(pid: int) -> str:
    """The processes of ``pid``'s group, as ``ps`` lists them."""
    listed = ["ps", "-o", "pid,stat,etime,args", "-g", str(pid)]
    ran = subprocess.run(listed, check=False, capture_output=True, text=True)
    return ran.stdout


def _interrupt(process: subprocess.Popen[bytes]) -> str | None:
    """Ctrl-C, as a terminal sends it to its foreground group; None when the whole group ended,
    else the processes left (then killed)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=60)  # daphne's grace and more, on a machine as loaded as CI's
    except subprocess.TimeoutExpired:
        left = _group(process.pid)
        os.killpg(process.pid, signal.SIGKILL)
        return left
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return None
        time.sleep(0.1)
    left = _group(process.pid)
    os.killpg(process.pid, signal.SIGKILL)
    return left


def wait_banner(process: subprocess.Popen[bytes], log: Path, pattern: re.Pattern[str]) -> re.Match[str]:
    """``make run``'s banner once it is printed last; a failed run fails with its output."""
    deadline = time.monotonic() + 240
    while True:
        text = log.read_text(errors="replace")
        found = pattern.search(text)
        if found:
            return found
        assert process.poll() is None, f"make run exited with {process.returncode}:\n{text[-5000:]}"
        assert time.monotonic() < deadline, (
            f"make run printed no banner ending like the README's:\n{text[-5000:]}"
        )
        time.sleep(0.2)


def answer_the_question(demo: Client) -> None:
    """What the reader does in the question's sub-chat: answer the agent's pending question."""
    [question] = demo.get("/api/v1/projects/DEMO/questions/?status=open")["results"]
    session = f"/api/v1/planner/sessions/{question['session']}"
    [pending] = [r for r in demo.transcript(question["session"])["requests"] if r["status"] == "pending"]
    status, body = demo.request("POST", f"{session}/answers/", {"request": pending["id"], "text": ANSWER})
    assert (status, body["outcome"]) == (200, "answered"), body


def test_the_readme_walk_runs_as_written_against_make_run(made_run):
    process, log, port, env = made_run
    found = walk()
    [banner] = [block for block in found if block.name == "banner"]
    password, key = wait_banner(process, log, banner_pattern(banner, port)).groups()
    url = f"http://127.0.0.1:{port}"

    demo = Client(url, "demo", password)  # the banner's password signs in
    status, made = demo.request("POST", "/api/v1/keys/", {"name": "README walk", "scopes": ["read", "plan"]})
    assert status == 201, made
    keys = {"BALLET_KEY": key, "PLAN_KEY": made["key"]}
    answer_the_question(demo)

    shell = PROLOGUE + f"export BALLET_KEY={key}\n"  # the banner's line, pasted
    for block in found:
        if block.lang == "sh" and block.name != "make-run":
            shell += script(block, port, keys)
    transcript = _bash(shell, env)

    assert ANSWER in transcript, "the agent read no answer to its question"
    assert demo.get("/api/v1/projects/DEMO/items/DEMO-9/")["state"] == "in_review", transcript[-3000:]


def _bash(shell: str, env: dict[str, str]) -> str:
    """The walk's output; a failed command fails the test with bash's trace of it."""
    done = subprocess.run(
        ["bash", "-c", shell],
        cwd=ROOT,  # where a reader runs them
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (
        f"a README command failed (exit {done.returncode}):\n{done.stderr[-3000:]}\n"
        f"its output:\n{done.stdout[-3000:]}\nthe script:\n{shell}"
    )
    return done.stdout
