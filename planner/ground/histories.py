"""The transcripts of this process's recent sessions, kept between turns: a turn reads what it adds.

A session's messages are append-only, numbered by ``seq``. When a turn of this
process ends, its loop's history is kept here; the session's next turn here
takes it and reads only the messages stored after it (a steering message kept
at recovery, a turn another process ran), so the work of starting a turn does
not grow with the session. Whatever does not line up (a summary written
elsewhere, a gap in the numbers) is read again in full. Kept transcripts are
bounded by their size; the least recently used go first.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from planner.agent.compaction import message_chars
from planner.agent.loop import History

BUDGET_CHARS = 50_000_000  # about 50 MB of transcript text per process


@dataclass
class Kept:
    history: History
    last_seq: int  # every message after the summary, up to here, is in ``history``
    chars: int  # the size of its messages, as compaction counts it


class Histories:
    def __init__(self, budget_chars: int = BUDGET_CHARS) -> None:
        self.budget_chars = budget_chars
        self._kept: OrderedDict[uuid.UUID, Kept] = OrderedDict()
        self._taken: dict[uuid.UUID, tuple[int, int]] = {}  # session: (last_seq, chars) when taken
        self._chars = 0
        self._lock = threading.Lock()

    def take(self, session_id: uuid.UUID) -> Kept | None:
        """The session's kept history, now the caller's alone (a turn appends to it)."""
        with self._lock:
            kept = self._kept.pop(session_id, None)
            if kept is None:
                self._taken.pop(session_id, None)
                return None
            self._chars -= kept.chars
            self._taken[session_id] = (kept.last_seq, kept.chars)
            return kept

    def keep(self, session_id: uuid.UUID, history: History) -> None:
        """Keep ``history``, complete up to its last message, for the session's next turn here."""
        cut = history.summary_up_to or 0
        with self._lock:
            counted, chars = self._taken.pop(session_id, (cut, 0))
        if history.messages and history.messages[0].seq <= cut:  # compacted: drop what the summary covers
            history.messages = [m for m in history.messages if m.seq > cut]
            counted, chars = cut, 0
        for message in reversed(history.messages):  # only what was added since it was taken
            if message.seq <= counted:
                break
            chars += message_chars(message)
        last_seq = history.messages[-1].seq if history.messages else cut
        with self._lock:
            old = self._kept.pop(session_id, None)
            self._chars += chars - (old.chars if old is not None else 0)
            self._kept[session_id] = Kept(history, last_seq, chars)
            while self._chars > self.budget_chars and self._kept:
                _, evicted = self._kept.popitem(last=False)
                self._chars -= evicted.chars
