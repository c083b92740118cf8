"""A knowledge base's golden set and its evaluations, as the SettingsStore keeps them.

A KB's measured off-topic lines (`MeasuredLines`) are kept beside them: derived from
the KB's passages inside one Scope, so workspace data too, deleted with the KB.

A golden set is workspace data: questions with the documents that answer them (and
optionally their relevance grades) and off-topic questions the KB should not answer. An
evaluation runs them through the retrieval turn; its record holds its progress and, once
done, its report (figures and a recommendation) as JSON the gateway wrote
(`gateway.calibration`). Both are looked up together with the tenant id, like KBs.

The limits below bound what one golden set and one workspace's evaluations may hold;
the HTTP schemas enforce them (422) and the README lists them.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

#: answerable questions in one golden set
MAX_QUESTIONS = 500
#: off-topic questions in one golden set
MAX_OFF_TOPIC = 500
#: characters of one question (answerable or off-topic)
MAX_QUESTION_CHARS = 1000
#: documents expected for one question
MAX_DOCUMENTS_PER_QUESTION = 20
#: relevance grades run 1 (relevant) .. MAX_GRADE (highly relevant); absent means 1
MAX_GRADE = 3
#: evaluations kept per KB: starting one more drops the oldest beyond this many
EVALUATIONS_KEPT = 10


class GoldenQuestion(msgspec.Struct, frozen=True, kw_only=True):
    """One answerable question and the documents that answer it (grades aligned)."""

    question: str
    document_ids: list[str]
    grades: list[int] | None = None

    def graded(self) -> dict[str, int]:
        """Document id -> relevance grade (1 when no grades were given)."""
        grades = self.grades or [1] * len(self.document_ids)
        return dict(zip(self.document_ids, grades, strict=True))


class GoldenSet(msgspec.Struct, frozen=True, kw_only=True):
    tenant_id: str
    kb_id: str
    questions: list[GoldenQuestion]
    off_topic: list[str] = msgspec.field(default_factory=list)
    updated_at: str = ""
    #: the key (id) that stored it
    updated_by: str = ""


class EvaluationStatus(enum.StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class Evaluation(msgspec.Struct, frozen=True, kw_only=True):
    """One evaluation of a KB: who started it, how far it got, and its report."""

    evaluation_id: str
    tenant_id: str
    kb_id: str
    #: the key (id) that started it; its clearance bounded what the run could see
    key_id: str
    created_at: str
    updated_at: str
    status: EvaluationStatus = EvaluationStatus.RUNNING
    stage: str = ""
    done: int = 0
    total: int = 0
    #: why it failed (a short reason, never content)
    error: str | None = None
    #: the figures and recommendation once done (JSON written by `gateway.calibration`)
    report: Any = None
    applied_at: str | None = None
    #: the key (id) that applied its recommendation
    applied_by: str | None = None


class MeasuredLines(msgspec.Struct, frozen=True, kw_only=True):
    """A KB's off-topic lines as measured inside one Scope
    (`gateway.retrieval.off_topic_line`), kept so a restarted or other gateway process
    serves them without measuring again."""

    tenant_id: str
    kb_id: str
    #: the Scope, the collection and the probes' fingerprint the lines were measured for
    scope: str
    dense: float
    joint: float
    #: the Scope's points when they were measured
    points: int
    measured_at: str
    #: how close everyday questions come to the Scope's passages, unbounded (None: kept
    #: by a process that did not measure it)
    reach: float | None = None
    #: the share of the Scope's words in identifiers (None: kept by a process that did
    #: not measure it)
    identifiers: float | None = None
