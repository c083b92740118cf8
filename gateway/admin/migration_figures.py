"""What a KB's model migration measures and loads: each vector set's figures on the KB's
golden set (a full evaluation, `gateway.calibration.evaluation`), the validation that
holds both side by side, and the models it loads (`gateway.admin.migration` runs them)."""

from __future__ import annotations

import asyncio

import msgspec

from gateway.access.auth import Principal
from gateway.calibration.evaluation import Evaluator, evaluate
from gateway.calibration.report import EvaluationReport
from gateway.errors import InvalidInputError
from ingest.embedder.embedding import Embedder, ModelUnavailableError
from ingest.embedder.models import DenseModels
from settings.golden import GoldenSet
from settings.migration import ModelMigration
from settings.records import KnowledgeBase


class SetFigures(msgspec.Struct, kw_only=True):
    """One vector set on the KB's golden set: its evaluation's headline figures."""

    model: str
    vector: str
    #: the fused ranking with the KB's weights, every floor at its lowest
    ndcg_10: float
    recall_10: float
    recall_100: float
    #: the dense channel alone
    dense_ndcg_10: float
    #: abstention of the KB's settings in force on this set (measured by the turn)
    abstention: dict[str, float]
    #: the floors the evaluation recommends for this set, and what they give
    recommended: dict[str, float]
    recommended_ndcg_10: float
    recommended_abstention: dict[str, float]
    meets_target: bool


class Validation(msgspec.Struct, kw_only=True):
    """The golden set on both vector sets, side by side."""

    status: str  # "running", "done" or "failed"
    started_at: str
    key_id: str
    finished_at: str | None = None
    old: SetFigures | None = None
    new: SetFigures | None = None
    #: new minus old fused nDCG@10 (negative: the new model ranks worse)
    ndcg_10_change: float | None = None
    error: str | None = None


def validation_of(migration: ModelMigration) -> Validation | None:
    if migration.validation is None:
        return None
    return msgspec.convert(migration.validation, Validation)


async def figures_on(
    models: DenseModels,
    evaluator: Evaluator,
    principal: Principal,
    kb: KnowledgeBase,
    *,
    golden: GoldenSet,
    model: str,
) -> SetFigures:
    """The KB's golden set evaluated on `model`'s vector set, as the key evaluates it."""
    await loaded(models, model)
    # the evaluation embeds the questions with the model the variant answers from
    variant = msgspec.structs.replace(kb, embedding_model=models.own(model))
    report = await evaluate(evaluator, principal, variant, golden, _no_progress)
    return _figures(model, models.vector(model), report)


async def _no_progress(stage: str, done: int, total: int) -> None:
    """A validation's evaluations report no progress of their own."""


def _figures(model: str, vector: str, report: EvaluationReport) -> SetFigures:
    fused, dense = report.channels["fused"], report.channels["dense"]
    recommended = report.recommendation
    return SetFigures(
        model=model,
        vector=vector,
        ndcg_10=round(fused.ndcg_10, 4),
        recall_10=round(fused.recall_10, 4),
        recall_100=round(fused.recall_100, 4),
        dense_ndcg_10=round(dense.ndcg_10, 4),
        abstention=msgspec.structs.asdict(report.current.measured),
        recommended={
            "score_threshold": recommended.settings.score_threshold,
            "keyword_floor": recommended.settings.keyword_floor,
            "grounding_floor": recommended.settings.grounding_floor,
        },
        recommended_ndcg_10=round(recommended.ndcg_10, 4),
        recommended_abstention=msgspec.structs.asdict(recommended.measured),
        meets_target=recommended.meets_target,
    )


async def loaded(models: DenseModels, model_id: str) -> Embedder:
    """The model, loaded off the event loop (seconds the first time); InvalidInputError
    (`model`) when this deployment cannot load it offline."""
    found = models.loaded(models.named(model_id))
    if found is not None:
        return found
    try:
        return await asyncio.to_thread(models.get, model_id)
    except ModelUnavailableError as error:
        raise InvalidInputError(str(error), field="model") from error
