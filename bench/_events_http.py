"""The HTTP side of ``bench/events.py``: a bare HTTP/1.1 client on asyncio streams, the feed's long
polls (docs/events.md#the-feed) and idle Server-Sent Events streams.

A bare client, not an HTTP library: a hundred waiters and a thousand streams cost the benchmark's
one event loop little, so the times it stamps are the server's. A :class:`Connection` keeps its
socket between requests (keep-alive) and has one request on its way at a time.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

FEED = "/api/v1/projects/DEMO/events/"
STREAM = "/api/v1/projects/DEMO/events/stream/"
ANSWER_SECONDS = 70.0  # a wait is at most 60 s: anything longer is a lost answer
T = TypeVar("T")


class Connection:
    """One keep-alive HTTP/1.1 connection to the server, authenticated by an API token."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, auth: str
    ) -> None:
        self.reader, self.writer, self.host, self.auth = reader, writer, host, auth

    @classmethod
    async def open(cls, base_url: str, auth: str) -> Connection:
        parts = urlsplit(base_url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        return cls(reader, writer, parts.netloc, auth)

    def send(self, method: str, path: str, body: Any = None, accept: str = "application/json") -> None:
        data = json.dumps(body).encode() if body is not None else b""
        head = [
            f"{method} {path} HTTP/1.1",
            f"Host: {self.host}",
            f"Authorization: {self.auth}",
            f"Accept: {accept}",
            f"Content-Length: {len(data)}",
        ]
        if body is not None:
            head.append("Content-Type: application/json")
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)

    async def head(self) -> tuple[int, dict[str, str]]:
        """The status and the headers of the answer on its way."""
        lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        return int(lines[0].split()[1]), headers

    async def answer(self) -> tuple[int, bytes]:
        status, headers = await self.head()
        if "content-length" in headers:
            return status, await self.reader.readexactly(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
                body += await self.reader.readexactly(size)
                await self.reader.readexactly(2)
            await self.reader.readuntil(b"\r\n")  # the empty trailer
            return status, body
        return status, await self.reader.read()  # until the server closes it

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        self.send(method, path, body)
        return await self.answer()

    async def json(self, method: str, path: str, body: Any = None) -> Any:
        status, data = await self.request(method, path, body)
        if status >= 300:
            raise RuntimeError(f"{method} {path} answered {status}: {data[:300]!r}")
        return json.loads(data)

    def close(self) -> None:
        self.writer.close()


async def in_batches(calls: Iterable[Callable[[], Awaitable[T]]], size: int = 50) -> list[T]:
    """Each call's result, ``size`` at a time (the listening socket's backlog is 128)."""
    pending, done = list(calls), []
    for start in range(0, len(pending), size):
        done += await asyncio.gather(*(call() for call in pending[start : start + size]))
    return done


# --- long polls --------------------------------------------------------------------------------


@dataclass
class PollFigures:
    """Milliseconds from each of three moments to each waiter's answer, over every counted round:
    the write's request sent (later than the commit by the write's own work), the event's
    ``created_at`` (its INSERT, just before the commit; the same host's clock) and the write's
    answer read (after the commit, and delayed by the waiters' work in the same process). Then
    the transport's baselines; ``missed``: answers without the round's event; ``early``: answers
    before the write."""

    from_request: list[float] = field(default_factory=list)
    from_event: list[float] = field(default_factory=list)
    from_response: list[float] = field(default_factory=list)
    healthz_meanwhile: list[float] = field(default_factory=list)
    healthz_all: list[float] = field(default_factory=list)
    missed: int = 0
    early: int = 0


@dataclass(frozen=True)
class _Answer:
    at: float  # perf_counter
    wall: float  # time.time()
    status: int
    body: bytes


async def _timed(connection: Connection, path: str) -> _Answer:
    status, body = await connection.request("GET", path)
    return _Answer(time.perf_counter(), time.time(), status, body)


def _comment_created(answer: _Answer, after: int) -> float | None:
    """When the round's comment event was recorded (seconds since 1970), if the answer has it."""
    if answer.status != 200:
        return None
    for event in json.loads(answer.body).get("events", []):
        if event["type"] == "comment.added" and event["id"] > after:
            return datetime.fromisoformat(event["created_at"]).timestamp()
    return None


async def _poll_round(
    figures: PollFigures,
    *,
    waiters: list[Connection],
    writer: Connection,
    probe: Connection,
    item_key: str,
    settle: float,
) -> None:
    head = (await writer.json("GET", f"{FEED}?after=now"))["next"]
    polls = [asyncio.create_task(_timed(waiter, f"{FEED}?after={head}&wait=60")) for waiter in waiters]
    await asyncio.sleep(settle)  # every waiter's first read done: they listen
    figures.early += sum(poll.done() for poll in polls)
    sent = time.perf_counter()
    await writer.json(
        "POST", f"/api/v1/projects/DEMO/items/{item_key}/comments/", {"body": "Bench: an event"}
    )
    answered = time.perf_counter()
    probed = asyncio.create_task(_timed(probe, "/healthz"))  # the transport, at the same moment
    results = await asyncio.wait_for(asyncio.gather(*polls), ANSWER_SECONDS)
    figures.healthz_meanwhile.append(((await probed).at - answered) * 1000)
    for result in results:
        created = _comment_created(result, head)
        if created is None:
            figures.missed += 1
            continue
        figures.from_request.append((result.at - sent) * 1000)
        figures.from_event.append((result.wall - created) * 1000)
        figures.from_response.append((result.at - answered) * 1000)
    started = time.perf_counter()
    healthz = await asyncio.gather(*(_timed(waiter, "/healthz") for waiter in waiters))
    figures.healthz_all += [(answer.at - started) * 1000 for answer in healthz]


async def poll_rounds(
    base_url: str, auth: str, *, item_key: str, waiters: int, rounds: int, settle: float
) -> PollFigures:
    """``rounds`` rounds (after one not counted) of ``waiters`` long polls answered by one comment."""
    opened = await in_batches([lambda: Connection.open(base_url, auth)] * (waiters + 2))
    round_setup: dict[str, Any] = {
        "writer": opened[0],
        "probe": opened[1],
        "waiters": opened[2:],
        "item_key": item_key,
        "settle": settle,
    }
    try:
        # The first round wakes every code path up.
        await _poll_round(PollFigures(), **round_setup)
        figures = PollFigures()
        for _ in range(rounds):
            await _poll_round(figures, **round_setup)
    finally:
        for connection in opened:
            connection.close()
    return figures


# --- idle streams ------------------------------------------------------------------------------


async def stream_status(base_url: str, auth: str, accept: str) -> int:
    """The status a stream's request with this ``Accept`` header is answered."""
    connection = await Connection.open(base_url, auth)
    try:
        connection.send("GET", f"{STREAM}?after=now", accept=accept)
        return (await connection.head())[0]
    finally:
        connection.close()


async def stream_open(base_url: str, auth: str) -> Connection:
    """An SSE stream of DEMO's events, once the server has sent its first line (``retry:``).
    ``Accept: */*``, as curl sends it (see :func:`stream_status`)."""
    connection = await Connection.open(base_url, auth)
    connection.send("GET", f"{STREAM}?after=now", accept="*/*")
    status, _ = await connection.head()
    if status != 200:
        connection.close()
        raise RuntimeError(f"the event stream answered {status}")
    first = await connection.reader.readuntil(b"\n\n")
    if b"retry:" not in first:
        raise RuntimeError(f"the event stream began with {first[:100]!r}")
    return connection


async def streams_open(base_url: str, auth: str, count: int) -> list[Connection]:
    return await in_batches([lambda: stream_open(base_url, auth)] * count)


async def streams_fan_out(
    streams: list[Connection], writer: Connection, item_key: str
) -> tuple[list[float], int]:
    """One comment, and how long after its write's answer each stream had it (ms); how many had
    it not within ``ANSWER_SECONDS``."""

    async def heard(stream: Connection) -> float | None:
        try:
            await asyncio.wait_for(stream.reader.readuntil(b"event: comment.added\n"), ANSWER_SECONDS)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return None
        return time.perf_counter()

    listening = [asyncio.create_task(heard(stream)) for stream in streams]
    await writer.json("POST", f"/api/v1/projects/DEMO/items/{item_key}/comments/", {"body": "Bench: fan-out"})
    answered = time.perf_counter()
    stamps = await asyncio.gather(*listening)
    times = [(at - answered) * 1000 for at in stamps if at is not None]
    return times, sum(at is None for at in stamps)
