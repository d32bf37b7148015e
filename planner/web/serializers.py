"""REST shapes of the planner: sessions, the transcript, messages, usage."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from knowledge.models import KnowledgeKind
from knowledge.services import MAX_BODY
from knowledge.services import MAX_TITLE as MAX_ENTRY_TITLE
from planner.domain.services.agent_questions import MAX_QUESTION_CHARS
from planner.domain.services.sessions import MAX_MESSAGE_CHARS, MAX_TITLE
from planner.live.question_waits import MAX_WAIT_SECONDS
from planner.models import DraftSection, DraftStatus, Question, QuestionStatus, Session
from tracker.inputs import MAX_IDEMPOTENCY_KEY
from tracker.web.serializers import (
    MAX_INT,
    StrictCharField,
    StrictIntegerField,
    StrictSerializer,
    no_nul_characters,
)


class SessionSerializer(serializers.Serializer[Session]):
    id = serializers.UUIDField()
    project = serializers.CharField(source="project.key")
    user = serializers.CharField(source="user.username")
    parent = serializers.UUIDField(source="parent_id", allow_null=True)  # type: ignore[assignment]
    title = serializers.CharField()
    title_source = serializers.ChoiceField(
        choices=["", "human", "planner"],
        help_text="Who named the session: a human, the planner (after the first turn), or nobody yet.",
    )
    state = serializers.CharField()
    turn_count = serializers.IntegerField()
    question = serializers.IntegerField(
        source="question_id", allow_null=True, help_text="A question's sub-chat."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    archived_at = serializers.DateTimeField(
        allow_null=True, help_text="Archived: hidden from lists, the transcript kept."
    )


class StrictBooleanField(serializers.BooleanField):
    """A BooleanField that takes JSON true and false only, never "yes", 1 or "on"."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class SessionChangeSerializer(StrictSerializer):
    title = StrictCharField(
        required=False,
        trim_whitespace=False,
        allow_blank=True,  # told apart, with the other rules, by planner.domain.services.chats.human_title
        help_text="Renames: 1 to 200 characters once stripped, one line, no control characters.",
    )
    archived = StrictBooleanField(
        required=False, help_text="false unarchives the session; true archives it, as DELETE does."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError({"title": ["Send a title, archived, or both."]})
        return attrs


class SessionCreateSerializer(StrictSerializer):
    project = StrictCharField(max_length=10)
    title = StrictCharField(
        max_length=MAX_TITLE, required=False, allow_blank=True, default="", validators=[no_nul_characters]
    )
    parent = serializers.UUIDField(required=False, allow_null=True, default=None)  # type: ignore[assignment]


class SessionFilterSerializer(serializers.Serializer[Any]):
    project = serializers.CharField(required=False, allow_blank=True, max_length=10)
    archived = serializers.BooleanField(
        required=False, default=False, help_text="true: only the archived sessions (to unarchive one)."
    )
    q = serializers.CharField(
        required=False, allow_blank=True, max_length=MAX_TITLE, help_text="Titles containing this (any case)."
    )
    parent = serializers.UUIDField(  # type: ignore[assignment]
        required=False, help_text="Only the sub-chats of this session."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """``?parent=`` empty is no session at all (DRF would read it as absent): a field error."""
        if "parent" in self.initial_data and not self.initial_data.get("parent"):
            raise serializers.ValidationError({"parent": ["A chat's id (a UUID)."]})
        return attrs


class SessionListedSerializer(SessionSerializer):
    waiting = serializers.BooleanField(help_text="A request of this session waits for you.")


class AnswerSerializer(StrictSerializer):
    """An answer to a pending request: a text for a question, approve (and a reason) for an approval."""

    request = serializers.UUIDField()
    text = StrictCharField(
        required=False, max_length=MAX_MESSAGE_CHARS, trim_whitespace=False, validators=[no_nul_characters]
    )
    approve = serializers.BooleanField(required=False)
    reason = StrictCharField(
        required=False, allow_blank=True, max_length=2000, validators=[no_nul_characters]
    )


class AnsweredSerializer(serializers.Serializer[Any]):
    outcome = serializers.CharField()
    resumed = serializers.BooleanField(help_text="No request waits any more: the turn resumed.")
    waiting = serializers.CharField(
        allow_null=True,
        help_text="Every request is answered, but the running-turn limits keep the turn from resuming "
        "yet: why. It resumes as soon as a turn frees up.",
    )


class QuestionSerializer(serializers.Serializer[Question]):
    id = serializers.IntegerField()
    project = serializers.CharField(source="project.key")
    text = serializers.CharField()
    item = serializers.SerializerMethodField()
    status = serializers.CharField()
    answer = serializers.CharField()
    answered_by = serializers.CharField(
        help_text="Whose answer it is: user:NAME, the human who answered or on whose reply the planner "
        "answered (then answered_via names the planner); planner:SESSION, the planner's own."
    )
    answered_via = serializers.CharField(
        help_text="planner:SESSION when the planner worded the answer from answered_by's reply; else empty."
    )
    confirmed = serializers.BooleanField(
        help_text="The human of answered_by confirmed the planner's words (only then is such an answer kept "
        "as a decision and given to later questions)."
    )
    reason = serializers.CharField(
        help_text="needs_human: why the planner left it to the project's humans (how its sub-chat ended)."
    )
    asker = serializers.CharField(source="asker.username")
    session = serializers.SerializerMethodField(
        help_text="The question's sub-chat (for a joined question, the one it joined); null for a question "
        "answered from an earlier one (reused)."
    )
    created_at = serializers.DateTimeField()
    answered_at = serializers.DateTimeField(allow_null=True)
    reused = serializers.SerializerMethodField(
        help_text="Answered at once with the answer of an earlier question meaning the same (reused_from)."
    )
    reused_from = serializers.IntegerField(source="reused_from_id", allow_null=True)
    joined_to = serializers.IntegerField(
        source="joined_to_id",
        allow_null=True,
        help_text="Asked while this question, meaning the same, was still unsettled: this one waits for its "
        "outcome and is settled with it, without a sub-chat of its own.",
    )
    one_off = serializers.BooleanField(help_text="The human's answer is not kept as a decision nor reused.")
    decision = serializers.IntegerField(
        source="decision_id", allow_null=True, help_text="The knowledge entry the human's answer was kept as."
    )

    def get_item(self, question: Question) -> str | None:
        return question.item.key if question.item is not None else None

    def get_reused(self, question: Question) -> bool:
        return question.reused_from_id is not None

    def get_session(self, question: Question) -> str | None:
        if question.joined_to_id is not None:  # the sub-chat of the question it joined
            if hasattr(question, "joined_session_id"):  # read with it (agent_questions.question_list)
                joined = question.joined_session_id
            else:
                sub_chats = Session.objects.filter(question_id=question.joined_to_id)
                joined = sub_chats.values_list("pk", flat=True).first()
            return str(joined) if joined is not None else None
        session = getattr(question, "session", None)
        return str(session.pk) if session is not None else None


class QuestionAskSerializer(StrictSerializer):
    text = StrictCharField(max_length=MAX_QUESTION_CHARS, validators=[no_nul_characters])
    item = StrictCharField(required=False, allow_null=True, max_length=30, validators=[no_nul_characters])
    idempotency_key = StrictCharField(
        required=False,
        max_length=MAX_IDEMPOTENCY_KEY,
        validators=[no_nul_characters],
        help_text="Your own key for this question: asking again with it returns the same question.",
    )
    fresh = StrictBooleanField(
        required=False,
        help_text="Ask the planner even if an answered question about the same item means the same.",
    )


class QuestionAnswerSerializer(StrictSerializer):
    answer = StrictCharField(max_length=MAX_QUESTION_CHARS, validators=[no_nul_characters])
    one_off = StrictBooleanField(
        required=False, help_text="Don't keep this answer as a decision, nor give it to later questions."
    )


class QuestionFilterSerializer(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=QuestionStatus.choices, required=False)
    asker = serializers.CharField(required=False, max_length=150, help_text="Only this user's questions.")
    mine = serializers.BooleanField(
        required=False, default=False, help_text="Only your own questions (as MCP's list_questions lists)."
    )


class QuestionWaitSerializer(serializers.Serializer[Any]):
    wait = serializers.FloatField(
        required=False,
        min_value=0,
        max_value=MAX_WAIT_SECONDS,
        default=0,
        help_text="Seconds to wait for the answer.",
    )


class MessageSendSerializer(StrictSerializer):
    text = StrictCharField(
        max_length=MAX_MESSAGE_CHARS, trim_whitespace=False, validators=[no_nul_characters]
    )


class MessageSentSerializer(serializers.Serializer[Any]):
    meaning = serializers.ChoiceField(choices=["started", "steered", "continued"])
    turn = serializers.IntegerField()
    seq = serializers.IntegerField(allow_null=True)


class MessageEditSerializer(StrictSerializer):
    seq = StrictIntegerField(min_value=1, max_value=MAX_INT, help_text="The message to edit: your last one.")
    text = StrictCharField(
        max_length=MAX_MESSAGE_CHARS, trim_whitespace=False, validators=[no_nul_characters]
    )


class RedoneSerializer(serializers.Serializer[Any]):
    turn = serializers.IntegerField(help_text="The turn it started.")
    seq = serializers.IntegerField(allow_null=True, help_text="The new message (an edit); null for a retry.")
    superseded = serializers.ListField(
        child=serializers.IntegerField(), help_text="The messages no longer sent to the model (kept)."
    )


class StopSerializer(serializers.Serializer[Any]):
    stopped = serializers.BooleanField()


class UsageRowSerializer(serializers.Serializer[Any]):
    day = serializers.DateField()
    model = serializers.CharField()
    calls = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_creation_input_tokens = serializers.IntegerField()
    cache_read_input_tokens = serializers.IntegerField()
    estimated_cost = serializers.FloatField(
        allow_null=True, help_text="USD at the configured prices ([prices] in ballet.toml); null: no price."
    )


class TokensTodaySerializer(serializers.Serializer[Any]):
    date = serializers.DateField(help_text="The current UTC day.")
    tokens = serializers.IntegerField(
        help_text="Every token metered today, cached input included (what the budget counts)."
    )
    budget = serializers.IntegerField(allow_null=True, help_text="daily_token_budget; null: none.")
    remaining = serializers.IntegerField(allow_null=True, help_text="Left today; null: no budget.")
    fraction_used = serializers.FloatField(allow_null=True, help_text="tokens / budget; null: no budget.")
    input_tokens = serializers.IntegerField(source="spend.input_tokens")
    output_tokens = serializers.IntegerField(source="spend.output_tokens")
    cache_creation_input_tokens = serializers.IntegerField(source="spend.cache_creation_input_tokens")
    cache_read_input_tokens = serializers.IntegerField(source="spend.cache_read_input_tokens")
    cached_tokens = serializers.IntegerField(
        source="spend.cached_tokens", help_text="Of ``tokens``, the input written to or read from the cache."
    )
    estimated_cost = serializers.FloatField(
        source="spend.cost", help_text="USD of today's tokens of models with a configured price."
    )
    unpriced = serializers.BooleanField(
        source="spend.unpriced", help_text="Some of today's tokens are of a model without a price."
    )


class UsageSerializer(serializers.Serializer[Any]):
    results = UsageRowSerializer(many=True, help_text="Metered use by day and model, newest day first.")
    today = TokensTodaySerializer(help_text="Today's use against the daily token budget (resets 00:00 UTC).")


class SpendSerializer(serializers.Serializer[Any]):
    tokens = serializers.IntegerField(help_text="Every token, cached input included.")
    cached_tokens = serializers.IntegerField(
        help_text="Of ``tokens``, the input written to or read from the cache."
    )
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_creation_input_tokens = serializers.IntegerField()
    cache_read_input_tokens = serializers.IntegerField()
    estimated_cost = serializers.FloatField(source="cost", help_text="USD of the tokens of priced models.")
    unpriced = serializers.BooleanField(help_text="Some tokens are of a model without a price.")


class ChatUsageSerializer(serializers.Serializer[Any]):
    context_tokens = serializers.IntegerField(help_text="The next model call's context, estimated.")
    compact_at_tokens = serializers.IntegerField(help_text="Above this, the planner compacts the history.")
    context_fraction = serializers.FloatField()
    session = SpendSerializer(help_text="Every metered call of this chat.")
    today = TokensTodaySerializer(help_text="The project's use today against its daily token budget.")


class DraftSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    section = serializers.ChoiceField(choices=DraftSection.choices)
    kind = serializers.ChoiceField(choices=KnowledgeKind.choices)
    title = serializers.CharField()
    body = serializers.CharField(help_text="Markdown.")
    items = serializers.ListField(child=serializers.CharField(), help_text="Keys of the items it names.")
    status = serializers.ChoiceField(choices=DraftStatus.choices)
    entry = serializers.IntegerField(allow_null=True, help_text="The published knowledge entry.")
    url = serializers.CharField(allow_null=True, help_text="The published entry's page.")
    summary_up_to = serializers.IntegerField(help_text="The last message the compaction covered.")
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class DraftPublishSerializer(StrictSerializer):
    kind = serializers.ChoiceField(choices=KnowledgeKind.choices, required=False)
    title = StrictCharField(max_length=MAX_ENTRY_TITLE, required=False, validators=[no_nul_characters])
    body = StrictCharField(
        max_length=MAX_BODY,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        validators=[no_nul_characters],
    )


class TranscriptSerializer(SessionSerializer):
    summary = serializers.CharField()
    summary_up_to = serializers.IntegerField(allow_null=True)
    context_tokens = serializers.IntegerField()
    last_seen_seq = serializers.IntegerField()
    messages = serializers.ListField(child=serializers.DictField())
    tool_calls = serializers.ListField(child=serializers.DictField())
    events = serializers.ListField(child=serializers.DictField())
    requests = serializers.ListField(child=serializers.DictField(), help_text="Questions and approvals.")
    changesets = serializers.ListField(
        child=serializers.DictField(), help_text="The changesets the session proposed, as they stand now."
    )
    queued = serializers.ListField(
        child=serializers.CharField(), help_text="Messages sent during the turn, not read by the planner yet."
    )
    knowledge = serializers.DictField(
        child=serializers.DictField(),
        help_text="The knowledge its planner wrote, by tool_use_id: each entry and its diff against "
        "the revision before.",
    )
    about = serializers.DictField(allow_null=True, help_text="The question of a question's sub-chat.")
    can_send = serializers.BooleanField(help_text="You own the session: you send, stop and approve.")
    waiting = serializers.BooleanField(help_text="A request waits for you.")
    usage = ChatUsageSerializer(help_text="Context use, this chat's spend and the project's today.")
    drafts = DraftSerializer(
        many=True, help_text="Knowledge drafts its compactions left: yours only (to others, none)."
    )


class UsageFilterSerializer(serializers.Serializer[Any]):
    days = serializers.IntegerField(required=False, min_value=1, max_value=3660, default=30)
