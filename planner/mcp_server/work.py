"""The MCP tools of a worker's day (docs/domain.md#work): claim a ticket, read its brief, report on it,
let it go.

Specs of the planner's kind (a schema without ``project``, a permission, a handler), run by
``tools.py`` as the token's user with ``run_tool``: validation, the permission, the handler in a
transaction. The services check again what only they can (the ticket is runnable, the caller holds
the claim); a refusal is the planner's error body. Outputs are the REST API's JSON.
"""

from __future__ import annotations

import dataclasses
from functools import partial

from planner.domain.briefs import brief_read
from planner.domain.tools.base import JsonObject, ToolContext, ToolSpec
from planner.domain.tools.plan import ITEM_KEY
from tracker.inputs import MAX_IDEMPOTENCY_KEY
from tracker.models import ReportKind
from tracker.selectors import claim_get, item_get
from tracker.services.work import MAX_LINKS, MAX_SUMMARY_BYTES, claim_release, claim_take, report_add
from tracker.trust.permissions import TRACKER_READ, TRACKER_WRITE
from tracker.web.work_serializers import ReportCreatedSerializer, claim_read

CLAIM_ID: JsonObject = {"type": "integer", "minimum": 1, "description": "The claim's id (claim_ticket's id)."}


def _schema(properties: JsonObject, required: list[str]) -> JsonObject:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _claim(ctx: ToolContext, claim_id: int) -> JsonObject:
    return claim_read(claim_get(project=ctx.project, claim_id=claim_id))


def claim_ticket(ctx: ToolContext, args: JsonObject) -> JsonObject:
    item = item_get(project=ctx.project, key=args["item"])
    claim = claim_take(actor=ctx.actor, project=ctx.project, item=item)
    return _claim(ctx, claim.pk)


def get_brief(ctx: ToolContext, args: JsonObject) -> JsonObject:
    return brief_read(reader=ctx.reader, project=ctx.project, item_key=args["item"])


def report(ctx: ToolContext, args: JsonObject) -> JsonObject:
    claim = claim_get(project=ctx.project, claim_id=args["claim"])
    added = report_add(
        actor=ctx.actor,
        claim=claim,
        kind=args["kind"],
        summary=args["summary"],
        links=args.get("links"),
        details=args.get("details"),
        idempotency_key=args.get("idempotency_key"),
    )
    return dict(ReportCreatedSerializer(added).data)


def release(ctx: ToolContext, args: JsonObject, *, by_key: bool) -> JsonObject:
    claim = claim_get(project=ctx.project, claim_id=args["claim"])
    claim_release(actor=ctx.actor, claim=claim, reason=args.get("reason", ""), by_key=by_key)
    return _claim(ctx, claim.pk)


CLAIM_TICKET = ToolSpec(
    name="claim_ticket",
    description="Claim a runnable ticket (list_runnable) so no other worker takes it: it goes in_progress "
    "and the claim holds a lease (30 minutes unless the project says otherwise), renewed by every "
    "report. Another worker's claim on it is refused, naming the holder; claiming again a ticket you hold "
    "returns your claim, renewed. Then read the ticket's brief with get_brief, report progress with "
    "report, and report done, blocked or failed when you stop. Needs tracker.write (members).",
    input_schema=_schema({"item": ITEM_KEY}, ["item"]),
    permission=TRACKER_WRITE,
    handler=claim_ticket,
    writes=True,
)

GET_BRIEF = ToolSpec(
    name="get_brief",
    description="Everything to start a ticket in one call: the ticket (description, acceptance criteria, "
    "policy), its epic and milestone, its blockers with their final reports, its claim and reports, "
    "the knowledge linked to it or its epic (bodies included), answered questions about it, and the "
    "project's skills by name and version.",
    input_schema=_schema({"item": ITEM_KEY}, ["item"]),
    permission=TRACKER_READ,
    handler=get_brief,
)

REPORT = ToolSpec(
    name="report",
    description="Report on your claim: progress (renews the lease), done (ends the claim; the ticket goes "
    "to in_review, or done where its policy says review none), blocked or failed (ends the claim; the "
    "ticket is ready again, the summary says why). The summary is Markdown; links are http(s) URLs "
    "(a pull request, a build); details any JSON object. Only the claim's holder reports.",
    input_schema=_schema(
        {
            "claim": CLAIM_ID,
            "kind": {"enum": list(ReportKind.values)},
            "summary": {"type": "string", "minLength": 1, "maxLength": MAX_SUMMARY_BYTES},
            "links": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 2000},
                "maxItems": MAX_LINKS,
            },
            "details": {"type": "object"},
            "idempotency_key": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_IDEMPOTENCY_KEY,
                "description": "Your own key for this report: reporting again with it (a retry after a "
                "lost answer) returns the first report, even once the claim has ended.",
            },
        },
        ["claim", "kind", "summary"],
    ),
    permission=TRACKER_WRITE,
    handler=report,
    writes=True,
)

RELEASE_CLAIM = ToolSpec(
    name="release_claim",
    description="Let your claim go without a report (the ticket is ready again for another worker), "
    "with an optional reason.",
    input_schema=_schema(
        {"claim": CLAIM_ID, "reason": {"type": "string", "maxLength": 2000}},
        ["claim"],
    ),
    permission=TRACKER_WRITE,
    handler=partial(release, by_key=True),
    writes=True,
)


def release_spec(*, by_key: bool) -> ToolSpec:
    """``release_claim`` for a caller with an API key (only the holder may) or the legacy token."""
    if by_key:
        return RELEASE_CLAIM
    return dataclasses.replace(RELEASE_CLAIM, handler=partial(release, by_key=False))


WORK_SPECS = (CLAIM_TICKET, GET_BRIEF, REPORT, RELEASE_CLAIM)
