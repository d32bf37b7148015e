"""Planner sessions, their transcript, tool calls, events and metered model use."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from tracker.inputs import NulFreeJSONEncoder
from tracker.models import Item, Project


class SessionState(models.TextChoices):
    IDLE = "idle"
    RUNNING = "running"
    PAUSED = "paused"


class TitleSource(models.TextChoices):
    NONE = "", "not named"  # the first words of the first message, until someone names it
    HUMAN = "human"
    PLANNER = "planner"


class Session(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="planner_sessions")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="planner_sessions"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    # A question's sub-chat (docs/domain.md): owned by the asker, answerable by the project's members.
    question = models.OneToOneField(
        "Question", null=True, blank=True, on_delete=models.SET_NULL, related_name="session"
    )
    title = models.CharField(max_length=200, blank=True)
    # Who named the chat: a human's title is never replaced by the planner's proposal.
    title_source = models.CharField(max_length=10, choices=TitleSource.choices, default="", blank=True)
    # Archived (DELETE): hidden from lists, the transcript kept for the audit trail.
    archived_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=20, choices=SessionState.choices, default=SessionState.IDLE)
    # Compaction: the summary and the seq of the last message it covers.
    summary = models.TextField(blank=True)
    summary_up_to = models.IntegerField(null=True, blank=True)
    # The provider's reported context size of the last answer, and the message seq it covers.
    context_tokens = models.IntegerField(default=0)
    context_tokens_seq = models.IntegerField(default=0)
    # Change notes: the last activity seq the session was told about.
    last_seen_seq = models.BigIntegerField(default=0)
    # Targets the planner read or wrote ("DEMO-3", "knowledge:7"): their changes come first.
    focus = models.JSONField(default=list, blank=True)
    turn_count = models.IntegerField(default=0)
    last_message_seq = models.IntegerField(default=0)
    # Human messages sent while a turn runs, delivered to the model at its next call.
    steering = models.JSONField(default=list, blank=True)
    # Which process runs the current turn, and when it last said it was alive.
    turn_owner = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Every request of the paused turn is answered, but the running-turn limits keep it from
    # resuming: it resumes, oldest first, as soon as a turn frees up.
    resume_waiting = models.BooleanField(default=False)
    # The session is idle, but human messages its last turn never read wait for an answer: steering
    # accepted for a turn whose process died. A turn that answers them starts in whichever process
    # recovered the session, or the next that has a free turn
    # (docs/architecture.md#when-a-process-redis-or-the-database-fails).
    answer_waiting = models.BooleanField(default=False)
    # The session's last message seq when a message was last superseded (an edit, a retry): a
    # history a process kept from before then may still hold it, and is read again.
    superseded_through = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["project", "user"]), models.Index(fields=["state"])]

    def __str__(self) -> str:
        # Not its title: a title says what was said, and a session is named on pages (admin
        # breadcrumbs, its tool calls, changesets) that others than its owner read.
        return f"Session {self.pk}"


class MessageKind(models.TextChoices):
    HUMAN = "human"  # a human message that started a turn
    CONTINUE = "continue"  # a human message that continued a paused turn
    STEER = "steer"  # a human message delivered into a running turn
    CHANGES = "changes"  # <workspace-changes> notes
    ASSISTANT = "assistant"
    TOOL_RESULTS = "tool_results"


class Message(models.Model):
    """One message in the provider's content-block form."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    seq = models.IntegerField()
    role = models.CharField(max_length=20)
    kind = models.CharField(max_length=20, choices=MessageKind.choices)
    content = models.JSONField(encoder=NulFreeJSONEncoder)  # what the model wrote: no NUL reaches jsonb
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    turn = models.IntegerField()
    # Kept for the audit trail but no longer sent to the model: a human message edited and sent
    # again, or the unfinished answer a retry replaces (docs/protocol.md#retry-and-edit).
    superseded = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="planner_message_seq_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} #{self.seq} {self.kind}"


class ToolCall(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="tool_calls")
    turn = models.IntegerField()
    tool_use_id = models.CharField(max_length=100)
    name = models.CharField(max_length=100)
    input = models.JSONField(encoder=NulFreeJSONEncoder)
    output = models.JSONField(encoder=NulFreeJSONEncoder)
    is_error = models.BooleanField(default=False)
    duration_ms = models.FloatField(default=0)
    actor = models.CharField(max_length=100)
    on_behalf_of = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "created_at", "pk"]
        indexes = [models.Index(fields=["session", "tool_use_id"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.tool_use_id})"


class Event(models.Model):
    """turn_started, turn_ended, planner.compacted and errors of a session."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=50)
    turn = models.IntegerField(null=True, blank=True)
    data = models.JSONField(default=dict, blank=True, encoder=NulFreeJSONEncoder)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "pk"]

    def __str__(self) -> str:
        return f"{self.session_id} {self.kind}"


class RequestKind(models.TextChoices):
    QUESTION = "question"  # ask_human: the planner asks the human (docs/domain.md)
    APPROVAL = "approval"  # a call of a tool in the project's approve_tools (docs/domain.md)
    # start_subchat: the turn waits for a sub-chat the planner started (its ``input`` names the
    # sub-chat's session); its end answers it, never a human (docs/domain.md#sub-chats).
    SUBCHAT = "subchat"


class RequestStatus(models.TextChoices):
    PENDING = "pending"
    ANSWERED = "answered"  # a question, answered
    APPROVED = "approved"
    DECLINED = "declined"
    CANCELLED = "cancelled"  # the turn was stopped, or the question withdrawn


class HumanRequest(models.Model):
    """A tool call of a paused turn that waits for a human: a question or an approval.

    The answer that made the call is stored; the call's result is written when every
    request of its round is resolved, and the turn resumes (docs/architecture.md, docs/domain.md).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="requests")
    turn = models.IntegerField()
    tool_use_id = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=RequestKind.choices)
    question = models.TextField(blank=True)
    options = models.JSONField(default=list, blank=True, encoder=NulFreeJSONEncoder)
    tool = models.CharField(max_length=100, blank=True)
    input = models.JSONField(default=dict, blank=True, encoder=NulFreeJSONEncoder)
    # The approval's input, readable (planner/domain/services/previews.py), as the plan stood when
    # the model asked.
    preview = models.JSONField(default=list, blank=True, encoder=NulFreeJSONEncoder)
    status = models.CharField(max_length=20, choices=RequestStatus.choices, default=RequestStatus.PENDING)
    answer = models.TextField(blank=True)  # the answer, or why it was declined
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session", "created_at", "tool_use_id"]
        indexes = [models.Index(fields=["session", "status"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.tool_use_id} ({self.status})"


class QuestionStatus(models.TextChoices):
    OPEN = "open"
    NEEDS_HUMAN = "needs_human", "Needs a human"  # its sub-chat ended without an answer
    ANSWERED = "answered"
    WITHDRAWN = "withdrawn"


class Question(models.Model):
    """A worker's question about a project or one item, answered in its sub-chat (docs/domain.md)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="questions")
    asker = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="questions")
    item = models.ForeignKey(Item, null=True, blank=True, on_delete=models.SET_NULL, related_name="questions")
    text = models.TextField()
    status = models.CharField(max_length=20, choices=QuestionStatus.choices, default=QuestionStatus.OPEN)
    answer = models.TextField(blank=True)
    # Whose answer it is: user:NAME, the human who answered, or on whose reply the planner answered
    # (then ``answered_via`` is planner:SESSION); planner:SESSION, the planner's own.
    answered_by = models.CharField(max_length=200, blank=True)
    answered_via = models.CharField(max_length=200, blank=True)
    # The human of ``answered_by``; and whether they confirmed the planner's wording of their reply
    # (docs/domain.md#agents-questions: only a human's own words, or words they confirmed, are kept).
    human = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    confirmed = models.BooleanField(default=False)
    # Why the question waits for the project's humans (needs_human): how its sub-chat ended.
    reason = models.TextField(blank=True)
    # False while the running-turn limits keep its sub-chat's first turn waiting (docs/domain.md).
    started = models.BooleanField(default=False)
    # The asker's own key for the question: asking again with it returns this question.
    idempotency_key = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)
    # Answers are remembered (docs/domain.md#agents-questions): a human's answer, unless one-off, is
    # kept as a decision entry; a question that means what an answered one meant takes its answer.
    one_off = models.BooleanField(default=False)  # the human's answer is not to be kept nor reused
    decision = models.ForeignKey(
        "knowledge.KnowledgeEntry", null=True, blank=True, on_delete=models.SET_NULL, related_name="questions"
    )
    reused_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reuses"
    )
    # Asked while a question meaning the same was still unsettled: no sub-chat of its own, settled
    # with that one (docs/domain.md#agents-questions).
    joined_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="joins"
    )
    # Tries to start its sub-chat's first turn that failed unexpectedly: past a few, the humans settle it.
    start_failures = models.PositiveSmallIntegerField(default=0)
    # The text's sentence embedding (little-endian float32) and the backend that computed it: vectors
    # of another backend are never compared (tracker/search/embeddings.py).
    embedding = models.BinaryField(null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["project", "status"]),
            models.Index(fields=["started", "status"]),
            models.Index(fields=["project", "item", "status"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["asker", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="question_idempotency_key_per_asker",
            )
        ]

    def __str__(self) -> str:
        return f"Question {self.pk} ({self.status})"


class DraftSection(models.TextChoices):
    """The parts of a compaction's summary worth keeping beyond the chat (docs/domain.md#drafts)."""

    GOALS = "goals"
    DECISIONS = "decisions"
    CONSTRAINTS = "constraints"
    QUESTIONS = "questions", "open questions"


class DraftStatus(models.TextChoices):
    PENDING = "pending"
    PUBLISHED = "published"
    DISCARDED = "discarded"


class KnowledgeDraft(models.Model):
    """A knowledge entry the planner drafted from a compaction's summary (SPEC § 6.4).

    Not knowledge until its session's owner publishes it: no search, brief, feed or other
    person sees it (docs/domain.md#drafts). Publishing writes an ordinary entry, linked to the
    session's project and the items the draft names, as ``planner:SESSION`` acting for the owner.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="drafts")
    section = models.CharField(max_length=20, choices=DraftSection.choices)
    summary_up_to = models.IntegerField()  # the compaction that drafted it
    kind = models.CharField(max_length=20)  # a knowledge kind (knowledge.models.KnowledgeKind)
    title = models.CharField(max_length=200)
    body = models.TextField()
    items = models.ManyToManyField(Item, blank=True, related_name="+")
    status = models.CharField(max_length=20, choices=DraftStatus.choices, default=DraftStatus.PENDING)
    entry = models.ForeignKey(
        "knowledge.KnowledgeEntry", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "pk"]
        indexes = [models.Index(fields=["session", "status"])]

    def __str__(self) -> str:
        return f"Draft {self.pk} ({self.section}, {self.status})"


class UsageRecord(models.Model):
    """One model call: who paid for what, how long it took, how it ended."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="llm_usage")
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="usage"
    )
    purpose = models.CharField(max_length=20)  # turn, compaction, title, reuse_judge
    model = models.CharField(max_length=100)
    input_tokens = models.IntegerField(default=0)
    output_tokens = models.IntegerField(default=0)
    cache_creation_input_tokens = models.IntegerField(default=0)
    cache_read_input_tokens = models.IntegerField(default=0)
    latency_ms = models.FloatField(default=0)
    outcome = models.CharField(max_length=20)  # ok, error, cancelled
    error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["project", "created_at"])]

    def __str__(self) -> str:
        return f"{self.project_id} {self.purpose} {self.model}"
