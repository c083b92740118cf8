"""Fusion over documents: score-normalised (default) and weighted RRF (k = 60); weights,
per-document grouping, no fused floors, caps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.retrieval.fusion import (
    DEFAULT_FUSION,
    DISTINCT_HITS,
    RRF_K,
    Candidate,
    RankedLeg,
    cap_per_knowledge_base,
    fuse,
)
from gateway.retrieval.legs import leg_depth
from ingest.index import Hit, LegKind
from ingest.payload import PassagePayload
from settings.config import FusionMethod

DENSE, KEYWORD = LegKind.DENSE, LegKind.KEYWORD
RRF, SCORE = FusionMethod.RRF, FusionMethod.SCORE


def hit(doc: str, passage: int = 0, score: float = 0.5, kb: str = "kb") -> Hit:
    return Hit(
        point_id=f"{kb}/{doc}#{passage}",
        score=score,
        payload=PassagePayload(
            tenant_id="t",
            knowledge_base_id=kb,
            document_id=doc,
            document_version="v1",
            passage_index=passage,
            classification="internal",
            text=f"{doc} passage {passage}",
            title="",
            source="",
            checksum="c",
            indexed_at="2026-01-01T00:00:00+00:00",
            org_id="o",
        ),
    )


def leg(kind: LegKind, *hits: Hit, weight: float = 1.0, kb: str = "kb") -> RankedLeg[Hit]:
    return RankedLeg(kb_id=kb, kind=kind, weight=weight, hits=list(hits))


def docs(candidates: list[Candidate[Hit]]) -> list[str]:
    return [c.hit.payload.document_id for c in candidates]


def test_k_is_60_and_scores_are_reciprocal_ranks() -> None:
    """A document's fused score is the sum over legs of weight / (60 + rank)."""
    assert RRF_K == 60
    fused = fuse([leg(DENSE, hit("a"), hit("b")), leg(KEYWORD, hit("b"), hit("a"))], method=RRF)
    scores = {c.hit.payload.document_id: c.score for c in fused}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)


def test_weights_scale_each_channel() -> None:
    """Per-KB channel weights multiply each leg's contribution; a weight of 0 drops the leg."""
    legs = [leg(DENSE, hit("a"), hit("b"), weight=2.0), leg(KEYWORD, hit("b"), hit("a"))]
    fused = fuse(legs, method=RRF)
    assert docs(fused) == ["a", "b"]
    assert fused[0].score == pytest.approx(2 / 61 + 1 / 62)
    only_dense = fuse([leg(DENSE, hit("a")), leg(KEYWORD, hit("b"), weight=0.0)])
    assert docs(only_dense) == ["a"]
    assert only_dense[0].keyword_score is None


def test_a_document_counts_once_per_leg_at_its_best_passage() -> None:
    """Within a leg, a document's rank is that of its best passage among distinct documents,
    so a long document with many passages does not outvote a short one."""
    long_doc = [hit("long", i) for i in range(5)]
    fused = fuse(
        [leg(DENSE, *long_doc, hit("short")), leg(KEYWORD, hit("short"), *long_doc)], method=RRF
    )
    scores = {c.hit.payload.document_id: c.score for c in fused}
    # each document is rank 1 in one leg and rank 2 in the other, whatever its passages
    assert scores["long"] == pytest.approx(scores["short"])
    assert scores["short"] == pytest.approx(1 / 61 + 1 / 62)


def test_each_document_is_represented_by_its_strongest_passages() -> None:
    """By default one passage per document (the one with the best passage-level RRF);
    passages_per_document=2 keeps the two best, the document's order unchanged."""
    legs = [
        leg(DENSE, hit("a", 2), hit("a", 0), hit("b", 0)),
        leg(KEYWORD, hit("a", 0), hit("b", 0), hit("a", 2)),
    ]
    one = fuse(legs)
    assert [c.point_id for c in one] == ["kb/a#0", "kb/b#0"]
    two = fuse(legs, passages_per_document=2)
    assert [c.point_id for c in two] == ["kb/a#0", "kb/a#2", "kb/b#0"]


def test_channel_scores_are_kept_beside_the_fused_score() -> None:
    """Each passage carries its best raw cosine and BM25 score, for the answer."""
    fused = fuse([leg(DENSE, hit("a", score=0.61)), leg(KEYWORD, hit("a", score=7.5))])
    assert fused[0].dense_score == pytest.approx(0.61)
    assert fused[0].keyword_score == pytest.approx(7.5)


def test_floors_never_apply_to_fused_scores() -> None:
    """Floors cut each leg's raw scores before fusion (in the engine); fusion keeps every
    document any leg returned, however weak its raw scores or small its fused score."""
    weak = [hit(f"d{i}", score=0.001) for i in range(30)]
    fused = fuse([leg(KEYWORD, *weak)], method=RRF)
    assert len(fused) == 30
    assert all(c.score > 0 for c in fused)
    assert fused[-1].score == pytest.approx(1 / (RRF_K + 30))


def test_documents_from_several_knowledge_bases_fuse_together() -> None:
    """Legs of different KBs fuse into one list; the same document id in two KBs stays two
    documents."""
    fused = fuse([leg(DENSE, hit("a", kb="k1"), kb="k1"), leg(DENSE, hit("a", kb="k2"), kb="k2")])
    assert {c.document_key for c in fused} == {("k1", "a"), ("k2", "a")}


def test_order_is_deterministic_on_ties() -> None:
    """Equal fused scores are ordered by passage score, then by point id."""
    legs = [leg(DENSE, hit("b")), leg(KEYWORD, hit("a"))]
    assert docs(fuse(legs)) == docs(fuse(list(reversed(legs)))) == ["a", "b"]


def test_caps_per_knowledge_base_then_overall() -> None:
    """Each KB keeps its best `top_k` documents, then the best `overall` of all, in order."""
    fused = fuse(
        [
            leg(DENSE, hit("a", kb="k1"), hit("b", kb="k1"), hit("c", kb="k1"), kb="k1"),
            leg(DENSE, hit("x", kb="k2"), hit("y", kb="k2"), kb="k2"),
        ],
        method=RRF,
    )
    kept = cap_per_knowledge_base(fused, {"k1": 2, "k2": 1}, overall=5)
    assert [c.document_key for c in kept] == [("k1", "a"), ("k2", "x"), ("k1", "b")]
    assert len(cap_per_knowledge_base(fused, {"k1": 3, "k2": 2}, overall=2)) == 2
    assert cap_per_knowledge_base(fused, {}, overall=5) == []


def test_caps_count_documents_not_passages() -> None:
    """With several passages per document, a cap counts documents."""
    fused = fuse([leg(DENSE, hit("a", 0), hit("a", 1), hit("b", 0))], passages_per_document=2)
    kept = cap_per_knowledge_base(fused, {"kb": 1}, overall=1)
    assert [c.point_id for c in kept] == ["kb/a#0", "kb/a#1"]


def test_scores_are_normalised_to_each_legs_best_by_default() -> None:
    """Under the default score fusion each leg's raw scores are divided by its best, so a
    cosine and a BM25 score weigh alike; a document's score sums weight * normalised."""
    assert DEFAULT_FUSION is SCORE
    fused = fuse(
        [
            leg(DENSE, hit("a", score=0.8), hit("b", score=0.4)),
            leg(KEYWORD, hit("b", score=20.0), hit("a", score=15.0), weight=2.0),
        ]
    )
    scores = {c.hit.payload.document_id: c.score for c in fused}
    assert scores["a"] == pytest.approx(1.0 + 2.0 * 0.75)
    assert scores["b"] == pytest.approx(0.5 + 2.0 * 1.0)
    assert docs(fused) == ["a", "b"]


def test_a_document_a_leg_missed_counts_as_that_legs_last_hit() -> None:
    """A document one leg did not return scores there as the leg's weakest returned hit
    (the most it could have had), not zero, so depth cut-offs do not bury it."""
    fused = fuse(
        [
            leg(DENSE, hit("a", score=0.9), hit("b", score=0.45)),
            leg(KEYWORD, hit("b", score=10.0), hit("c", score=5.0)),
        ]
    )
    scores = {c.hit.payload.document_id: c.score for c in fused}
    assert scores["a"] == pytest.approx(1.0 + 0.5)  # keyword missed it: its last hit, 5/10
    assert scores["c"] == pytest.approx(0.5 + 0.5)  # dense missed it: its last hit, .45/.9
    assert scores["b"] == pytest.approx(0.5 + 1.0)


def test_a_loosely_matching_channel_moves_the_order_little() -> None:
    """When one channel scores every document nearly alike (BM25 on a long argumentative
    question), score fusion keeps the other channel's order; rank fusion lets the flat
    channel's arbitrary order overturn it."""
    dense = leg(DENSE, hit("a", score=0.8), hit("b", score=0.5), hit("c", score=0.3))
    flat = leg(KEYWORD, hit("c", score=10.2), hit("b", score=10.1), hit("a", score=10.0))
    assert docs(fuse([dense, flat])) == ["a", "b", "c"]
    assert docs(fuse([dense, flat], method=RRF)) != ["a", "b", "c"]


def test_negative_cosines_count_as_zero() -> None:
    """A negative similarity is no evidence, not negative evidence: it normalises to 0."""
    fused = fuse([leg(DENSE, hit("a", score=0.5), hit("b", score=-0.2))])
    assert {c.hit.payload.document_id: c.score for c in fused} == {"a": 1.0, "b": 0.0}


def test_a_legs_missing_documents_are_those_of_its_own_knowledge_base() -> None:
    """The stand-in for a missed document applies within the leg's KB only: a KB's
    documents never gain from another KB's legs."""
    fused = fuse(
        [
            leg(DENSE, hit("a", score=0.9, kb="k1"), hit("b", score=0.3, kb="k1"), kb="k1"),
            leg(KEYWORD, hit("b", score=8.0, kb="k1"), kb="k1"),
            leg(DENSE, hit("x", score=0.6, kb="k2"), kb="k2"),
        ]
    )
    scores = {c.document_key: c.score for c in fused}
    assert scores[("k2", "x")] == pytest.approx(1.0)
    assert scores[("k1", "a")] == pytest.approx(1.0 + 1.0)
    assert scores[("k1", "b")] == pytest.approx(1 / 3 + 1.0)


def test_passage_choice_follows_the_fusion_method() -> None:
    """Within a document the passage with the best fused passage score represents it."""
    legs = [
        leg(DENSE, hit("a", 1, score=0.9), hit("a", 0, score=0.85)),
        leg(KEYWORD, hit("a", 0, score=12.0), hit("a", 1, score=3.0)),
    ]
    assert [c.point_id for c in fuse(legs)] == ["kb/a#0"]


def test_a_whole_document_leg_scores_documents_not_passages() -> None:
    """A document keyword hit (a document's first passage) adds to its document's score,
    but the passage that represents the document is still chosen by the passage legs, and
    the passage's own keyword score is not replaced by the whole document's."""
    passage_legs = [
        leg(DENSE, hit("a", 2, score=0.9), hit("b", 0, score=0.85)),
        leg(KEYWORD, hit("a", 2, score=4.0), hit("b", 0, score=5.0), weight=0.5),
    ]
    without = fuse(passage_legs)
    assert docs(without) == ["b", "a"]

    whole = leg(LegKind.DOCUMENT_KEYWORD, hit("a", 0, score=9.0), hit("b", 0, score=3.0))
    fused = fuse([*passage_legs, replace(whole, weight=0.5)])
    assert docs(fused) == ["a", "b"]
    assert fused[0].hit.payload.passage_index == 2
    assert fused[0].keyword_score == 4.0


def test_a_document_only_the_whole_document_leg_found_is_represented_by_its_first_passage() -> None:
    """A document whose words are spread over passages that no passage leg returned is
    still a candidate, represented by the passage that carries its whole-document vector."""
    fused = fuse(
        [
            leg(DENSE, hit("a", 1, score=0.9), hit("c", 0, score=0.5)),
            leg(LegKind.DOCUMENT_KEYWORD, hit("b", 0, score=6.0), hit("a", 0, score=2.0)),
        ]
    )
    assert {c.hit.payload.document_id: c.hit.payload.passage_index for c in fused} == {
        "a": 1,
        "b": 0,
        "c": 0,
    }
    assert all(c.keyword_score is None for c in fused)


def _ranked(rank: int) -> str:
    """A document's name by its keyword rank; names sort against the ranks, so an order
    that fell back on ids would show."""
    return f"n{99 - rank}"


def _long_keyword_leg(kind: LegKind = KEYWORD, kb: str = "kb", count: int = 50) -> RankedLeg[Hit]:
    """`count` documents, BM25 falling by 1 a rank from 100."""
    return leg(kind, *(hit(_ranked(rank), score=100.0 - rank, kb=kb) for rank in range(count)))


def test_beside_a_dense_leg_keyword_hits_past_the_distinct_ones_count_as_the_last_of_them() -> None:
    """Keyword ranks 61 and 65 sit past the 60th hit: their BM25 (39 and 35) no longer
    tells them apart, so the dense leg's order (65 closer) decides; both stay candidates."""
    assert DISTINCT_HITS == 60
    r61, r65 = _ranked(61), _ranked(65)
    dense = leg(DENSE, hit("top", score=1.0), hit(r65, score=0.55), hit(r61, score=0.50))
    for kind in (KEYWORD, LegKind.DOCUMENT_KEYWORD):
        fused = fuse([dense, _long_keyword_leg(kind, count=80)])
        order = docs(fused)
        assert order.index(r65) < order.index(r61)
        assert len(order) == 81
        by_doc = {c.hit.payload.document_id: c.score for c in fused}
        # rank 61's keyword part is the 60th hit's (41 / 100), not its own 39 / 100
        assert by_doc[r61] == pytest.approx(0.50 + 0.41)
        # within the 60 its own BM25; missed by the dense leg, it counts as its last hit
        assert by_doc[_ranked(1)] == pytest.approx(0.50 + 0.99)


def test_beside_a_keyword_leg_dense_hits_past_the_distinct_ones_count_as_the_last_of_them() -> None:
    """The same holds the other way: past its 60th hit a dense leg's cosines (0.28 for
    rank 62, 0.25 for rank 65) no longer tell documents apart, so the keyword leg's order
    (65 a little above 62) decides; within the 60, the cosine still counts."""
    dense = leg(DENSE, *(hit(f"d{rank:02}", score=0.9 - rank / 100) for rank in range(70)))
    keyword = leg(KEYWORD, hit("d65", score=10.0), hit("d62", score=9.8), hit("x", score=1.0))
    order = docs(fuse([dense, keyword]))
    assert order.index("d65") < order.index("d62")
    assert order.index("d00") < order.index("d01")


def test_a_keyword_only_knowledge_base_keeps_its_whole_bm25_order() -> None:
    """Without a dense leg in the KB nothing else orders the keyword tail: every one of the
    50 keyword hits keeps its own score and place, even beside another KB's dense leg."""
    other_kb_dense = leg(DENSE, hit("elsewhere", score=0.9, kb="other"), kb="other")
    fused = fuse([_long_keyword_leg(), other_kb_dense])
    order = [doc for doc in docs(fused) if doc != "elsewhere"]
    assert order == [_ranked(rank) for rank in range(50)]


def test_rank_fusion_keeps_every_keyword_rank() -> None:
    """Under RRF a keyword hit past the 40th still counts at its own rank."""
    dense = leg(DENSE, hit("top", score=1.0))
    fused = fuse([dense, _long_keyword_leg()], method=RRF)
    by_doc = {c.hit.payload.document_id: c.score for c in fused}
    assert by_doc[_ranked(41)] == pytest.approx(1 / (RRF_K + 42))
    assert by_doc[_ranked(45)] == pytest.approx(1 / (RRF_K + 46))


@pytest.mark.parametrize(
    ("top_k", "leg_limit", "depth"),
    [(1, 100, 20), (4, 100, 20), (8, 100, 40), (20, 100, 100), (50, 100, 100), (8, 30, 30)],
)
def test_leg_depth_is_five_per_result_within_the_limit(
    top_k: int, leg_limit: int, depth: int
) -> None:
    """Each leg ranks 5 passages per passage the KB returns, at least 20, at most leg_limit."""
    assert leg_depth(top_k, leg_limit) == depth


def test_a_document_an_exhaustive_keyword_leg_missed_counts_nothing_there() -> None:
    """A keyword leg that found fewer passages than it asked for returned every passage
    holding the question's words: the others score 0 on it, not its last hit's score.
    The one passage holding a bug number then leads documents the dense leg ranks above
    it (a dense leg that knows nothing of "#1110254")."""
    dense = leg(DENSE, hit("a", score=0.30), hit("b", score=0.29), hit("fix", score=0.24))
    found = leg(KEYWORD, hit("fix", score=9.0), weight=0.4)
    assert docs(fuse([dense, replace(found, exhaustive=True)]))[0] == "fix"
    # the same leg cut at its limit: a missed document may have scored up to its last hit
    assert docs(fuse([dense, found]))[0] == "a"


def test_an_exhaustive_leg_past_its_distinct_hits_counts_a_miss_as_its_tail() -> None:
    """A keyword leg that found fewer passages than it asked for but more than
    `DISTINCT_HITS` (a prose question's common words in a small KB): its hits past the
    60th all count as the 60th, and so does a document it missed. Counting the miss 0
    would put every passage holding one common word above the dense leg's better
    passage (TREC's 544-passage subset lost 0.02 nDCG@10 so)."""
    dense = leg(DENSE, hit("miss", score=0.30), hit("weak", score=0.29))
    tail = [hit(f"k{n}", score=10.0 - n * 0.1) for n in range(DISTINCT_HITS + 9)]
    found = leg(KEYWORD, *tail, hit("weak", score=3.0), weight=0.4)
    order = docs(fuse([dense, replace(found, exhaustive=True)]))
    assert order.index("miss") < order.index("weak")
