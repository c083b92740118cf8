"""What an evaluation reports: figures, curves and a recommendation (msgspec Structs).

Stored as JSON in the evaluation's record and answered as is by
`GET /v1/knowledge-bases/{kb_id}/evaluations/{evaluation_id}`. Figures only: no
question, passage or answer text.
"""

from __future__ import annotations

from typing import Literal

import msgspec

#: the targets a calibrated KB is held to on its own questions
ANSWERABLE_ABSTENTION_MAX = 0.05
OFF_TOPIC_ABSTENTION_MIN = 0.90


class Figures(msgspec.Struct, kw_only=True):
    """Ranking quality over the golden set's answerable questions."""

    ndcg_10: float
    recall_10: float
    recall_100: float


class Weights(msgspec.Struct, kw_only=True):
    dense: float
    keyword: float


class FusionFigures(msgspec.Struct, kw_only=True):
    """Hybrid ranking quality with one pair of channel weights."""

    weights: Weights
    ndcg_10: float
    recall_10: float
    recall_100: float


class Abstention(msgspec.Struct, kw_only=True):
    """The share of answerable and of off-topic questions whose turn abstains."""

    answerable: float
    off_topic: float


class CurvePoint(msgspec.Struct, kw_only=True):
    """Abstention with one floor at `floor` (the other floors at their recommended value)."""

    floor: float
    answerable: float
    off_topic: float


class GroundingFlags(msgspec.Struct, kw_only=True):
    """The share of each kind of answer the grounding check flags at one floor."""

    floor: float
    supported: float
    other_domain: float
    mixed: float


class KbSettings(msgspec.Struct, kw_only=True):
    """The KB settings an evaluation ran with, or recommends (as `PUT` stores them)."""

    score_threshold: float
    keyword_floor: float
    grounding_floor: float
    fusion: Weights
    top_k: int


class Outcome(msgspec.Struct, kw_only=True):
    """What a set of settings does on the golden set: abstention as the measurements
    predict it and as the real turn measured it, hybrid nDCG@10 with those floors and
    `top_k`, and the grounding check's flags at its floor."""

    settings: KbSettings
    predicted: Abstention
    measured: Abstention
    ndcg_10: float
    grounding: GroundingFlags


class Recommendation(Outcome, kw_only=True):
    """The recommended settings: the floors that keep answerable abstention within the
    target while abstaining on the most off-topic questions, the fusion weights when they
    beat the current ones by the margin, and the grounding floor that best separates
    supported from unsupported answers."""

    #: the settings `apply` writes (only those that differ from the KB's stored ones)
    changes: dict[str, float | Weights]
    meets_target: bool
    #: what the recommended floors give up on questions the golden set does not hold
    cautions: list[str] = msgspec.field(default_factory=list)


class Counts(msgspec.Struct, kw_only=True):
    questions: int
    off_topic: int
    off_topic_source: Literal["golden_set", "built_in"]
    #: expected document ids the KB does not hold (for the caller's clearance)
    missing_documents: int
    grounding_answers: int


class EvaluationReport(msgspec.Struct, kw_only=True):
    counts: Counts
    #: dense-only, keyword-only and fused (the KB's weights) rankings, floors at 0
    channels: dict[str, Figures]
    fusion: list[FusionFigures]
    current: Outcome
    recommendation: Recommendation
    #: per floor setting (`score_threshold`, `keyword_floor`): abstention against it
    curves: dict[str, list[CurvePoint]]
    grounding_curve: list[GroundingFlags]
    target: Abstention
    seconds: float
