"""One evaluation of a KB's golden set: measurements on the expensive-work pool, the
recommendation, a run of the recommended settings through the turn, and the report.

Every unit of work (a batch of question embeddings, one question's measurements, one
question's grounding answers, one verification turn) runs on the expensive-work pool
under the workspace's slots (`gateway.access.expensive`), one after another: an
evaluation holds at most one pool thread, so other workspaces' turns and checks do not
queue behind it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar

import msgspec

from gateway.access.auth import Principal
from gateway.access.expensive import ExpensiveWork, Stop, stop_point
from gateway.calibration.builtin import off_topic_questions
from gateway.calibration.grounding_floor import GROUNDING_QUESTIONS, ScoredAnswers, score_answers
from gateway.calibration.measure import RANKING_DEPTH, KbUnderTest, Measured, measure, run_with
from gateway.calibration.metrics import mean, ndcg_at, recall_at
from gateway.calibration.recommend import (
    FUSION_CANDIDATES,
    FloorAxis,
    FloorChoice,
    GroundingScores,
    abstention,
    cautions,
    choose_floors,
    choose_fusion,
    choose_grounding_floor,
    curves,
    floor_axes,
    grounding_curve,
    grounding_flags,
    lowest_floors,
)
from gateway.calibration.report import (
    ANSWERABLE_ABSTENTION_MAX,
    OFF_TOPIC_ABSTENTION_MIN,
    Abstention,
    Counts,
    EvaluationReport,
    Figures,
    FusionFigures,
    KbSettings,
    Outcome,
    Recommendation,
    Weights,
)
from gateway.retrieval.legs import Search
from gateway.retrieval.plan import Planning, with_lines
from ingest.embedder.embedding import Embedder, Embedding
from ingest.embedder.models import DenseModels
from ingest.engines.blocking import BlockingIndex
from settings.effective import knowledge_base_effective
from settings.golden import GoldenSet
from settings.records import KnowledgeBase
from settings.resolve import resolve_strict_isolation
from settings.store import SettingsStore

T = TypeVar("T")
#: reports how far a run is: stage, units done, units in all
Progress = Callable[[str, int, int], Awaitable[None]]

#: questions embedded per model call (the run may stop between two calls)
_EMBED_BATCH = 16
_CHANNELS = {"dense": Weights(dense=1.0, keyword=0.0), "keyword": Weights(dense=0.0, keyword=1.0)}


@dataclass(frozen=True, slots=True)
class Evaluator:
    """What an evaluation uses: the KB's plan and measured lines, its legs ranked as a turn
    ranks them, the model, the expensive-work pool its units of work run on, and the
    workspace's record (its strict isolation, read fresh)."""

    planning: Planning
    search: Search
    embedder: Embedder
    expensive: ExpensiveWork
    store: SettingsStore
    #: the other dense models a KB may answer from (None: only `embedder`)
    models: DenseModels | None = None


@dataclass(frozen=True, slots=True)
class _Pool:
    """Units of work on the expensive-work pool, under the workspace's slots (waiting
    for one rather than being refused)."""

    expensive: ExpensiveWork
    tenant_id: str

    async def run(self, work: Callable[[Stop], T]) -> T:
        return await self.expensive.run(self.tenant_id, work, kind="evaluation", wait=True)


@dataclass(slots=True)
class _Steps:
    """The run's units of work, counted as they are done."""

    progress: Progress
    total: int
    done: int = 0

    async def step(self, stage: str) -> None:
        self.done += 1
        await self.progress(stage, self.done, self.total)


@dataclass(frozen=True, slots=True)
class _Run:
    """What every step of one evaluation shares."""

    pool: _Pool
    steps: _Steps
    kb: KbUnderTest
    axes: tuple[FloorAxis, ...]
    #: the KB's settings in force, by name (`knowledge_base_effective`)
    effective: Mapping[str, Any]
    golden: GoldenSet
    off_topic: list[str]
    source: Literal["golden_set", "built_in"]

    @property
    def weights(self) -> Weights:
        return Weights(**self.effective["fusion"])

    def current_floors(self) -> dict[str, float]:
        return {axis.setting: float(self.effective[axis.setting]) for axis in self.axes}


@dataclass(frozen=True, slots=True)
class _Measurements:
    """The questions' embeddings (answerable ones first) and measurements: `kept` of the
    answerable questions (which the KB should keep answering), `cut` of the off-topic ones."""

    embeddings: list[Embedding]
    kept: list[Measured]
    cut: list[Measured]
    scores: GroundingScores
    missing: int

    @property
    def answerable(self) -> list[Embedding]:
        return self.embeddings[: len(self.kept)]

    @property
    def off_topic(self) -> list[Embedding]:
        return self.embeddings[len(self.kept) :]


@dataclass(frozen=True, slots=True)
class _Choice:
    figures: dict[str, Figures]
    tried: list[FusionFigures]
    weights: Weights | None
    floors: FloorChoice
    grounding_floor: float

    def turn_settings(self) -> dict[str, Any]:
        """What a turn with the recommendation runs with."""
        settings: dict[str, Any] = dict(self.floors.floors)
        if self.weights is not None:
            settings["fusion"] = msgspec.structs.asdict(self.weights)
        return settings


async def evaluate(
    evaluator: Evaluator,
    principal: Principal,
    kb: KnowledgeBase,
    golden: GoldenSet,
    progress: Progress,
) -> EvaluationReport:
    """Measure the golden set on the KB under the caller's Scope, recommend settings, run
    them through the turn, and report."""
    started = time.perf_counter()
    run = await _prepare(evaluator, principal, kb, golden, progress)
    measurements = await _measure(run)
    choice = _choose(run, measurements)
    kept = [await _verify(run, e, choice.turn_settings()) for e in measurements.answerable]
    cut = [await _verify(run, e, choice.turn_settings()) for e in measurements.off_topic]
    report = _report(run, measurements, choice, kept, cut)
    report.seconds = round(time.perf_counter() - started, 1)
    return report


async def _prepare(
    evaluator: Evaluator,
    principal: Principal,
    kb: KnowledgeBase,
    golden: GoldenSet,
    progress: Progress,
) -> _Run:
    off_topic, source = _off_topic(golden)
    questions, answered = len(golden.questions), min(len(golden.questions), GROUNDING_QUESTIONS)
    steps = _Steps(progress, total=2 * (questions + len(off_topic)) + answered + 1)
    await progress("embedding", 0, steps.total)
    strict = await _strict(evaluator.store, principal)
    index = BlockingIndex(evaluator.search.index, asyncio.get_running_loop())
    embedder = evaluator.embedder
    if kb.embedding_model and evaluator.models is not None:
        # the KB answers from another model's vectors: its questions are that model's
        embedder = await asyncio.to_thread(evaluator.models.get, kb.embedding_model)
    under_test = KbUnderTest(evaluator.search, embedder, principal, kb, strict, index)
    (lined,) = await with_lines(evaluator.planning, [under_test.plan({})], wait=True)
    if lined.score_threshold.source == "measured":
        under_test = dataclasses.replace(
            under_test, line=lined.score_threshold, joint_line=lined.joint_line
        )
    config = evaluator.planning.config
    effective = knowledge_base_effective(kb, config.bounds, config.defaults)
    return _Run(
        pool=_Pool(evaluator.expensive, principal.tenant_id),
        steps=steps,
        kb=under_test,
        axes=floor_axes(config.bounds),
        effective={
            **{name: found.value for name, found in effective.items()},
            "score_threshold": lined.score_threshold.value,
        },
        golden=golden,
        off_topic=off_topic,
        source=source,
    )


async def _measure(run: _Run) -> _Measurements:
    """Every question measured, every grounding answer scored, missing documents counted."""
    questions = [question.question for question in run.golden.questions]
    embedder = run.kb.embedder
    embeddings = await run.pool.run(partial(_embed, embedder, [*questions, *run.off_topic]))
    await run.steps.step("embedding")
    rankings = _ranking_runs(run.axes, run.weights)
    kept: list[Measured] = []
    for embedding in embeddings[: len(questions)]:
        kept.append(await run.pool.run(partial(measure, run.kb, embedding, run.axes, rankings)))
        await run.steps.step("measuring")
    cut: list[Measured] = []
    for embedding in embeddings[len(questions) :]:
        cut.append(await run.pool.run(partial(measure, run.kb, embedding, run.axes, {})))
        await run.steps.step("measuring")
    scored: list[ScoredAnswers | None] = []
    for position, question in enumerate(run.golden.questions[:GROUNDING_QUESTIONS]):
        scored.append(await run.pool.run(partial(score_answers, run.kb, question, position)))
        await run.steps.step("grounding")
    missing = await run.pool.run(partial(_missing_documents, run.kb, run.golden))
    return _Measurements(embeddings, kept, cut, _grounding_scores(scored), missing)


def _choose(run: _Run, measurements: _Measurements) -> _Choice:
    """The recommendation: fusion weights, floors and grounding floor."""
    grades = [question.graded() for question in run.golden.questions]
    figures = {
        label: _figures([m.rankings[label] for m in measurements.kept], grades)
        for label in _ranking_runs(run.axes, run.weights)
    }
    tried = [_fusion_figures(figures, candidate) for candidate in FUSION_CANDIDATES]
    weights = choose_fusion(_current_fusion(figures, run.weights), tried)
    floors = choose_floors(
        [m.critical for m in measurements.kept],
        [m.critical for m in measurements.cut],
        run.axes,
        weights or run.weights,
        run.current_floors(),
    )
    grounding_floor = choose_grounding_floor(
        measurements.scores, float(run.effective["grounding_floor"])
    )
    return _Choice(figures, tried, weights, floors, grounding_floor)


def _report(
    run: _Run,
    measurements: _Measurements,
    choice: _Choice,
    kept: Sequence[Sequence[str]],
    cut: Sequence[Sequence[str]],
) -> EvaluationReport:
    current = _current(run, measurements)
    recommendation = _recommendation(run, measurements, choice, current.settings, (kept, cut))
    return EvaluationReport(
        counts=Counts(
            questions=len(run.golden.questions),
            off_topic=len(run.off_topic),
            off_topic_source=run.source,
            missing_documents=measurements.missing,
            grounding_answers=len(measurements.scores.supported),
        ),
        channels={name: choice.figures[name] for name in ("dense", "keyword", "fused")},
        fusion=choice.tried,
        current=current,
        recommendation=recommendation,
        curves=curves(
            [m.critical for m in measurements.kept],
            [m.critical for m in measurements.cut],
            run.axes,
            recommendation.settings.fusion,
            choice.floors.floors,
        ),
        grounding_curve=grounding_curve(measurements.scores),
        target=Abstention(answerable=ANSWERABLE_ABSTENTION_MAX, off_topic=OFF_TOPIC_ABSTENTION_MIN),
        seconds=0.0,
    )


def _current(run: _Run, measurements: _Measurements) -> Outcome:
    """What the KB's settings in force do on the golden set."""
    settings = KbSettings(
        score_threshold=float(run.effective["score_threshold"]),
        keyword_floor=float(run.effective["keyword_floor"]),
        grounding_floor=float(run.effective["grounding_floor"]),
        fusion=run.weights,
        top_k=int(run.effective["top_k"]),
    )
    kept, cut = measurements.kept, measurements.cut
    return Outcome(
        settings=settings,
        predicted=Abstention(
            answerable=abstention([m.critical for m in kept], run.effective, run.weights, run.axes),
            off_topic=abstention([m.critical for m in cut], run.effective, run.weights, run.axes),
        ),
        measured=_measured([m.current for m in kept], [m.current for m in cut]),
        ndcg_10=_ndcg([m.current for m in kept], run.golden),
        grounding=grounding_flags(measurements.scores, settings.grounding_floor),
    )


def _recommendation(
    run: _Run,
    measurements: _Measurements,
    choice: _Choice,
    current: KbSettings,
    verified: tuple[Sequence[Sequence[str]], Sequence[Sequence[str]]],
) -> Recommendation:
    """The recommended settings and what the turn did with them (`verified`: what it
    returned for each answerable and each off-topic question)."""
    settings = KbSettings(
        score_threshold=choice.floors.floors["score_threshold"],
        keyword_floor=choice.floors.floors["keyword_floor"],
        grounding_floor=choice.grounding_floor,
        fusion=choice.weights or run.weights,
        top_k=current.top_k,
    )
    measured = _measured(*verified)
    return Recommendation(
        settings=settings,
        predicted=Abstention(
            answerable=choice.floors.answerable, off_topic=choice.floors.off_topic
        ),
        measured=measured,
        ndcg_10=_ndcg(verified[0], run.golden),
        grounding=grounding_flags(measurements.scores, choice.grounding_floor),
        changes=_changes(current, settings, choice.weights is not None, run.kb.line is not None),
        meets_target=measured.answerable <= ANSWERABLE_ABSTENTION_MAX
        and measured.off_topic >= OFF_TOPIC_ABSTENTION_MIN,
        cautions=cautions(choice.floors.floors, off_topic_questions=len(run.off_topic)),
    )


def _ndcg(rankings: Sequence[Sequence[str]], golden: GoldenSet) -> float:
    grades = [question.graded() for question in golden.questions]
    return mean([ndcg_at(r, g, 10) for r, g in zip(rankings, grades, strict=True)])


async def _strict(store: SettingsStore, principal: Principal) -> bool:
    """The workspace's strict isolation, as a turn resolves it."""
    workspace = await store.get_workspace(principal.tenant_id)
    settings = workspace.settings if workspace else None
    created_at = workspace.created_at if workspace else ""
    return resolve_strict_isolation(settings, created_at).value


def _off_topic(golden: GoldenSet) -> tuple[list[str], Literal["golden_set", "built_in"]]:
    if golden.off_topic:
        return list(golden.off_topic), "golden_set"
    return list(off_topic_questions()), "built_in"


def _embed(embedder: Embedder, texts: Sequence[str], stop: Stop) -> list[Embedding]:
    """Every question embedded as a turn embeds it, a batch per model call."""
    found: list[Embedding] = []
    for start in range(0, len(texts), _EMBED_BATCH):
        stop_point(stop)
        found.extend(embedder.embed_queries(list(texts[start : start + _EMBED_BATCH])))
    return found


def _ranking_runs(axes: Sequence[FloorAxis], weights: Weights) -> dict[str, dict[str, Any]]:
    """Ranking run label -> KB settings: each channel alone, the KB's weights ("fused")
    and each candidate pair of weights, every floor at its lowest."""
    floors = lowest_floors(axes)
    runs = {
        label: {**floors, "fusion": msgspec.structs.asdict(channel)}
        for label, channel in _CHANNELS.items()
    }
    runs["fused"] = {**floors, "fusion": msgspec.structs.asdict(weights)}
    for candidate in FUSION_CANDIDATES:
        runs[_fusion_label(candidate)] = {**floors, "fusion": msgspec.structs.asdict(candidate)}
    return runs


def _fusion_label(weights: Weights) -> str:
    return f"fusion:{weights.dense}:{weights.keyword}"


def _figures(rankings: Sequence[Sequence[str]], grades: Sequence[Mapping[str, int]]) -> Figures:
    pairs = list(zip(rankings, grades, strict=True))
    return Figures(
        ndcg_10=mean([ndcg_at(r, g, 10) for r, g in pairs]),
        recall_10=mean([recall_at(r, g, 10) for r, g in pairs]),
        recall_100=mean([recall_at(r, g, RANKING_DEPTH) for r, g in pairs]),
    )


def _fusion_figures(figures: Mapping[str, Figures], weights: Weights) -> FusionFigures:
    found = figures[_fusion_label(weights)]
    return FusionFigures(
        weights=weights,
        ndcg_10=found.ndcg_10,
        recall_10=found.recall_10,
        recall_100=found.recall_100,
    )


def _current_fusion(figures: Mapping[str, Figures], weights: Weights) -> FusionFigures:
    found = figures["fused"]
    return FusionFigures(
        weights=weights,
        ndcg_10=found.ndcg_10,
        recall_10=found.recall_10,
        recall_100=found.recall_100,
    )


def _grounding_scores(scored: Sequence[ScoredAnswers | None]) -> GroundingScores:
    answers = [found for found in scored if found is not None]
    return GroundingScores(
        supported=[a.supported for a in answers if a.supported is not None],
        other_domain=[a.other_domain for a in answers if a.other_domain is not None],
        mixed=[a.mixed for a in answers if a.mixed is not None],
    )


def _missing_documents(kb: KbUnderTest, golden: GoldenSet, stop: Stop) -> int:
    """Expected document ids the KB does not hold, in the caller's Scope."""
    stop_point(stop)
    plan = kb.plan({})
    held = kb.index.document_ids(plan.collection, plan.scope)
    expected = {document for question in golden.questions for document in question.document_ids}
    return len(expected - held)


async def _verify(run: _Run, embedding: Embedding, settings: Mapping[str, Any]) -> list[str]:
    """One question through the turn with the recommended settings: what it returns."""
    documents = await run.pool.run(partial(run_with, run.kb, embedding, settings))
    await run.steps.step("verifying")
    return documents


def _measured(kept: Sequence[Sequence[str]], cut: Sequence[Sequence[str]]) -> Abstention:
    """The share of each set of questions whose turn returned nothing."""
    return Abstention(
        answerable=mean([float(not documents) for documents in kept]),
        off_topic=mean([float(not documents) for documents in cut]),
    )


def _changes(
    current: KbSettings, recommended: KbSettings, fusion_changed: bool, measured: bool
) -> dict[str, float | Weights]:
    """The recommended settings that differ from those in force, and `score_threshold`
    whenever the KB's measured off-topic line is in force (`measured`): applying pins the
    floor the evaluation chose, which the line would otherwise move with the KB."""
    changes: dict[str, float | Weights] = {}
    for name in ("score_threshold", "keyword_floor", "grounding_floor"):
        value = getattr(recommended, name)
        if value != getattr(current, name) or (measured and name == "score_threshold"):
            changes[name] = value
    if fusion_changed:
        changes["fusion"] = recommended.fusion
    return changes
