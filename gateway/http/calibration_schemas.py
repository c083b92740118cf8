"""Request and response bodies of golden sets and evaluations (msgspec Structs, strict).

The limits come from `settings.golden`: a body beyond them answers 422 naming the field,
and nothing is stored.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from gateway.calibration.report import EvaluationReport
from gateway.http.knowledge_schemas import KnowledgeBaseOut
from gateway.http.schemas import Identifier, Strict
from gateway.http.workspace_schemas import SettingChangeOut
from settings.golden import (
    MAX_DOCUMENTS_PER_QUESTION,
    MAX_GRADE,
    MAX_OFF_TOPIC,
    MAX_QUESTION_CHARS,
    MAX_QUESTIONS,
    EvaluationStatus,
)

QuestionText = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_QUESTION_CHARS)]
Grade = Annotated[int, msgspec.Meta(ge=1, le=MAX_GRADE)]
DocumentIds = Annotated[
    list[Identifier], msgspec.Meta(min_length=1, max_length=MAX_DOCUMENTS_PER_QUESTION)
]
Grades = Annotated[list[Grade], msgspec.Meta(min_length=1, max_length=MAX_DOCUMENTS_PER_QUESTION)]


class GoldenQuestionIn(Strict):
    """A question the KB should answer, the documents that answer it and, optionally,
    their relevance grades (1 relevant .. 3 highly relevant, one per document id)."""

    question: QuestionText
    document_ids: DocumentIds
    grades: Grades | None = None


class PutGoldenSet(Strict):
    """A KB's golden set; without `off_topic`, evaluations use the built-in off-topic set."""

    questions: Annotated[
        list[GoldenQuestionIn], msgspec.Meta(min_length=1, max_length=MAX_QUESTIONS)
    ]
    off_topic: Annotated[list[QuestionText], msgspec.Meta(max_length=MAX_OFF_TOPIC)] = (
        msgspec.field(default_factory=list)
    )


class GoldenQuestionOut(msgspec.Struct, kw_only=True, omit_defaults=True):
    question: str
    document_ids: list[str]
    #: absent when none were given (every document then counts as grade 1)
    grades: list[int] | None = None


class GoldenSetOut(msgspec.Struct, kw_only=True):
    kb_id: str
    questions: list[GoldenQuestionOut]
    off_topic: list[str]
    updated_at: str
    #: the key (id) that stored it
    updated_by: str


class ProgressOut(msgspec.Struct, kw_only=True):
    """Where a run is: `embedding`, `measuring`, `grounding`, `verifying` or `done`, and
    its units of work done out of all."""

    stage: str
    done: int
    total: int


class EvaluationOut(msgspec.Struct, kw_only=True):
    evaluation_id: str
    kb_id: str
    status: EvaluationStatus
    created_at: str
    updated_at: str
    #: the key (id) that started it; its clearance bounded what the run saw
    key_id: str
    progress: ProgressOut
    #: why it failed (status `failed`)
    error: str | None
    #: figures, curves and the recommendation (status `done`)
    report: EvaluationReport | None
    applied_at: str | None
    applied_by: str | None


class EvaluationSummary(msgspec.Struct, kw_only=True):
    evaluation_id: str
    status: EvaluationStatus
    created_at: str
    updated_at: str
    progress: ProgressOut
    applied_at: str | None


class EvaluationList(msgspec.Struct, kw_only=True):
    """The KB's evaluations, newest first (the last ten are kept)."""

    evaluations: list[EvaluationSummary]


class AppliedOut(msgspec.Struct, kw_only=True):
    """The KB after its evaluation's recommendation was written, and each setting it
    changed (as the settings history records them)."""

    kb_id: str
    evaluation_id: str
    changes: list[SettingChangeOut]
    knowledge_base: KnowledgeBaseOut
