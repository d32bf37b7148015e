"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, the version
``tests/e2e/conformance/package-lock.json`` pins, installed by ``make conformance``) against a
real daphne: every server scenario that applies to Ballet passes, and every other one is excluded
by name with its reason (docs/agents.md#conformance), so a new version's new scenario fails
:func:`test_every_scenario_of_the_suite_is_run_or_excluded_with_its_reason` until it is decided.

The suite's client sends no header of ours, so it talks to a small proxy that adds the agent's
``Authorization: Bearer KEY`` and passes everything else (Host and Origin included) and Ballet's
answer unchanged: what the suite judges is what Ballet answered."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.e2e.conftest import agent_key
from tests.fakes.messages_api import FakeMessagesAPI
from tests.fakes.servers import ROOT, Deployment, Server

pytestmark = pytest.mark.e2e

PACKAGE = "@modelcontextprotocol/conformance"
PINNED = json.loads((ROOT / "tests/e2e/conformance/package.json").read_text())["dependencies"][PACKAGE]
INSTALLED = ROOT / ".conformance/node_modules" / PACKAGE
# Scenarios every MCP server of Ballet's kind must pass: no fixture of the reference server in them.
APPLICABLE = (
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
)
FIXTURE_TOOL = "calls a tool of the reference test server"
NO_PUSH = "the server speaks to the client mid-call, which stateless JSON responses cannot"
EXCLUDED = {
    "logging-set-level": "the optional logging capability, not declared: stateless JSON carries no log",
    "completion-complete": "the optional completions capability, not declared (and a fixture prompt)",
    "tools-call-simple-text": FIXTURE_TOOL,
    "tools-call-image": FIXTURE_TOOL,
    "tools-call-audio": FIXTURE_TOOL,
    "tools-call-embedded-resource": FIXTURE_TOOL,
    "tools-call-mixed-content": FIXTURE_TOOL,
    "tools-call-error": FIXTURE_TOOL,
    "tools-call-with-logging": f"{FIXTURE_TOOL}; logging: {NO_PUSH}",
    "tools-call-with-progress": f"{FIXTURE_TOOL}; progress: {NO_PUSH}",
    "tools-call-sampling": f"{FIXTURE_TOOL}; sampling: {NO_PUSH}",
    "tools-call-elicitation": f"{FIXTURE_TOOL}; elicitation: {NO_PUSH}",
    "elicitation-sep1034-defaults": f"{FIXTURE_TOOL}; elicitation: {NO_PUSH}",
    "elicitation-sep1330-enums": f"{FIXTURE_TOOL}; elicitation: {NO_PUSH}",
    "json-schema-2020-12": f"{FIXTURE_TOOL} (json_schema_2020_12_tool); pending in the suite",
    "server-sse-polling": "needs a session (a stateful server) and a fixture tool; pending in the suite",
    "server-sse-multiple-streams": "needs a session: a stateless server gets a warning and no check",
    "resources-read-text": "reads a fixture resource (test://static-text)",
    "resources-read-binary": "reads a fixture resource (test://static-binary)",
    "resources-templates-read": "reads a fixture template (test://template/{id}/data)",
    "resources-subscribe": f"the optional subscribe capability, not declared: {NO_PUSH}",
    "resources-unsubscribe": f"the optional subscribe capability, not declared: {NO_PUSH}",
    "prompts-get-simple": "gets a fixture prompt (test_simple_prompt)",
    "prompts-get-with-args": "gets a fixture prompt (test_prompt_with_arguments)",
    "prompts-get-embedded-resource": "gets a fixture prompt (test_prompt_with_embedded_resource)",
    "prompts-get-with-image": "gets a fixture prompt (test_prompt_with_image)",
}
# Every scenario connects afresh, and the default 60 requests a minute of the agent's user are
# shared with the modules just before (their copies give it the same id; in production mode one
# Redis counts them all).
ENV = {"BALLET_LIMIT_MCP_REQUESTS_PER_MINUTE": "100000"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the suite colours its report whatever it writes to
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "authorization"}


@pytest.fixture(scope="module")
def suite() -> list[str]:
    """The command of the pinned suite; a missing Node.js or package fails, never skips."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is not installed: the MCP conformance suite runs on it (apt-get install nodejs)")
    manifest = INSTALLED / "package.json"
    if not manifest.exists():
        pytest.fail(f"{PACKAGE} is not installed in .conformance/: run `make conformance`")
    version = json.loads(manifest.read_text())["version"]
    if version != PINNED:
        pytest.fail(
            f".conformance/ holds {PACKAGE} {version}, not the pinned {PINNED}: run `make conformance`"
        )
    return [node, str(INSTALLED / "dist/index.js")]


def _authorizing_proxy(target_port: int, key: str) -> ThreadingHTTPServer:
    """An HTTP proxy on 127.0.0.1 to daphne that adds ``Authorization: Bearer key``."""

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["Authorization"] = f"Bearer {key}"
            daphne = http.client.HTTPConnection("127.0.0.1", target_port, timeout=60)
            try:
                daphne.request(self.command, self.path, body=body, headers=headers)  # its Host, not ours
                answer = daphne.getresponse()
                payload = answer.read()
            finally:
                daphne.close()
            self.send_response_only(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self.forward()

        def do_POST(self) -> None:
            self.forward()

        def do_DELETE(self) -> None:
            self.forward()

        def log_message(self, *args: object) -> None:
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    threading.Thread(target=proxy.serve_forever, name="conformance-proxy", daemon=True).start()
    return proxy


@pytest.fixture(scope="module")
def mcp_url(fake_api: FakeMessagesAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``/mcp`` of a real server, reached through the proxy with a key of the demo's agent."""
    home = tmp_path_factory.mktemp("conformance")
    deployment = Deployment.create(home, fake_api.base_url)  # a copy, as the other modules' servers
    deployment.env |= ENV  # the process's limit: what was migrated and seeded is the same
    server = Server(deployment, log=home / "daphne.log")
    try:
        server.start()
        proxy = _authorizing_proxy(server.port, agent_key(server))
        try:
            yield f"http://127.0.0.1:{proxy.server_address[1]}/mcp"
        finally:
            proxy.shutdown()
            proxy.server_close()
    finally:
        server.stop()
        deployment.drop()


def test_every_scenario_of_the_suite_is_run_or_excluded_with_its_reason(suite):
    listed = subprocess.run(
        [*suite, "list", "--server"], capture_output=True, text=True, timeout=60, check=False
    )

    names = {line.split()[1] for line in listed.stdout.splitlines() if line.startswith("  - ")}
    assert listed.returncode == 0, listed.stderr
    assert names == set(APPLICABLE) | set(EXCLUDED), listed.stdout
    assert not set(APPLICABLE) & set(EXCLUDED)


@pytest.mark.parametrize("scenario", APPLICABLE)
def test_the_server_scenario_passes(suite, mcp_url, scenario, tmp_path: Path):
    run = subprocess.run(
        [*suite, "server", "--url", mcp_url, "--scenario", scenario, "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    output = ANSI.sub("", f"{run.stdout}\n{run.stderr}")
    saved = list(tmp_path.glob("*/checks.json"))
    assert len(saved) == 1, output
    checks = json.loads(saved[0].read_text())
    failed = [f"{c['id']}: {c.get('errorMessage')}" for c in checks if c["status"] == "FAILURE"]
    assert not failed, output
    assert run.returncode == 0, output
    assert any(c["status"] == "SUCCESS" for c in checks), output  # a scenario of warnings checks nothing
