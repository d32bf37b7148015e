"""A session's verbs, one module each, one transaction per call: create a chat, send it a message
(``begin``), deliver what waits for the next model call (``inputs``), save a turn's steps
(``steps``), end a turn (``ends``), recover a turn whose process died and resume one a human
answered (``recovery``), retry or edit the last message (``resend``). What they share is below
them: the session's row and its locks (``rows``), a turn's progress (``progress``) and opening
(``turns``). The runner calls them from the event loop on the database threads
(``planner/ground/bridge.py``). A session has one writer at a time: the process running its turn
(or, when idle, whoever starts the next one under the session's row lock).

This package's names are those its callers use; each is defined in the module of its verb.
"""

from planner.domain.services.sessions.begin import session_begin, steering_retract
from planner.domain.services.sessions.create import session_create
from planner.domain.services.sessions.ends import steering_frames, turn_end, usage_save
from planner.domain.services.sessions.inputs import session_inputs
from planner.domain.services.sessions.progress import Saved, StepRecords, ToolRecord, advance
from planner.domain.services.sessions.recovery import (
    Recovered,
    follow_up_start,
    session_recover_if_dead,
    sessions_follow_up_waiting,
    sessions_recover_dead,
)
from planner.domain.services.sessions.resend import (
    NotEditableError,
    NotRetryableError,
    Redone,
    session_edit,
    session_retry,
)
from planner.domain.services.sessions.rows import (
    INTERRUPTED_RESULT,
    MAX_MESSAGE_CHARS,
    MAX_TITLE,
    RECOVERED,
    Ended,
    NotQueuedError,
    TurnsFullError,
    TurnSupersededError,
    check_running_turns,
    check_text,
    message_text_problem,
)
from planner.domain.services.sessions.steps import (
    message_save,
    summary_save,
    tool_run,
    turn_close,
    turn_continue,
)
from planner.domain.services.sessions.turns import Begin

__all__ = [
    "INTERRUPTED_RESULT",
    "MAX_MESSAGE_CHARS",
    "MAX_TITLE",
    "RECOVERED",
    "Begin",
    "Ended",
    "NotEditableError",
    "NotQueuedError",
    "NotRetryableError",
    "Recovered",
    "Redone",
    "Saved",
    "StepRecords",
    "ToolRecord",
    "TurnSupersededError",
    "TurnsFullError",
    "advance",
    "check_running_turns",
    "check_text",
    "follow_up_start",
    "message_save",
    "message_text_problem",
    "session_begin",
    "session_create",
    "session_edit",
    "session_inputs",
    "session_recover_if_dead",
    "session_retry",
    "sessions_follow_up_waiting",
    "sessions_recover_dead",
    "steering_frames",
    "steering_retract",
    "summary_save",
    "tool_run",
    "turn_close",
    "turn_continue",
    "turn_end",
    "usage_save",
]
