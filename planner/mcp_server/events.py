"""The MCP tool ``wait_for_events`` (docs/events.md#the-feed): the feed's read, run as every tool is
(validation, permission, the caller's access), then, when it found nothing, a wait on the event
loop for the first event, as ``GET …/events/?wait=`` does."""

from __future__ import annotations

from collections.abc import Callable

from planner.domain.tools.base import JsonObject, ToolContext, ToolOutcome, ToolSpec
from planner.live.event_waits import MAX_WAIT_SECONDS, events_await
from tracker.event_selectors import EventPage, event_head, events_after
from tracker.services.events import EVENT_TYPES
from tracker.trust.permissions import TRACKER_READ

DEFAULT_WAIT_SECONDS = 30


def _events(ctx: ToolContext, args: JsonObject) -> JsonObject:
    after = event_head(user=ctx.user, project=ctx.project) if args["after"] == "now" else int(args["after"])
    page = events_after(user=ctx.user, project=ctx.project, after=after, types=event_types(args))
    return {"events": page.events, "next": page.next}


def event_types(args: JsonObject) -> tuple[str, ...]:
    return tuple(dict.fromkeys(args.get("types", ())))


WAIT_FOR_EVENTS = ToolSpec(
    name="wait_for_events",
    description='Read the project\'s events after an id (0: from the first; "now": only those to come), '
    "in id order: claims, reports, tickets that became runnable, changesets, questions, knowledge, "
    "comments, members. When there is none yet, wait up to wait_seconds (default "
    f"{DEFAULT_WAIT_SECONDS}, at most {MAX_WAIT_SECONDS}) for the first, recorded in whichever process. "
    "Returns events and next: pass next as after to read on. types narrows to some event types.",
    input_schema={
        "type": "object",
        "properties": {
            "after": {
                "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "enum": ["now"]}],
                "description": "The last event id you read (next); 0 from the first; now: only what comes.",
            },
            "types": {
                "type": "array",
                "items": {"type": "string", "enum": list(EVENT_TYPES)},
                "maxItems": len(EVENT_TYPES),
            },
            "wait_seconds": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
        },
        "required": ["after"],
        "additionalProperties": False,
    },
    permission=TRACKER_READ,
    handler=_events,
)


async def events_waited(
    outcome: ToolOutcome,
    *,
    project_id: int,
    arguments: JsonObject,
    read: Callable[[int], EventPage],
) -> ToolOutcome:
    """``outcome`` of the first read if it found events (or failed); else the events once some are
    recorded, or none after ``wait_seconds``. ``read(after)`` reads the call's types as the
    caller, anew."""
    seconds = arguments.get("wait_seconds", DEFAULT_WAIT_SECONDS)
    if outcome.is_error or outcome.output["events"] or not seconds:
        return outcome
    page = await events_await(
        project_id=project_id,
        read=read,
        after=outcome.output["next"],
        seconds=seconds,
    )
    return ToolOutcome({"events": page.events, "next": page.next}, False)
