"""Whether a KB answers a question: its floors on the best cosine, on the best keyword
hits (their share of the attainable score, `ingest.keyword_scale`, and the question's words
they hold) and, under measured lines, on the cosine and the share together, and on the
question's words the KB lacks.

Rules over a KB's ranked legs (the IDFs and the best hits' terms read through the Index
port when needed), shared by the turn's legs and the off-topic lines' measurement
(`gateway.retrieval.off_topic_line`), which draws its joint line on the same `joint_score`
the turn reaches it with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.retrieval.kb_plan import KbPlan
from ingest.index import Index, Leg, LegKind, RankedPoint, SparseVector
from ingest.keyword_scale import attainable_keyword_score, relative_keyword_score
from ingest.keyword_terms import is_own_word
from ingest.payload import Scope

#: what a best keyword share (0..1) adds to a best cosine in `joint_score`
JOINT_KEYWORD_WEIGHT = 0.2
#: the share of a question's words, each weighted by its IDF, a keyword hit must hold to
#: answer for its KB: a question's few rare words all in one passage, not several of its
#: common ones
WORDS_HELD = 0.9
#: Under measured lines in a KB of low reach (`KbPlan.low_reach`), a question whose best
#: cosine passes the dense line by less than this answers through its dense passages only
#: if the KB holds its words (`UNKNOWN_WORDS_SHARE`): a question about a product the KB
#: never names comes this close in a KB of the same kind of text ("How do I configure
#: nginx..." among changelogs)
UNKNOWN_WORDS_MARGIN = 0.1
#: the share of a question's words, each weighted by its IDF, that no passage of the Scope
#: may hold for such a question still to be answered by its dense passages
UNKNOWN_WORDS_SHARE = 0.25
#: A term id no BM25 word has (fastembed's are below 2**31): no point holds it, so its
#: IDF over a Scope is that of a word the Scope lacks
UNHELD_TERM = 2**32 - 1


def joint_score(cosine: float, keyword_share: float) -> float:
    """What the joint line is drawn on: a best cosine (0 when no passage reached the dense
    floor) plus a part of the best keyword share."""
    return cosine + JOINT_KEYWORD_WEIGHT * keyword_share


def keyword_legs(sparse: SparseVector, limit: int, *, document_keywords: bool) -> list[Leg]:
    """The keyword legs of a question: passages, and whole documents where the collection
    stores their vectors."""
    if not sparse.indices:
        return []
    kinds = [LegKind.KEYWORD, *([LegKind.DOCUMENT_KEYWORD] if document_keywords else [])]
    return [Leg(kind=kind, sparse=sparse, limit=limit) for kind in kinds]


def keyword_share(score: float, leg: Leg, idf: Sequence[float]) -> float:
    """A keyword leg's BM25 score as a share of the most a passage could score on it: the
    scale of `keyword_floor` (`ingest.keyword_scale.relative_keyword_score`), from the
    IDFs `Index.keyword_idf` gives for the leg's question."""
    weights = leg.sparse.values if leg.sparse is not None else ()
    return relative_keyword_score(score, attainable_keyword_score(idf, weights))


@dataclass(frozen=True, slots=True)
class KeywordBest:
    """A keyword leg's best hit, with the IDFs of the leg's question terms over the Scope
    and the hit's keyword share."""

    leg: Leg
    hit: RankedPoint
    idf: tuple[float, ...]
    share: float


async def keyword_bests(
    index: Index, collection: str, scope: Scope, found: Sequence[tuple[Leg, Sequence[RankedPoint]]]
) -> list[KeywordBest]:
    """Each keyword leg's best hit with its share (none for a leg that found nothing): one
    engine call for the IDFs, made only when a keyword leg found something."""
    keyword = [
        (leg, max(hits, key=lambda hit: hit.score))
        for leg, hits in found
        if leg.kind is not LegKind.DENSE and hits
    ]
    if not keyword:
        return []
    idf = await index.keyword_idf(collection, scope, [leg for leg, _ in keyword])
    return [
        KeywordBest(leg, hit, tuple(term_idf), keyword_share(hit.score, leg, term_idf))
        for (leg, hit), term_idf in zip(keyword, idf, strict=True)
    ]


def words_held(leg: Leg, idf: Sequence[float], terms: frozenset[int]) -> float:
    """The share of the leg's question, each of its own words weighted by its IDF, that a
    point holding `terms` holds (0 for a question with no weight). What
    `ingest.keyword_terms` added to the question does not count: its words are the parts."""
    own = _own_words(leg, idf)
    total = sum(weight for _, weight in own)
    held = sum(weight for term, weight in own if term in terms)
    return held / total if total > 0 else 0.0


def _own_words(leg: Leg, idf: Sequence[float]) -> list[tuple[int, float]]:
    """The leg's question words (not what the keyword analysis added), each with its IDF."""
    if leg.sparse is None:
        return []
    sparse = leg.sparse
    return [
        (term, term_idf)
        for term, weight, term_idf in zip(sparse.indices, sparse.values, idf, strict=True)
        if is_own_word(weight)
    ]


async def unknown_words(index: Index, collection: str, scope: Scope, legs: Sequence[Leg]) -> float:
    """The share of the question's own words, each weighted by its IDF over the Scope,
    that no passage of the Scope holds (0 with no keyword leg): one engine call, for the
    IDFs of the first passage leg's terms and of `UNHELD_TERM`."""
    leg = next((leg for leg in legs if leg.kind is LegKind.KEYWORD and leg.sparse), None)
    if leg is None or leg.sparse is None:
        return 0.0
    sparse = leg.sparse
    probe = Leg(
        kind=LegKind.KEYWORD,
        sparse=SparseVector((*sparse.indices, UNHELD_TERM), (*sparse.values, 0.0)),
        limit=1,
    )
    (idf,) = await index.keyword_idf(collection, scope, [probe])
    *terms, unheld = idf
    own = _own_words(leg, terms)
    total = sum(weight for _, weight in own)
    lacked = sum(weight for _, weight in own if weight >= unheld)
    return lacked / total if total > 0 else 0.0


async def holds_the_words(
    index: Index, collection: str, scope: Scope, bests: Sequence[KeywordBest]
) -> bool:
    """Whether one of these best hits holds `WORDS_HELD` of its question's words (the
    passage's terms on the passage leg, the whole document's on the document leg): one
    engine call to read them."""
    if not bests:
        return False
    held = await index.held_terms(collection, scope, [best.hit.point_id for best in bests])
    for best in bests:
        terms = held.get(best.hit.point_id)
        if terms is None:
            continue
        own = terms.passage if best.leg.kind is LegKind.KEYWORD else terms.document
        if words_held(best.leg, best.idf, own) >= WORDS_HELD:
            return True
    return False


async def answers(
    index: Index, plan: KbPlan, legs: Sequence[Leg], hits: Sequence[Sequence[RankedPoint]]
) -> bool:
    """Whether the KB answers, and all its legs' hits are candidates: when its best dense
    passage reaches `score_threshold`; or when a keyword leg's best hit reaches
    `keyword_floor` of the question's attainable score and holds `WORDS_HELD` of the
    question's words; or, under measured lines, when the best cosine and the best keyword
    share together reach the joint line (`joint_score`). Under measured lines in a KB of
    low reach (`KbPlan.low_reach`) a best cosine within `UNKNOWN_WORDS_MARGIN` of the line
    answers only while the KB lacks less than `UNKNOWN_WORDS_SHARE` of the question's
    words; else only the keyword test may.
    The IDFs and the best hits' terms are one more engine call each, made only when the
    dense floor was not reached or was by that little."""
    found = list(zip(legs, hits, strict=True))
    dense = [hit.score for leg, leg_hits in found if leg.kind is LegKind.DENSE for hit in leg_hits]
    cosine = max(dense, default=0.0)
    line = plan.score_threshold.value
    if dense and cosine >= line:
        near = (
            plan.joint_line is not None and plan.low_reach and cosine < line + UNKNOWN_WORDS_MARGIN
        )
        if not near or await unknown_words(index, plan.collection, plan.scope, legs) < (
            UNKNOWN_WORDS_SHARE
        ):
            return True
        return await _keywords_answer(index, plan, found, joint=False)
    return await _keywords_answer(index, plan, found, cosine=cosine, joint=True)


async def _keywords_answer(
    index: Index,
    plan: KbPlan,
    found: Sequence[tuple[Leg, Sequence[RankedPoint]]],
    *,
    cosine: float = 0.0,
    joint: bool,
) -> bool:
    """Whether the keyword legs answer (with the best cosine, under the joint line when
    `joint`)."""
    if not any(leg_hits for leg, leg_hits in found if leg.kind is not LegKind.DENSE):
        return False
    if plan.keyword_floor <= 0:
        return True
    bests = await keyword_bests(index, plan.collection, plan.scope, found)
    share = max((best.share for best in bests), default=0.0)
    if joint and plan.joint_line is not None and joint_score(cosine, share) >= plan.joint_line:
        return True
    strong = [best for best in bests if best.share >= plan.keyword_floor]
    return await holds_the_words(index, plan.collection, plan.scope, strong)
