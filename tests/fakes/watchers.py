"""A WebSocket watcher of a planner session, read in a background thread, for tests and benches.

It keeps every frame it received (with the number of the connection that got
it) and every close code, and waits for a condition over them with a bound. With
``reconnect``, it reconnects as the chat page does (``planner/static/planner/chat.js``):
after a close it waits a short backoff, reloads the transcript over REST (``resync``,
which answers the session's state) and opens a new connection. :attr:`Watcher.view` is
the session state the page would show: from ``state`` frames, the transcript it
reloaded, ``turn_started`` / ``user_message`` (running) and ``turn_ended`` (idle, or
paused after ``max_rounds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

Frame = dict[str, Any]
OPEN_TIMEOUT = 10.0
MAX_BACKOFF = 4.0


@dataclass(frozen=True)
class Received:
    connection: int  # 1 for the first connection, 2 after the first reconnect, ...
    frame: Frame


def view_after(view: str | None, frame: Frame) -> str | None:
    """The session state a chat page shows after ``frame``."""
    kind = frame.get("type")
    if kind == "state":
        return str(frame["state"])
    if kind in ("turn_started", "user_message"):
        return "running"
    if kind == "turn_ended":
        return "paused" if frame.get("reason") == "max_rounds" else "idle"
    return view


class Watcher:
    """One watcher of ``session_id`` on the daphne at ``base_url``; see the module docstring."""

    def __init__(
        self,
        base_url: str,
        session_id: str,
        cookie: str,
        *,
        reconnect: bool = False,
        resync: Callable[[], str] | None = None,
        name: str = "",
        seed: int | None = None,
    ) -> None:
        self.base_url = base_url
        self.url = base_url.replace("http://", "ws://") + f"/ws/planner/sessions/{session_id}/"
        self.cookie = cookie
        self.reconnect = reconnect
        self.resync = resync
        self.name = name or self.url
        self.received: list[Received] = []
        self.closes: list[int | None] = []  # per connection that ended: its close code (1006: no close frame)
        self.connect_failures = 0
        self.connections = 0
        self.view: str | None = None
        self.open = False
        self._random = random.Random(seed)
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run_thread, name=f"watcher {self.name}", daemon=True)

    # -- the test's side ----------------------------------------------------------------------------

    def start(self, *, wait_open: bool = True) -> Watcher:
        """Start watching; with ``wait_open``, return once the first frame (``state``) arrived."""
        self._thread.start()
        self._started.wait()
        if wait_open:
            self.wait_for(lambda w: bool(w.received or w.closes or w.connect_failures), 15, "a first frame")
            assert self.received, f"{self.name}: no first frame: closes {self.closes}, failed to connect?"
        return self

    @property
    def frames(self) -> list[Frame]:
        with self._changed:
            return [r.frame for r in self.received]

    def frames_of(self, connection: int) -> list[Frame]:
        with self._changed:
            return [r.frame for r in self.received if r.connection == connection]

    def wait_for(self, condition: Callable[[Watcher], bool], timeout: float, what: str = "") -> Watcher:
        """Wait until ``condition(self)`` holds; AssertionError naming ``what`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not condition(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{self.name}: {what or 'the condition'} did not happen within {timeout:.0f} s; "
                        f"open={self.open} closes={self.closes} last frames={self._summary()}"
                    )
                self._changed.wait(min(left, 0.5))
        return self

    def frame(
        self, match: Callable[[Frame], bool], timeout: float, what: str = "", *, after: int = 0
    ) -> Frame:
        """The first frame at position ``after`` or later that ``match``es (waiting for it)."""
        found: list[Frame] = []

        def seen(watcher: Watcher) -> bool:
            found[:] = [r.frame for r in watcher.received[after:] if match(r.frame)][:1]
            return bool(found)

        self.wait_for(seen, timeout, what)
        return found[0]

    def wait_closed(self, timeout: float) -> int | None:
        """The close code of the first connection to end, waiting up to ``timeout`` s for it."""
        self.wait_for(lambda w: bool(w.closes), timeout, "a close")
        return self.closes[0]

    def close(self) -> None:
        """Stop watching (closing the connection normally) and join the thread."""
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)
        self._thread.join(timeout=15)

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _summary(self) -> list[str]:
        return [f"{r.connection}:{r.frame.get('type')}" for r in self.received[-8:]]

    # -- the thread's side --------------------------------------------------------------------------

    def _run_thread(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._started.set()
        attempts = 0
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                got_frames = await self._connection()
                if not self.reconnect:
                    return
                attempts = 0 if got_frames else attempts + 1
                delay = min(MAX_BACKOFF, 0.5 * 2**attempts) * (0.75 + self._random.random() * 0.5)
                await asyncio.sleep(delay)
                if self.resync is not None:
                    await self._resync()

    async def _resync(self) -> None:
        """Reload the transcript like the page before it reconnects (a failure: reconnect anyway)."""
        assert self.resync is not None
        try:
            state = await asyncio.to_thread(self.resync)
        except Exception:  # the server is down: the connection attempt fails and backs off again
            return
        self._note(view=state)

    async def _connection(self) -> bool:
        """One connection, until it closes; whether it got any frame."""
        number = self.connections + 1
        try:
            ws = await connect(
                self.url,
                additional_headers={"Cookie": self.cookie, "Origin": self.base_url},
                open_timeout=OPEN_TIMEOUT,
                ping_interval=None,  # a browser answers pings but sends none
                max_size=None,
            )
        except (OSError, TimeoutError, InvalidHandshake, InvalidStatus):
            self._note(failure=True)
            return False
        self.connections = number
        self._note(open=True)
        got = False
        try:
            async for raw in ws:
                got = True
                self._note(frame=Received(number, json.loads(raw)))
        except ConnectionClosed:
            pass
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 5)
            self._note(open=False, close=ws.close_code)
            raise
        self._note(open=False, close=ws.close_code if ws.close_code is not None else 1006)
        return got

    def _note(
        self,
        *,
        frame: Received | None = None,
        open: bool | None = None,
        close: int | None = None,
        failure: bool = False,
        view: str | None = None,
    ) -> None:
        with self._changed:
            if frame is not None:
                self.received.append(frame)
                self.view = view_after(self.view, frame.frame)
            if open is not None:
                self.open = open
                if not open:
                    self.closes.append(close)
            if failure:
                self.connect_failures += 1
            if view is not None:
                self.view = view
            self._changed.notify_all()
