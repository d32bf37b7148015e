"""The turns running in this process: one registry, and what each turn keeps while it runs.

A turn is an asyncio task of the process that started it. While it runs, its
:class:`LiveTurn` holds the frames it sent so far (for watchers who arrive
late), its outbox to other processes, and the loop that a ``stop`` reaches.
The hub's :class:`LiveTurns` is the only record of which sessions run here:
the hub beats for them and answers liveness from it for this process, and
``stop``, ``watch`` and ``replay`` find the turn there.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from planner.agent import frames
from planner.agent.frames import Frame

if TYPE_CHECKING:  # a turn's loop and outbox are made by others; the registry only holds them
    from planner.agent.loop import TurnLoop


class FramesOut(Protocol):
    """Where a turn's frames go beyond this process's watchers (``planner/live/outbox.py``)."""

    def put(self, frame: Frame) -> None: ...

    def watched(self) -> None: ...

    async def close(self) -> None: ...


@dataclass(eq=False)
class LiveTurn:
    """A turn running in this process, and the frames it sent so far."""

    session_id: uuid.UUID
    turn: int
    outbox: FramesOut
    user_id: int | None = None  # the session's owner: the one who may stop it
    loop: TurnLoop | None = None
    task: asyncio.Task[None] | None = None
    frames: list[Frame] = field(default_factory=list)
    stop_requested: bool = False
    # Whether steering or change notes may wait for the next model call: the turn starts with
    # them delivered (``services.session_begin``), each save says, and a message steering the
    # turn from this process sets it.
    inputs_waiting: bool = False
    steering_waiting: bool = False  # of those, steering: a completed answer does not end the turn

    def steered(self) -> None:
        """A human's message waits for the turn's next model call."""
        self.inputs_waiting = self.steering_waiting = True

    def stop(self) -> None:
        """Stop the turn, also if its loop is still being set up."""
        self.stop_requested = True
        if self.loop is not None:
            self.loop.stop()

    def remember(self, frame: Frame) -> None:
        """Keep ``frame`` for watchers who come later, a run of text deltas as one."""
        frames.add_coalesced(self.frames, frame)


class LiveTurns:
    """The sessions whose turn runs in this process.

    A sender *claims* the session before its row says this process owns a turn
    (so that nobody takes the new turn for dead in between) and releases the
    claim once the turn is registered or the message steered another turn.
    Claims are counted: two messages sent here at once to one session each
    hold their own.
    """

    def __init__(self) -> None:
        self._live: dict[uuid.UUID, LiveTurn] = {}
        self._claims: Counter[uuid.UUID] = Counter()
        # Stops that came while a turn of the session was being started here: it starts stopped.
        self._stops: set[uuid.UUID] = set()

    def claim(self, session_id: uuid.UUID) -> None:
        self._claims[session_id] += 1

    def release(self, session_id: uuid.UUID) -> None:
        self._claims[session_id] -= 1
        if self._claims[session_id] <= 0:
            del self._claims[session_id]
            self._stops.discard(session_id)  # no turn started here: nothing to stop

    def start(self, live: LiveTurn) -> None:
        self._live[live.session_id] = live
        if live.session_id in self._stops:
            self._stops.discard(live.session_id)
            live.stop()

    def stop(self, session_id: uuid.UUID) -> bool:
        """Stop the session's turn running here, or the one being started here as soon as it is
        registered (a stop that races an approval resuming the turn); False if none is here."""
        live = self._live.get(session_id)
        if live is not None:
            live.stop()
            return True
        if session_id in self._claims:
            self._stops.add(session_id)
            return True
        return False

    def end(self, live: LiveTurn) -> None:
        if self._live.get(live.session_id) is live:
            del self._live[live.session_id]

    def get(self, session_id: uuid.UUID) -> LiveTurn | None:
        return self._live.get(session_id)

    def runs(self, session_id: uuid.UUID) -> bool:
        """Does the session's turn run here (or is one being started here)?"""
        return session_id in self._live or session_id in self._claims

    def sessions(self) -> list[uuid.UUID]:
        return list(self._live.keys() | self._claims.keys())
