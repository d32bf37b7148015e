"""start_subchat: the planner splits its work into sub-chats it drives (docs/domain.md#sub-chats).

Like ``ask_human`` it never runs as a handler: the turn pauses on a stored request per call
(``planner/domain/services/human_requests.py``), each call's sub-chat runs a turn of its own, and
its final answer becomes the call's result once every sub-chat of the round has ended
(``planner/domain/services/subchats.py``, ``planner/live/subchats.py``). A call refused before it
waits (inside a sub-chat, past ``[planner] max_subchats``, an unknown item) is answered at once
with the error, which the model may correct.
"""

from __future__ import annotations

from planner.domain.tools.base import JsonObject, ToolContext, ToolError, ToolSpec
from planner.domain.tools.plan import ITEM_KEY
from tracker.trust.permissions import PLANNER_CHAT

MAX_BRIEF = 16_000
MAX_TITLE = 200


def _started(ctx: ToolContext, args: JsonObject) -> JsonObject:
    raise ToolError("internal_error", "start_subchat is answered by its sub-chat, never run.")


START_SUBCHAT = ToolSpec(
    name="start_subchat",
    description="Start a sub-chat: another planner, with the same tools and the human's rights, works "
    "on the brief you give it in a chat of its own, and its final answer comes back to you as this "
    "call's result, with the numbers of the changesets it proposed. Several calls in one answer run "
    "in parallel; your turn waits until every one has ended. Use it to split a big job into "
    "independent parts (a replan per epic); the brief must say everything the sub-chat needs, as it "
    "does not see this chat. A sub-chat cannot start sub-chats of its own.",
    input_schema={
        "type": "object",
        "properties": {
            "brief": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_BRIEF,
                "pattern": r"\S",
                "description": "What the sub-chat is to do, complete: it reads nothing of this chat.",
            },
            "title": {"type": "string", "maxLength": MAX_TITLE, "description": "The sub-chat's name."},
            "item": {**ITEM_KEY, "description": "The item (an epic, say) the sub-chat works on."},
        },
        "required": ["brief"],
        "additionalProperties": False,
    },
    permission=PLANNER_CHAT,
    handler=_started,
    starts_subchat=True,
)

SPECS = (START_SUBCHAT,)
