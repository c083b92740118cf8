"""A KB of technical text that everyday questions barely reach weighs its keyword channel as
its dense one; prose, however small, keeps the platform's weights."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

import msgspec
import pytest

from gateway.access.auth import Principal
from gateway.retrieval.answering import answers
from gateway.retrieval.kb_plan import IDENTIFIER_SHARE, LOW_REACH, KbPlan
from gateway.retrieval.legs import DOCUMENT_KEYWORD_SHARE, leg_weights
from gateway.retrieval.off_topic_line import LINE_LOWEST, lines_from_best
from gateway.retrieval.plan import (
    LOW_REACH_DOCUMENT_SHARE,
    plan_knowledge_base,
    with_measured_lines,
    with_reach,
)
from ingest.index import Index, Leg, LegKind, RankedPoint, SparseVector
from ingest.keyword_terms import identifier_share
from ingest.payload import PassageRef
from settings.config import load_config
from settings.golden import MeasuredLines
from settings.records import KnowledgeBase, Role
from settings.resolve import measured_score_threshold

#: a share of technical text (Debian's changelogs measure 0.13 to 0.15)
TECHNICAL = 0.14
PRINCIPAL = Principal(key_id="k", roles=frozenset({Role.ADMIN}), org_id="o", tenant_id="t")


def _plan(tmp_path: Path, settings: dict[str, object] | None = None) -> KbPlan:
    config = load_config({"KBGATE_DATA_DIR": str(tmp_path)})
    kb = KnowledgeBase(kb_id="kb", tenant_id="t", org_id="o", storage="shared")
    if settings:
        kb = KnowledgeBase(
            kb_id="kb", tenant_id="t", org_id="o", storage="shared", settings=settings
        )
    return plan_knowledge_base(config, PRINCIPAL, kb, None, False)


def _legs() -> list[Leg]:
    sparse = SparseVector((1,), (1.0,))
    return [
        Leg(kind=LegKind.DENSE, dense=(1.0,), limit=10),
        Leg(kind=LegKind.KEYWORD, sparse=sparse, limit=10),
        Leg(kind=LegKind.DOCUMENT_KEYWORD, sparse=sparse, limit=10),
    ]


def test_the_reach_is_the_dense_line_before_its_bounds() -> None:
    """Six topics whose probes reach 0.32 at most: the dense line stays at its floor, the
    reach says 0.32."""
    best = [(f"topic{n}", 0.32 - n * 0.01, 0.0) for n in range(10)]
    lines = lines_from_best(best)
    assert lines.dense == LINE_LOWEST
    assert lines.reach is not None
    assert abs(lines.reach - 0.27) < 1e-9


def test_a_kb_of_low_reach_weighs_both_channels_alike(tmp_path: Path) -> None:
    """Under the platform's fusion, a reach below `LOW_REACH` in technical text gives the
    keyword channel the dense channel's weight and both keyword legs half of it."""
    plan = with_reach(_plan(tmp_path), LOW_REACH - 0.04, TECHNICAL)
    weights = leg_weights(plan, _legs())
    assert weights[LegKind.DENSE] == plan.dense_weight
    assert plan.keyword_weight == plan.dense_weight
    assert weights[LegKind.DOCUMENT_KEYWORD] == plan.keyword_weight * LOW_REACH_DOCUMENT_SHARE
    assert weights[LegKind.KEYWORD] == plan.keyword_weight * (1 - LOW_REACH_DOCUMENT_SHARE)


def test_a_kb_of_prose_reach_keeps_the_platform_weights(tmp_path: Path) -> None:
    """A reach at `LOW_REACH` or above, or none measured, leaves the platform's weights."""
    plan = _plan(tmp_path)
    for reach in (LOW_REACH, 0.55, None):
        kept = with_reach(plan, reach, TECHNICAL)
        assert not kept.low_reach
        assert kept.keyword_weight == plan.keyword_weight
        weights = leg_weights(kept, _legs())
        assert weights[LegKind.DOCUMENT_KEYWORD] == plan.keyword_weight * DOCUMENT_KEYWORD_SHARE


def test_prose_of_low_reach_keeps_the_platform_weights(tmp_path: Path) -> None:
    """A small prose KB measures a reach as low as changelogs do (TREC's 544-passage
    subset 0.33); below `IDENTIFIER_SHARE`, or with no share measured, its weights stay."""
    plan = _plan(tmp_path)
    for identifiers in (IDENTIFIER_SHARE - 0.01, 0.02, None):
        kept = with_reach(plan, 0.3, identifiers)
        assert not kept.low_reach
        assert kept.keyword_weight == plan.keyword_weight


def test_the_identifier_share_tells_changelogs_from_prose() -> None:
    """Words in options, versions, bug numbers and dotted or camel names count; prose
    holds few of them."""
    changelog = (
        "openssh (1:9.6p1-3) unstable; urgency=medium\n"
        "  * Fix CVE-2023-51385 in ssh_config's ProxyCommand expansion (closes: #1059393).\n"
        "  * Set RequiredRSASize=2048 by default; see sshd_config(5)."
    )
    prose = (
        "The study followed four hundred patients for two years and found that early "
        "treatment reduced the risk of relapse by about a third."
    )
    assert identifier_share([changelog]) >= IDENTIFIER_SHARE
    assert identifier_share([prose]) < IDENTIFIER_SHARE / 4
    assert identifier_share([]) == 0.0


def test_a_kb_that_sets_its_fusion_keeps_it_whatever_its_reach(tmp_path: Path) -> None:
    """The KB's own `fusion` setting is never replaced."""
    plan = _plan(tmp_path, {"fusion": {"dense": 1.0, "keyword": 0.2}})
    assert not plan.platform_fusion
    low = with_reach(plan, 0.1, TECHNICAL)
    assert low.low_reach
    assert (low.dense_weight, low.keyword_weight) == (1.0, 0.2)
    assert low.document_keyword_share is None


def test_the_reach_is_kept_with_the_lines_and_old_records_read_without_it() -> None:
    """`MeasuredLines` stores the reach and the identifier share; a record kept before
    they existed reads both as None (the platform's weights)."""
    kept = MeasuredLines(
        tenant_id="t",
        kb_id="kb",
        scope="s",
        dense=0.4,
        joint=0.45,
        points=10,
        measured_at="2026-12-06T00:00:00+00:00",
        reach=0.31,
        identifiers=0.14,
    )
    again = msgspec.json.decode(msgspec.json.encode(kept), type=MeasuredLines)
    assert (again.reach, again.identifiers) == (0.31, 0.14)
    fields = msgspec.to_builtins(kept)
    del fields["reach"], fields["identifiers"]
    old = msgspec.json.decode(msgspec.json.encode(fields), type=MeasuredLines)
    assert (old.reach, old.identifiers) == (None, None)


class _CountingIndex:
    """The one Index call the unknown-words rule makes, counted; every word lacked."""

    def __init__(self) -> None:
        self.idf_calls = 0

    async def keyword_idf(
        self, collection: str, scope: object, legs: Sequence[Leg]
    ) -> list[list[float]]:
        self.idf_calls += 1
        return [[5.0] * len(leg.sparse.indices if leg.sparse else ()) for leg in legs]


async def _close_question_answers(tmp_path: Path, reach: float) -> tuple[bool, int]:
    config = load_config({"KBGATE_DATA_DIR": str(tmp_path)})
    plan = with_reach(_plan(tmp_path), reach, TECHNICAL)
    plan = with_measured_lines(plan, measured_score_threshold(0.42, config.bounds), 0.5)
    ref = PassageRef(
        knowledge_base_id="kb", document_id="d", document_version="v", passage_index=0,
        indexed_at="t",
    )  # fmt: skip
    legs = _legs()[:2]
    hits: list[list[RankedPoint]] = [[RankedPoint("p", 0.45, ref)], []]
    index = _CountingIndex()
    answered = await answers(cast(Index, index), plan, legs, hits)
    return answered, index.idf_calls


@pytest.mark.anyio
async def test_a_close_question_asks_the_kbs_words_only_under_a_low_reach(tmp_path: Path) -> None:
    """A best cosine just past the line: in a KB of prose reach it answers with no engine
    call; in a KB of low reach the KB's words are read (one `keyword_idf` call), and a
    question whose words it lacks is not answered by its dense passages."""
    assert await _close_question_answers(tmp_path, 0.5) == (True, 0)
    assert await _close_question_answers(tmp_path, 0.3) == (False, 1)
