"""Answers are remembered (docs/domain.md#agents-questions): a human's answer becomes a decision
entry, and a question that means what an answered one meant gets that answer back at once.

Reuse compares sentence embeddings, the hybrid search's semantic side (docs/search.md): the new
question's vector against those of the project's answered questions about the same item (or, for a
question about no item, the project-level ones), the newest :data:`MAX_CANDIDATES`; the best at or
above the project's ``reuse_threshold`` (``tracker.selectors.project_work_config``) is reused. The
same comparison against the unsettled questions finds the one a new question joins. Only
first-hand answers are candidates: answered, not one-off, not reused copies themselves. A question's
vector is stored with the backend's name when it is asked or answered (or, for an older answered
question, the first time it is compared); vectors of another backend are never compared. The
threshold is measured on a labelled set (``bench/reuse.py``, docs/benchmarks.md#answer-reuse).

An embedding failure never loses a question or an answer: the question is then asked as if
nothing were remembered, the answer stored without a vector (computed on a later comparison).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

import numpy as np
from django.contrib.auth.models import User
from django.db.models import Q, QuerySet
from django.utils import timezone

from knowledge.models import KnowledgeEntry, KnowledgeKind
from knowledge.services import MAX_TITLE, knowledge_create
from planner.models import HumanRequest, Question, QuestionStatus, RequestKind, RequestStatus
from tracker.inputs import one_line
from tracker.models import Item, Project
from tracker.search.embeddings import embedding_backend, from_bytes, to_bytes
from tracker.search.engine import query_vector
from tracker.selectors import project_work_config
from tracker.services.activity import Actor
from tracker.trust.permissions import KNOWLEDGE_WRITE, has_permission

logger = logging.getLogger(__name__)

MAX_CANDIDATES = 500  # the newest answered questions of the item compared with a new one
TITLE_WORDS = 120  # characters of the question in its decision's title


@dataclass(frozen=True)
class Vector:
    model: str
    values: np.ndarray

    @property
    def data(self) -> bytes:
        return to_bytes(self.values)


def _backend_name() -> str | None:
    """The name of the process's embedding backend; None (logged) if it cannot be built."""
    try:
        return embedding_backend().name
    except Exception:  # as text_vector: the model is a help, never a reason to refuse
        logger.warning("no embedding backend", exc_info=True)
        return None


def text_vector(text: str) -> Vector | None:
    """``text``'s embedding by the process's backend; None (logged) if the backend fails."""
    try:
        model = embedding_backend().name
        return Vector(model, query_vector(model, text))
    except Exception:  # the model is a help here, never a reason to refuse a question or an answer
        logger.warning("no embedding for a question", exc_info=True)
        return None


def vector_store(question: Question, vector: Vector | None = None) -> None:
    """Store ``question``'s vector (computed from its text unless given), if it lacks one of the
    current backend: a question answered keeps the vector it was asked with, not embedded again."""
    if vector is None:
        if question.embedding is not None and question.embedding_model == _backend_name():
            return
        vector = text_vector(question.text)
    if vector is None or (question.embedding is not None and question.embedding_model == vector.model):
        return
    question.embedding = vector.data
    question.embedding_model = vector.model
    Question.objects.filter(pk=question.pk).update(embedding=vector.data, embedding_model=vector.model)


@dataclass(frozen=True)
class Match:
    question: Question
    similarity: float


def first_hand() -> Q:
    """Answers that are a human's own words, or the planner's words of a human's reply that the
    human confirmed: the only ones kept and given to later questions (never the planner's own, nor
    its unconfirmed words, which whoever steers the sub-chat could have put in its mouth)."""
    return Q(human__isnull=False) & (Q(answered_via="") | Q(confirmed=True))


def reusable_answer(*, project: Project, item: Item | None, vector: Vector) -> Match | None:
    """The answered question of ``project`` about ``item`` (None: about no item) that means the
    same as the question of ``vector``: the most similar at or above the project's threshold."""
    return _best(_answered(project), project=project, item=item, vector=vector)


def _answered(project: Project) -> QuerySet[Question]:
    """The project's questions whose answers may be given again, newest first."""
    answered = Question.objects.filter(
        first_hand(), project=project, status=QuestionStatus.ANSWERED, one_off=False, reused_from__isnull=True
    )
    return answered.order_by("-answered_at", "-pk")


def joinable_question(*, project: Project, item: Item | None, vector: Vector) -> Match | None:
    """The unsettled question of ``project`` about ``item`` that means the same as the question of
    ``vector`` and has a sub-chat of its own (not itself joined to another), by the comparison of
    :func:`reusable_answer`: the question a new one joins (docs/domain.md#agents-questions)."""
    unsettled = Question.objects.filter(
        project=project,
        status__in=(QuestionStatus.OPEN, QuestionStatus.NEEDS_HUMAN),
        joined_to__isnull=True,
        session__isnull=False,
    )
    return _best(unsettled.order_by("-created_at", "-pk"), project=project, item=item, vector=vector)


def near_answers(
    *, project: Project, item: Item | None, vector: Vector, floor: float, question_id: int | None = None
) -> list[Match]:
    """The answered questions :func:`reusable_answer` compares with (or only ``question_id``), at
    least ``floor`` alike, most alike first: the candidates a judge is shown
    (``planner/domain/services/reuse_judge.py``)."""
    answered = _answered(project) if question_id is None else _answered(project).filter(pk=question_id)
    return [m for m in _ranked(answered, item, vector) if m.similarity >= floor]


def _best(
    candidates: QuerySet[Question], *, project: Project, item: Item | None, vector: Vector
) -> Match | None:
    """Of the newest :data:`MAX_CANDIDATES` of ``candidates`` about ``item``, the one most similar to
    ``vector``, at or above the project's threshold (the newest of equals)."""
    threshold = project_work_config(project).reuse_threshold
    ranked = _ranked(candidates, item, vector)
    if not ranked or ranked[0].similarity < threshold:
        return None
    match = Question.objects.select_related("project", "item").get(pk=ranked[0].question.pk)
    return Match(match, ranked[0].similarity)


def _ranked(candidates: QuerySet[Question], item: Item | None, vector: Vector) -> list[Match]:
    """The newest :data:`MAX_CANDIDATES` of ``candidates`` about ``item``, most similar to ``vector``
    first (the newest of equals); their questions hold only their text and vector."""
    about = candidates.filter(item=item) if item is not None else candidates.filter(item__isnull=True)
    found = list(about.only("pk", "text", "embedding", "embedding_model")[:MAX_CANDIDATES])
    if not found:
        return []
    _vectors_missing(found, vector.model)
    rows = [q for q in found if q.embedding is not None and q.embedding_model == vector.model]
    if not rows:
        return []
    matrix = np.stack([from_bytes(q.embedding) for q in rows if q.embedding is not None])
    similarities = matrix @ vector.values
    order = np.argsort(-similarities, kind="stable")  # stable: the newest of equals first
    return [Match(rows[i], float(similarities[i])) for i in order]


def _vectors_missing(candidates: list[Question], model: str) -> None:
    """Embed and store, in one call of the backend, the candidates' texts that lack a vector of
    ``model`` (answered before their vectors were kept, or by another backend)."""
    missing = [q for q in candidates if q.embedding is None or q.embedding_model != model]
    if not missing:
        return
    try:
        backend = embedding_backend()
        if backend.name != model:
            return
        vectors = backend.embed([q.text for q in missing])
    except Exception:
        logger.warning("no embeddings for %d answered questions", len(missing), exc_info=True)
        return
    for question, values in zip(missing, vectors, strict=True):
        question.embedding = to_bytes(values)
        question.embedding_model = model
    Question.objects.bulk_update(missing, ["embedding", "embedding_model"])


# ---------------------------------------------------------------------- decisions


def human_of_session(session_id: uuid.UUID) -> HumanRequest | None:
    """The latest of the sub-chat's ``ask_human`` requests a human answered, if any: the planner's
    answer then stands on that human's word."""
    return (
        HumanRequest.objects.filter(
            session_id=session_id,
            kind=RequestKind.QUESTION,
            status=RequestStatus.ANSWERED,
            answered_by__isnull=False,
        )
        .select_related("answered_by")
        .order_by("-resolved_at", "-created_at")
        .first()
    )


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.strip().splitlines())


def decision_title(question: Question) -> str:
    return f"Answer: {one_line(question.text, TITLE_WORDS)}"[:MAX_TITLE]


def decision_body(question: Question, human: User, request: HumanRequest | None) -> str:
    """The question and its answer, quoted, with who answered, when, and which question; an answer
    the planner worded from ``human``'s reply (``request``) quotes the reply as theirs and the
    planner's words as the planner's, which ``human`` confirmed."""
    about = f" about {question.item.key}" if question.item is not None else ""
    when = (question.answered_at or timezone.now()).strftime("%Y-%m-%d %H:%M UTC")
    name = human.get_username()
    parts = [
        f"Question {question.pk}{about}, asked by {question.asker.get_username()}:",
        _quoted(question.text),
    ]
    if request is None:
        parts += ["Answer:", _quoted(question.answer), f"Answered by {name} on {when}."]
    else:
        parts += [
            f"The planner asked {name}:",
            _quoted(request.question),
            f"{name} replied:",
            _quoted(request.answer),
            f"The planner answered on {when}, in words {name} confirmed:",
            _quoted(question.answer),
        ]
    return "\n\n".join(parts) + "\n"


def decision_record(
    *, question: Question, human: User, session_id: uuid.UUID | None, request: HumanRequest | None = None
) -> KnowledgeEntry | None:
    """Keep the answered ``question`` as a decision entry linked to its project and item,
    attributed to ``human`` (through the sub-chat's planner session when given); call in the
    answer's transaction. None when the human may no longer write the project's knowledge (logged)."""
    if not has_permission(human, question.project, KNOWLEDGE_WRITE):
        logger.info("question %s: %s may not write knowledge; no decision kept", question.pk, human.pk)
        return None
    entry = knowledge_create(
        actor=Actor(user=human, planner_session=session_id),
        kind=KnowledgeKind.DECISION,
        title=decision_title(question),
        body=decision_body(question, human, request),
        projects=[question.project],
        items=[question.item] if question.item is not None else [],
    )
    question.decision = entry
    Question.objects.filter(pk=question.pk).update(decision=entry)
    return entry
