"""Ballet behind the repository's Caddy configuration (``deploy/Caddyfile``), run by the real
``caddy`` binary over TLS with a throwaway certificate, in front of daphnes on production settings
(HTTPS redirects, secure cookies, ``SECURE_PROXY_SSL_HEADER``) started with ``--proxy-headers``:
plain HTTP redirects to https; a sign-in through the login form passes CSRF and the failed-login
limit counts the client's address, not one it claims; a chat runs over wss with a second socket
watching; a long-poll of the events feed is answered by a claim made during its wait; an event
stream gives its first event while it stays open; the proxy probes every daphne's ``/healthz``.

In production mode (PostgreSQL, Redis) the proxy balances two daphnes, with no stickiness: the
two sockets of the chat land on different daphnes, and one daphne stopped leaves the site
serving. The embedded mode's in-memory channel layer reaches no other process, so there one
daphne stands behind the proxy.
"""

from __future__ import annotations

import datetime
import http.client
import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from websockets.sync.client import ClientConnection, connect

from tests.e2e.conftest import Script, agent_key
from tests.fakes.messages_api import FakeMessagesAPI, TextReply
from tests.fakes.servers import PASSWORD, ROOT, Deployment, Server, free_port, production_mode

pytestmark = pytest.mark.e2e

CADDYFILE = ROOT / "deploy" / "Caddyfile"
HOST = "localhost"  # the site's name, as BALLET_HOST (one of the deployment's DJANGO_ALLOWED_HOSTS)
SPOOFED = "203.0.113.9"  # an address a client claims in its own X-Forwarded-For
DEMO = "/api/v1/projects/DEMO/"
# The settings the README runs in production; they refuse to start without a secret key.
PRODUCTION = {"DJANGO_SETTINGS_MODULE": "ballet.settings.production"} | (
    {} if os.environ.get("DJANGO_SECRET_KEY") else {"DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
)


@dataclass
class Proxied:
    deployment: Deployment
    daphnes: list[Server]
    https_port: int
    http_port: int
    context: ssl.SSLContext  # trusts the throwaway certificate only
    caddy: subprocess.Popen[bytes]
    log: Path

    @property
    def origin(self) -> str:
        return f"https://{HOST}:{self.https_port}"

    def request(
        self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One request through the proxy over https; a redirect is an answer, not followed."""
        connection = http.client.HTTPSConnection(HOST, self.https_port, context=self.context, timeout=70)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, response.headers, response.read()
        finally:
            connection.close()

    def api(self, method: str, path: str, key: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        data = None if body is None else json.dumps(body).encode()
        status, _, answer = self.request(method, path, body=data, headers=headers)
        return status, json.loads(answer or b"null")


def throwaway_certificate(home: Path) -> tuple[Path, Path, ssl.SSLContext]:
    """A certificate for ``localhost`` signed by a CA made here, its key, and a client context that
    trusts that CA only."""
    now = datetime.datetime.now(datetime.UTC)

    def issued(subject: str, key: Any, issuer: x509.Name, signer: Any, *, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False
            )
        )
        if ca:
            usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
            builder = builder.add_extension(usage, critical=True)
        else:
            names = [x509.DNSName(HOST)]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Ballet proxy test CA")])
    ca = issued("Ballet proxy test CA", ca_key, ca_name, ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = issued(HOST, key, ca_name, ca_key, ca=False)
    cert_path, key_path, ca_path = home / "site.pem", home / "site.key", home / "ca.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path, ssl.create_default_context(cafile=str(ca_path))


def start_caddy(
    home: Path, daphnes: list[Server], cert: Path, key: Path
) -> tuple[subprocess.Popen[bytes], int, int]:
    caddy = shutil.which("caddy")
    assert caddy, "the proxy test runs Debian's caddy: apt-get install caddy (make caddy does)"
    https_port, http_port = free_port(), free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        # Caddy keeps its state (certificates it made, autosave.json) under these: the test's own.
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "BALLET_HOST": HOST,
        "BALLET_UPSTREAMS": " ".join(f"127.0.0.1:{daphne.port}" for daphne in daphnes),
        "BALLET_TLS_CERT": str(cert),
        "BALLET_TLS_KEY": str(key),
        "BALLET_HTTPS_PORT": str(https_port),
        "BALLET_HTTP_PORT": str(http_port),
        "BALLET_PROXY_ADMIN": "off",
    }
    with open(home / "caddy.log", "wb") as log:
        process = subprocess.Popen(
            [caddy, "run", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return process, https_port, http_port


@pytest.fixture(scope="module")
def proxied(fake_api: FakeMessagesAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    home = tmp_path_factory.mktemp("proxy")
    deployment = Deployment.create(home, fake_api.base_url, extra_env=PRODUCTION)
    count = 2 if production_mode() else 1
    daphnes = [
        Server(deployment, log=home / f"daphne-{n}.log", proxy_headers=True) for n in range(1, count + 1)
    ]
    caddy = None
    try:
        for daphne in daphnes:
            daphne.start(wait=False)
        for daphne in daphnes:
            daphne.wait_ready()
        cert, key, context = throwaway_certificate(home)
        caddy, https_port, http_port = start_caddy(home, daphnes, cert, key)
        proxied = Proxied(deployment, daphnes, https_port, http_port, context, caddy, home / "caddy.log")
        wait_served(proxied)
        yield proxied
    finally:
        if caddy is not None:
            caddy.terminate()  # within its grace period (deploy/Caddyfile)
            try:
                caddy.wait(timeout=20)
            except subprocess.TimeoutExpired:
                caddy.kill()
                caddy.wait(timeout=10)
        for daphne in daphnes:
            daphne.stop()
        deployment.drop()


def wait_served(proxied: Proxied, timeout: float = 30) -> None:
    """Until the proxy answers /healthz from a daphne over https."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        assert proxied.caddy.poll() is None, f"caddy exited:\n{proxied.log.read_text(errors='replace')}"
        try:
            status, _, body = proxied.request("GET", "/healthz")
            if status == 200:
                return
            last = f"{status} {body[:200]!r}"
        except OSError as error:
            last = str(error)
        time.sleep(0.2)
    raise AssertionError(f"the proxy did not serve within {timeout} s ({last}):\n{proxied.log.read_text()}")


def cookies(headers: http.client.HTTPMessage) -> dict[str, str]:
    return dict(cookie.split(";", 1)[0].split("=", 1) for cookie in headers.get_all("Set-Cookie") or [])


def cookie_header(jar: dict[str, str]) -> str:
    return "; ".join(f"{name}={value}" for name, value in jar.items())


def sign_in(
    proxied: Proxied, username: str, password: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str]]:
    """The login form, as a browser sends it over https: the status of the POST and the cookies."""
    status, answer, page = proxied.request("GET", "/accounts/login/")
    assert status == 200, page[:300]
    jar = cookies(answer)
    assert "Secure" in (answer.get("Set-Cookie") or ""), answer.get_all("Set-Cookie")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.decode())
    assert token
    form = {"csrfmiddlewaretoken": token.group(1), "username": username, "password": password}
    status, answer, _ = proxied.request(
        "POST",
        "/accounts/login/",
        body=urllib.parse.urlencode(form).encode(),
        headers={
            "Cookie": cookie_header(jar),
            "Origin": proxied.origin,
            "Content-Type": "application/x-www-form-urlencoded",
            **(headers or {}),
        },
    )
    return status, jar | cookies(answer)


def test_plain_http_is_redirected_to_https(proxied: Proxied):
    connection = http.client.HTTPConnection(HOST, proxied.http_port, timeout=10)
    connection.request("GET", "/accounts/login/?next=/")
    response = connection.getresponse()
    assert response.status in (301, 308)
    # Caddy names the https port only in a site address that has one: a real site is on 443.
    target = urllib.parse.urlsplit(response.headers["Location"])
    assert (target.scheme, target.hostname, target.path, target.query) == (
        "https",
        HOST,
        "/accounts/login/",
        "next=/",
    )
    connection.close()


def test_a_sign_in_passes_over_https_and_a_forged_address_is_not_believed(proxied: Proxied):
    status, session = sign_in(proxied, "demo", PASSWORD)
    assert status == 302, "the login form refused: X-Forwarded-Proto or the Host did not reach Django"
    status, headers, home = proxied.request("GET", "/", headers={"Cookie": cookie_header(session)})
    assert status == 200
    assert "DEMO" in home.decode()
    assert "max-age=31536000" in headers["Strict-Transport-Security"]
    # A failed login counts against the address the proxy saw, whatever the client claims.
    status, _ = sign_in(proxied, "nobody-here", "wrong", headers={"X-Forwarded-For": SPOOFED})
    assert status == 200  # the form again, with its error
    counted = proxied.deployment.manage(
        "shell",
        "-c",
        "from axes.models import AccessAttempt; "
        "tried = AccessAttempt.objects.filter(username='nobody-here'); "
        "print(sorted(tried.values_list('ip_address', flat=True)))",
    )
    assert counted.strip().splitlines()[-1] in ("['127.0.0.1']", "['::1']"), counted


def test_a_chat_runs_over_wss_with_a_second_socket_watching(proxied: Proxied, script: Script):
    status, session = sign_in(proxied, "demo", PASSWORD)
    assert status == 302
    reply = "Heard through the proxy, every word."
    keyword = script.on(
        "proxied-chat", TextReply(reply, chunks=["Heard ", "through the proxy, ", "every word."])
    )
    status, _, created = proxied.request(
        "POST",
        "/api/v1/planner/sessions/",
        body=json.dumps({"project": "DEMO"}).encode(),
        headers={
            "Cookie": cookie_header(session),
            "X-CSRFToken": session["csrftoken"],
            "Origin": proxied.origin,
            "Content-Type": "application/json",
        },
    )
    assert status == 201, created
    url = f"wss://{HOST}:{proxied.https_port}/ws/planner/sessions/{json.loads(created)['id']}/"
    before = [daphne.log_tail(100_000).count('"WSCONNECT ') for daphne in proxied.daphnes]
    headers = {"Cookie": cookie_header(session), "Origin": proxied.origin}

    def socket() -> ClientConnection:
        return connect(url, ssl=proxied.context, additional_headers=headers, open_timeout=10)

    with socket() as talking, socket() as watching:
        for opened in (talking, watching):
            assert json.loads(opened.recv(timeout=10))["type"] == "state"
        talking.send(json.dumps({"type": "message", "text": f"Say hello ({keyword})"}))
        heard = {
            name: frames_until_ended(opened)
            for name, opened in (("talking", talking), ("watching", watching))
        }
    for name, frames in heard.items():
        assert "".join(f["text"] for f in frames if f["type"] == "text_delta") == reply, (name, frames)
        assert frames[-1]["reason"] == "completed", (name, frames[-1])
    after = [daphne.log_tail(100_000).count('"WSCONNECT ') for daphne in proxied.daphnes]
    # No stickiness: one socket on each daphne; the watcher's frames crossed through Redis.
    expected = [1, 1] if len(proxied.daphnes) == 2 else [2]
    assert [b - a for a, b in zip(before, after, strict=True)] == expected, (before, after)


def frames_until_ended(socket: ClientConnection, timeout: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    frames: list[dict[str, Any]] = []
    while not frames or frames[-1]["type"] != "turn_ended":
        left = deadline - time.monotonic()
        assert left > 0, f"no turn_ended within {timeout} s: {frames[-5:]}"
        frames.append(json.loads(socket.recv(timeout=left)))
    return frames


def claim_one(proxied: Proxied, key: str) -> str:
    """Claim a runnable item of DEMO through the proxy: an event ``claim.taken``."""
    status, runnable = proxied.api("GET", f"{DEMO}runnable/", key)
    assert status == 200, runnable
    ticket: str = (runnable["results"] if isinstance(runnable, dict) else runnable)[0]["key"]
    status, claim = proxied.api("POST", f"{DEMO}items/{ticket}/claim/", key)
    assert status == 201, claim
    return ticket


def test_a_long_poll_waits_through_the_proxy_and_an_event_answers_it(proxied: Proxied):
    key = agent_key(proxied.daphnes[0])
    status, head = proxied.api("GET", f"{DEMO}events/?after=now", key)
    assert status == 200, head
    heard: dict[str, Any] = {}

    def wait() -> None:
        started = time.monotonic()
        heard["answer"] = proxied.api(
            "GET", f"{DEMO}events/?after={head['next']}&types=claim.taken&wait=45", key
        )
        heard["seconds"] = time.monotonic() - started

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(2.0)  # longer than a proxy that buffers or times out quickly would hold it
    assert "answer" not in heard, heard
    ticket = claim_one(proxied, key)
    waiter.join(50)
    status, body = heard["answer"]
    assert status == 200, body
    assert [(e["type"], e["target"]) for e in body["events"]] == [("claim.taken", ticket)]
    assert heard["seconds"] < 30, "answered when the wait ran out, not by the claim"


def test_an_event_stream_gives_its_first_event_while_it_stays_open(proxied: Proxied):
    key = agent_key(proxied.daphnes[0])
    connection = http.client.HTTPSConnection(HOST, proxied.https_port, context=proxied.context, timeout=30)
    try:
        connection.request(
            "GET",
            f"{DEMO}events/stream/?after=now&types=claim.taken",
            headers={"Authorization": f"Bearer {key}"},
        )
        response = connection.getresponse()
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        time.sleep(0.5)  # the stream is open on its daphne before the event is made
        ticket = claim_one(proxied, key)
        fields: dict[str, str] = {}
        while True:  # comments (": ...") and fields until the blank line that ends the event
            line = response.readline().decode().rstrip("\n")
            if not line and "event" in fields:
                break
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.strip()
    finally:
        connection.close()
    assert fields["event"] == "claim.taken"
    assert json.loads(fields["data"])["target"] == ticket


def test_the_proxy_probes_every_daphne_on_healthz(proxied: Proxied):
    """Every 5 s, with the site's Host; each daphne answers 200 (its access log says so)."""

    def probes() -> list[int]:
        return [daphne.log_tail(100_000).count('"GET /healthz" 200') for daphne in proxied.daphnes]

    before = probes()
    deadline = time.monotonic() + 15
    while not all(now > then for now, then in zip(probes(), before, strict=True)):
        assert time.monotonic() < deadline, f"no probe of every daphne within 15 s: {before} {probes()}"
        time.sleep(0.5)


@pytest.mark.skipif(not production_mode(), reason="the embedded mode runs one daphne behind the proxy")
def test_the_site_serves_while_one_daphne_is_down(proxied: Proxied):
    down, up = proxied.daphnes
    down.stop()
    try:
        answers = [proxied.request("GET", "/api/v1/")[0] for _ in range(6)]
        assert answers == [200] * 6, "a request went to the stopped daphne and was not retried on the other"
    finally:
        down.start()
    # Back in rotation: within a health check or two the restarted daphne serves again.
    deadline = time.monotonic() + 20
    served_before = down.log_tail(100_000).count('"GET /api/v1/"')
    while down.log_tail(100_000).count('"GET /api/v1/"') == served_before:
        assert time.monotonic() < deadline, "the restarted daphne did not come back into rotation"
        assert proxied.request("GET", "/api/v1/")[0] == 200
        time.sleep(0.2)
    assert up.running
