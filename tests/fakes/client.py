"""A small HTTP and WebSocket client for tests against real server processes."""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect


class Client:
    """Logged in as one user: a token for REST, a session cookie for the WebSocket."""

    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base_url = base_url
        self.token = self._post_json("/api/v1/auth/token/", {"username": username, "password": password})[
            "token"
        ]
        self.cookie = _session_cookie(base_url, username, password)

    def _post_json(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **(headers or {})},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._post_json(path, body or {}, {"Authorization": f"Token {self.token}"})

    def get(self, path: str) -> Any:
        request = urllib.request.Request(
            self.base_url + path, headers={"Authorization": f"Token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def websocket(self, session_id: str, base_url: str | None = None) -> Any:
        base = base_url or self.base_url
        url = base.replace("http://", "ws://") + f"/ws/planner/sessions/{session_id}/"
        return connect(url, additional_headers={"Cookie": self.cookie, "Origin": base}, open_timeout=10)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """One REST call that answers ``(status, parsed body)`` instead of raising on an HTTP error."""
        return rest_call(self.base_url, f"Token {self.token}", method, path, body)

    def transcript(self, session_id: str) -> dict[str, Any]:
        body: dict[str, Any] = self.get(f"/api/v1/planner/sessions/{session_id}")
        return body

    def wait_for(
        self, session_id: str, done: Callable[[dict[str, Any]], bool], timeout: float = 30
    ) -> dict[str, Any]:
        """Poll the transcript until ``done`` holds (bounded)."""
        deadline = time.monotonic() + timeout
        body = self.transcript(session_id)
        while not done(body):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out; last transcript state {body['state']}: {body['events'][-3:]}"
                )
            time.sleep(0.2)
            body = self.transcript(session_id)
        return body


def rest_call(
    base_url: str, authorization: str, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, Any]:
    """One REST call with ``authorization`` (``Bearer KEY``, ``Token TOKEN``): ``(status, parsed
    body)``, an HTTP error included."""
    request = urllib.request.Request(
        base_url + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": authorization},
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, _json_or_text(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, _json_or_text(refused.read())


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return raw.decode(errors="replace")[:500]


def _session_cookie(base_url: str, username: str, password: str) -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(base_url + "/accounts/login/", timeout=10).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token, "no CSRF token on the login page"
    form = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": token.group(1), "username": username, "password": password}
    ).encode()
    opener.open(
        urllib.request.Request(base_url + "/accounts/login/", data=form, headers={"Referer": base_url + "/"}),
        timeout=10,
    )
    session = next((c.value for c in jar if c.name == "sessionid"), None)
    assert session, "login failed"
    return f"sessionid={session}"


FRAME_WAIT_SECONDS = 30


async def frames_until(ws: ClientConnection, kind: str) -> list[dict[str, Any]]:
    """Frames from ``ws`` up to and including the first of type ``kind`` (bounded in time)."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(FRAME_WAIT_SECONDS):
        while True:
            frame = json.loads(await ws.recv())
            seen.append(frame)
            if frame["type"] == kind:
                return seen
