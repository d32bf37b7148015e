"""The waiters of a project's feed, woken together and read for together (docs/events.md#the-feed).

``event_waits.py`` waits one reader at a time: each listens to the hub and, woken, reads the feed
on the database threads, so a hundred waiters woken by one event make a hundred reads one after
the other. Here the waiters of a project in this process share a :class:`ProjectFeed`: one hub
listener and, per wake, ONE read (:func:`feed_read`) on the database threads, with the events
after the oldest waiter's cursor, the access of every waiter (one query) and whether each one's API
key or legacy token still holds. Each waiter then gets what it may see, decided in memory as
``tracker.event_selectors.events_after`` decides it: its types, its limit, and the visibility of each
event (``event_readable``: the project readable, every ``requires`` project readable, ``private_to``
it). A waiter who lost the project (removed, deactivated, its key revoked) is refused at that read.

A waiter joins after its own first read (``feed_read`` for it alone): joining asks the feed for a
read, so that what was committed between that read and the feed's listening is not missed. A
stream that finds a full page catches up alone before it joins: the shared read starts at the
oldest cursor, and one far behind would make every read long. The feed's task runs while it has
waiters, in a context of its own (it outlives the request that started it), and holds no thread.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import logging
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone
from rest_framework.authtoken.models import Token

from planner.ground.bridge import db
from planner.live.event_waits import DEAF_READ_SECONDS, MAX_WAIT_SECONDS, events_topic
from planner.live.hub import hub
from tracker.errors import BalletError, CredentialError, UnavailableError
from tracker.event_selectors import MAX_EVENTS, EventPage, FeedRead, event_readable, events_read_for_all
from tracker.models import ApiKey
from tracker.selectors import project_by_id
from tracker.trust.permissions import (
    TRACKER_READ,
    Principal,
    access_load,
    access_scope,
    key_bind,
    project_ids_with,
    require,
)
from tracker.web.credentials import KEYS_PAGE, LEGACY_TOKEN_GONE, legacy_tokens_retired

logger = logging.getLogger(__name__)

SHARED_ROWS = 500  # a shared read reads at most this many events, of every type
FOREVER = 3600.0  # a feed with no news waits this long between reads (a waiter's join wakes it)
KEY_GONE = f"The API key was revoked or expired; create another at {KEYS_PAGE}."
DATABASE_DOWN = "The events could not be read; try again in a moment."


@dataclass(frozen=True)
class FeedReader:
    """Who waits, as plain data: the user, the projects their key binds them to, the API key (or
    legacy token) to check again at each read, and what they asked for."""

    user_id: int
    bound: frozenset[int] | None = None
    types: tuple[str, ...] = ()
    limit: int = MAX_EVENTS
    key_id: int | None = None  # an API key: still valid at each read
    token: str | None = None  # a legacy token: still there, and not past its sunset


@dataclass(frozen=True)
class FeedAnswer:
    """One reader's share of a read: its page, or why it may read no more; ``more`` when it read
    a full page (more events may follow at once)."""

    page: EventPage | None
    error: BalletError | None = None
    more: bool = False


def feed_read(project_id: int, readers: Sequence[FeedReader], afters: Sequence[int]) -> list[FeedAnswer]:
    """The events after ``afters[i]`` that ``readers[i]`` may read, for all of them in one read:
    the events (once), every reader's access (one query), their keys and tokens (one query each).
    Runs on the database threads."""
    with access_scope():
        try:
            project = project_by_id(project_id)
        except BalletError as exc:
            return [FeedAnswer(None, exc) for _ in readers]
        shared = events_read_for_all(project=project, after=min(afters, default=0), limit=SHARED_ROWS)
        access_load(reader.user_id for reader in readers)  # kept in the scope for every check below
        keys = _keys_valid({r.key_id for r in readers if r.key_id is not None})
        tokens = _tokens_valid({r.token for r in readers if r.token is not None})
        readable: dict[tuple[int, frozenset[int] | None], set[int]] = {}
        answers = []
        for reader, after in zip(readers, afters, strict=True):
            if (reader.key_id is not None and reader.key_id not in keys) or (
                reader.token is not None and reader.token not in tokens
            ):
                message = KEY_GONE if reader.key_id is not None else _token_gone()
                answers.append(FeedAnswer(None, CredentialError(message)))
                continue
            principal = _principal(reader)
            try:
                require(principal, project, TRACKER_READ)
            except BalletError as exc:
                answers.append(FeedAnswer(None, exc))
                continue
            seen = (reader.user_id, reader.bound)
            if seen not in readable:
                readable[seen] = set(project_ids_with(principal, TRACKER_READ))
            answers.append(_answer(shared, reader, after, principal, readable[seen]))
        return answers


def _answer(
    shared: FeedRead, reader: FeedReader, after: int, principal: Principal, readable: set[int]
) -> FeedAnswer:
    """What ``events_after`` would answer ``reader``, from the events read for everyone."""
    limit = max(1, min(reader.limit, MAX_EVENTS))
    rows = [row for row in shared.rows if row.id > after and (not reader.types or row.type in reader.types)]
    rows = rows[:limit]
    visible = [row.json for row in rows if event_readable(row, user=principal, readable=readable)]
    last = rows[-1].id if rows else after
    if len(rows) < limit:  # read through what the shared read covers: on from there
        last = max(last, shared.through)
    return FeedAnswer(EventPage(visible, last), more=len(rows) == limit or last < shared.through)


def _principal(reader: FeedReader) -> Principal:
    """The reader as the permission check takes them: their id, or a user bound by their key (its
    activity and roles are read from the database all the same)."""
    if reader.bound is None:
        return reader.user_id
    return key_bind(User(pk=reader.user_id, is_active=True), reader.bound)


def _keys_valid(key_ids: set[int]) -> set[int]:
    if not key_ids:
        return set()
    live = ApiKey.objects.filter(pk__in=key_ids, revoked_at__isnull=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )
    return set(live.values_list("pk", flat=True))


def _tokens_valid(tokens: set[str]) -> set[str]:
    if not tokens or legacy_tokens_retired():
        return set()
    return set(Token.objects.filter(key__in=tokens).values_list("key", flat=True))


def _token_gone() -> str:
    return LEGACY_TOKEN_GONE if legacy_tokens_retired() else "Invalid token."


class Watch:
    """One waiter in its project's feed: where it reads on from, and what the feed handed it."""

    def __init__(self, reader: FeedReader, after: int, *, stays: bool) -> None:
        self.reader = reader
        self.cursor = after
        self.stays = stays  # a stream: it stays after it got events
        self.answers: collections.deque[EventPage | BalletError] = collections.deque()
        self._woken: asyncio.Future[None] | None = None

    def hand(self, answer: FeedAnswer) -> bool:
        """The feed read for this waiter; whether it keeps waiting in the feed."""
        if answer.error is not None:
            self._keep(answer.error)
            return False
        assert answer.page is not None
        self.cursor = answer.page.next
        if answer.page.events:
            self._keep(answer.page)
            return self.stays
        return True

    def _keep(self, answer: EventPage | BalletError) -> None:
        self.answers.append(answer)
        if self._woken is not None and not self._woken.done():
            self._woken.set_result(None)

    async def next(self, seconds: float) -> EventPage | BalletError | None:
        """The next page or refusal the feed handed it, or None after ``seconds`` without any."""
        if not self.answers:
            self._woken = asyncio.get_running_loop().create_future()
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._woken, timeout=max(0.0, seconds))
            finally:
                self._woken = None
        return self.answers.popleft() if self.answers else None


class ProjectFeed:
    """The waiters of one project here, read for together by one task on the event loop."""

    def __init__(self, project_id: int) -> None:
        self.project_id = project_id
        self.loop = asyncio.get_running_loop()
        self.watches: set[Watch] = set()
        self._heard: asyncio.Event | None = None  # the listener's: set to read again now
        self._waiting = False  # between reads, waiting for news
        self.task = self.loop.create_task(
            self._run(), name=f"events-feed-{project_id}", context=contextvars.Context()
        )

    def join(self, watch: Watch) -> None:
        self.watches.add(watch)
        self.poke()

    def leave(self, watch: Watch) -> None:
        self.watches.discard(watch)
        if not self.watches:
            self.poke()  # to end the task

    @property
    def idle(self) -> bool:
        """Read for every waiter, and waiting for news with none heard yet."""
        return self._waiting and self._heard is not None and not self._heard.is_set()

    def poke(self) -> None:
        """Read again soon: a waiter joined, or wants its access checked (a stream kept alive)."""
        if self._heard is not None:
            self._heard.set()

    async def _run(self) -> None:
        try:
            async with hub.listening(events_topic(self.project_id)) as listener:
                self._heard = listener.heard
                while self.watches:
                    more = await self._read()
                    if not self.watches:
                        break
                    if not more:
                        self._waiting = True
                        try:
                            await listener.heard_within(FOREVER, deaf_every=DEAF_READ_SECONDS)
                        finally:
                            self._waiting = False
                    else:
                        listener.heard.clear()
                self._retire()  # no waiter left: a waiter from now on starts another feed
        finally:
            self._retire()
            for watch in self.watches:  # the server stops, or the task failed
                watch.hand(FeedAnswer(None, UnavailableError(DATABASE_DOWN)))
            self.watches.clear()

    async def _read(self) -> bool:
        """One read for every waiter; whether some read a full page (read again at once)."""
        watches = list(self.watches)
        readers, afters = [w.reader for w in watches], [w.cursor for w in watches]
        try:
            answers = await db(feed_read)(self.project_id, readers, afters)
        except Exception:  # the database is down: every waiter is told, none waits on
            logger.warning("the events of project %s could not be read", self.project_id, exc_info=True)
            answers = [FeedAnswer(None, UnavailableError(DATABASE_DOWN)) for _ in watches]
        more = False
        for watch, answer in zip(watches, answers, strict=True):
            if watch not in self.watches:
                continue  # it left during the read
            if watch.hand(answer):
                more = more or answer.more
            else:
                self.watches.discard(watch)
        return more

    def _retire(self) -> None:
        if _feeds.get(self.project_id) is self:
            del _feeds[self.project_id]


_feeds: dict[int, ProjectFeed] = {}


def _feed(project_id: int) -> ProjectFeed:
    feed = _feeds.get(project_id)
    if feed is None or feed.task.done() or feed.loop is not asyncio.get_running_loop():
        feed = _feeds[project_id] = ProjectFeed(project_id)
    return feed


@contextlib.contextmanager
def _watching(project_id: int, watch: Watch) -> Iterator[ProjectFeed]:
    feed = _feed(project_id)
    feed.join(watch)
    try:
        yield feed
    finally:
        feed.leave(watch)


async def feed_wait(*, project_id: int, reader: FeedReader, after: int, seconds: float) -> EventPage:
    """The events after ``after`` that ``reader`` may read, as soon as there are some, or none
    once ``seconds`` (at most 60) have passed; raises what the reader's access check raises. The
    caller read once already and found none: the wait starts with a read of the feed all the same."""
    seconds = max(0.0, min(float(seconds), MAX_WAIT_SECONDS))
    deadline = asyncio.get_running_loop().time() + seconds
    watch = Watch(reader, after, stays=False)
    with _watching(project_id, watch):
        answer = await watch.next(seconds)
        while answer is None and (left := deadline - asyncio.get_running_loop().time()) > 0:
            answer = await watch.next(left)
    if isinstance(answer, BalletError):
        raise answer
    return answer if answer is not None else EventPage([], watch.cursor)


async def feed_follow(
    *, project_id: int, reader: FeedReader, after: int, idle_seconds: float, caught_up: bool = False
) -> AsyncGenerator[EventPage, None]:
    """Every page of events after ``after`` that ``reader`` may read, for as long as the caller
    iterates (a stream), and an empty page whenever ``idle_seconds`` pass without any, for the
    caller to keep its connection alive; each such pause has the reader's access checked again, so
    a reader who lost the project is refused (raised) at the next event or within ``idle_seconds``.
    It catches up alone (full pages read for it only) before it waits with the others; ``caught_up``:
    the caller's own read of ``after`` found no full page."""
    while not caught_up:
        [answer] = await db(feed_read)(project_id, [reader], [after])
        if answer.error is not None:
            raise answer.error
        assert answer.page is not None
        after = answer.page.next
        if answer.page.events:
            yield answer.page
        caught_up = not answer.more
    watch = Watch(reader, after, stays=True)
    with _watching(project_id, watch) as feed:
        while True:
            found = await watch.next(idle_seconds)
            if isinstance(found, BalletError):
                raise found
            if found is None:
                feed.poke()  # the reader's access, checked again at that read
                found = EventPage([], watch.cursor)
            yield found
