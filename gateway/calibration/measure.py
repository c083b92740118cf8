"""One question through the turn's own steps, under candidate settings of one KB.

The KB is planned as a turn plans it (`plan_knowledge_base`: its Scope from the caller's
key, its settings resolved against the platform's), with the candidate settings written
over its stored ones; its legs are ranked in that Scope (`rank_plan`) and fused and cut to
`top_k` as a turn does (`fused_and_capped`). Everything here blocks: an evaluation runs
it on the expensive-work pool, and stops between two engine calls once told to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from gateway.access.auth import Principal
from gateway.access.expensive import Stop, stop_point
from gateway.calibration.recommend import FloorAxis
from gateway.retrieval.fusion import RankedLeg
from gateway.retrieval.kb_plan import KbPlan
from gateway.retrieval.legs import Search, rank_plan
from gateway.retrieval.plan import plan_knowledge_base, with_measured_lines
from gateway.retrieval.turn import fused_and_capped
from ingest.embedder.embedding import Embedder, Embedding
from ingest.engines.blocking import BlockingIndex
from ingest.index import RankedPoint
from settings.records import KnowledgeBase
from settings.resolve import Resolved

#: documents a ranking run keeps (recall@100 needs 100)
RANKING_DEPTH = 100
#: passages per leg in a ranking run: a channel's leg still holds 100 distinct documents
#: when documents have several passages
RANKING_LEG_LIMIT = 300
#: how close a critical floor is found: within this share of its value (or this much)
_RELATIVE_TOLERANCE = 1e-4
_ABSOLUTE_TOLERANCE = 1e-4
_MAX_DOUBLINGS = 40


@dataclass(frozen=True, slots=True)
class KbUnderTest:
    """The KB an evaluation measures, as the caller's key sees it: ranked as a turn ranks
    it (`search`, with the platform's config), questions and answers embedded by `embedder`."""

    search: Search
    embedder: Embedder
    principal: Principal
    kb: KnowledgeBase
    strict: bool
    #: the index, for the evaluation's worker threads
    index: BlockingIndex
    #: the KB's measured off-topic line for this key, in force where no setting gives
    #: `score_threshold` (None: the platform default is)
    line: Resolved[float] | None = None
    #: its measured joint line, with `line` (`gateway.retrieval.off_topic_line`)
    joint_line: float | None = None

    def plan(self, overrides: Mapping[str, Any]) -> KbPlan:
        """The KB's plan with `overrides` written over its stored settings."""
        kb = msgspec.structs.replace(self.kb, settings={**self.kb.settings, **overrides})
        plan = plan_knowledge_base(self.search.config, self.principal, kb, None, self.strict)
        if self.line is not None and plan.score_threshold.source == "platform":
            joint = self.line.value if self.joint_line is None else self.joint_line
            plan = with_measured_lines(plan, self.line, joint)
        return plan

    def chosen(
        self, overrides: Mapping[str, Any], embedding: Embedding, *, depth: int | None = None
    ) -> tuple[list[str], list[RankedLeg[RankedPoint]]]:
        """The documents a turn with these settings returns, best first (`depth`: that many,
        whatever `top_k` says), and the legs it ranked."""
        plan = self.plan(overrides)
        leg_limit = self.search.config.leg_limit
        if depth is not None:
            plan = dataclasses.replace(plan, top_k=Resolved(depth, "knowledge_base"))
            leg_limit = max(leg_limit, RANKING_LEG_LIMIT)
        legs = self.index.run(rank_plan(self.search, plan, [embedding], leg_limit=leg_limit))
        _, kept = fused_and_capped(self.search.config, [plan], legs)
        return list(dict.fromkeys(c.document_key[1] for c in kept)), legs


@dataclass(slots=True)
class Measured:
    """One question's measurements."""

    #: ranking run label -> documents, best first
    rankings: dict[str, list[str]]
    #: floor setting -> the highest value at which its channel still answers (None: never)
    critical: dict[str, float | None]
    #: what the KB's current settings return (empty: the turn abstains)
    current: list[str]


def measure(
    kb: KbUnderTest,
    embedding: Embedding,
    axes: tuple[FloorAxis, ...],
    rankings: Mapping[str, Mapping[str, Any]],
    stop: Stop,
) -> Measured:
    """Rank the question under each of `rankings` (label -> settings) to `RANKING_DEPTH`,
    find its critical floor on each axis, and run it with the KB's current settings."""
    ranked: dict[str, list[str]] = {}
    for label, overrides in rankings.items():
        stop_point(stop)
        ranked[label], _ = kb.chosen(overrides, embedding, depth=RANKING_DEPTH)
    critical = {axis.setting: critical_floor(kb, embedding, axis, stop) for axis in axes}
    stop_point(stop)
    current, _ = kb.chosen({}, embedding)
    return Measured(ranked, critical, current)


def run_with(
    kb: KbUnderTest, embedding: Embedding, overrides: Mapping[str, Any], stop: Stop
) -> list[str]:
    """The documents a turn returns with these settings (empty: it abstains)."""
    stop_point(stop)
    documents, _ = kb.chosen(overrides, embedding)
    return documents


def critical_floor(
    kb: KbUnderTest, embedding: Embedding, axis: FloorAxis, stop: Stop
) -> float | None:
    """The highest value of the axis's setting at which the axis's channel alone still
    returns a passage for the question (None: not even at its lowest). Found by running
    the turn: first at the best raw score of the channel's legs (where a floor on raw
    scores puts it), else by bisection."""
    fusion = msgspec.structs.asdict(axis.channel)

    def answers(value: float) -> bool:
        stop_point(stop)
        found, _ = kb.chosen({"fusion": fusion, axis.setting: value}, embedding)
        return bool(found)

    stop_point(stop)
    found, legs = kb.chosen({"fusion": fusion, axis.setting: axis.lower}, embedding)
    if not found:
        return None
    hint = max((hit.score for leg in legs for hit in leg.hits), default=None)
    return _search(answers, axis, hint)


def _search(answers: Callable[[float], bool], axis: FloorAxis, hint: float | None) -> float:
    """The highest value at which `answers` holds (it holds at `axis.lower` and is
    monotone), to within the tolerance."""
    low, high = axis.lower, None
    if hint is not None and hint > low:
        if not answers(hint):
            high = hint
        elif not answers(_just_above(hint)):
            return hint
        else:
            low = hint
    if high is None:
        low, high = _bracket(answers, axis, low)
        if high is None:
            return low
    while high - low > max(_ABSOLUTE_TOLERANCE, _RELATIVE_TOLERANCE * high):
        middle = (low + high) / 2
        if answers(middle):
            low = middle
        else:
            high = middle
    return low


def _bracket(
    answers: Callable[[float], bool], axis: FloorAxis, low: float
) -> tuple[float, float | None]:
    """A value that answers and one above it that does not (None: nothing above `low`
    fails: the bound, or after doubling as far as it goes)."""
    if axis.upper is not None:
        return (axis.upper, None) if answers(axis.upper) else (low, axis.upper)
    high = max(2 * low, 1.0)
    for _ in range(_MAX_DOUBLINGS):
        if not answers(high):
            return low, high
        low, high = high, 2 * high
    return low, None


def _just_above(value: float) -> float:
    return value + max(1e-6, abs(value) * 1e-5)
