"""The demo's agent and its open question (``manage.py seed_demo``): what a new user sees first.

The worker ``agent`` (a member of DEMO, authenticated by a token) asked about
the CSV export ticket, and the planner, finding nothing in the plan or the
knowledge base that settles it, asked the project's humans with ``ask_human``:
the question's sub-chat is paused on that request, waiting for a member to
answer it in the browser. It is written as the runner would have left it,
without a model call, so the demo needs no credential to show it.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Q

from planner.agent.messages import ChatMessage, TextBlock, ToolUseBlock
from planner.domain.services.agent_questions import first_message, question_create
from planner.models import Event, HumanRequest, Message, MessageKind, Question, RequestKind, SessionState
from tracker.models import Item, Project

EXPORT_TITLE = "Export a week's bookings as CSV for the front desk"
QUESTION = (
    "Should the weekly CSV export include cancelled bookings? The acceptance criteria don't say, and "
    "the front desk might want to see the slots that were freed."
)
ASK = (
    "The agent working on {key} asks whether the weekly CSV export should include cancelled "
    "bookings. Neither the ticket nor the knowledge base settles it. Which should it be?"
)
OPTIONS = ["Include them, marked as cancelled", "Leave them out"]
LOOKED = (
    "The ticket's acceptance criteria list the columns but say nothing about cancelled bookings, and "
    "the booking rules in the knowledge base do not mention the export. I'll ask the team."
)


def demo_question_ensure(*, agent: User, project: Project) -> Question | None:
    """The agent's open question, paused on a request to the humans; None if it asked before."""
    if Question.objects.filter(project=project, asker=agent).exists():
        return None
    export = Item.objects.filter(Q(project=project) & Q(title=EXPORT_TITLE)).first()
    question = question_create(
        user=agent, project=project, text=QUESTION, item_key=export.key if export is not None else None
    )
    session = question.session
    asked = {"question": ASK.format(key=export.key if export else project.key), "options": OPTIONS}
    call = ToolUseBlock(id="toolu_demo_question", name="ask_human", input=asked)
    messages = [
        ChatMessage(
            role="user", content=(TextBlock(first_message(question)),), kind=MessageKind.HUMAN, seq=1
        ),
        ChatMessage(role="assistant", content=(TextBlock(LOOKED), call), kind=MessageKind.ASSISTANT, seq=2),
    ]
    for message in messages:
        Message.objects.create(
            session=session,
            seq=message.seq,
            role=message.role,
            kind=message.kind,
            content=message.wire_content(),
            author=agent if message.role == "user" else None,
            turn=1,
        )
    request = HumanRequest.objects.create(
        session=session, turn=1, tool_use_id=call.id, kind=RequestKind.QUESTION, **asked
    )
    Event.objects.create(session=session, kind="turn_started", turn=1, data={"continued": False})
    Event.objects.create(
        session=session,
        kind="turn_paused",
        turn=1,
        data={"requests": [{"id": str(request.pk), "kind": request.kind, "tool_use_id": call.id}]},
    )
    session.state = SessionState.PAUSED
    session.turn_count = 1
    session.last_message_seq = 2
    session.focus = [export.key] if export else []
    session.save(update_fields=["state", "turn_count", "last_message_seq", "focus", "updated_at"])
    question.started = True
    question.save(update_fields=["started"])
    return question
