"""A turn's legs: one embedding batch for the question and its variations, then per
knowledge base a dense leg and keyword legs ranked in its own Scope, only the newest
version of each document kept, and the chosen passages' payloads read back, copies of a
better-ranked passage left out.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from gateway.errors import DependencyUnavailableError
from gateway.retrieval.answering import answers, keyword_legs
from gateway.retrieval.diversity import without_copies
from gateway.retrieval.fusion import Candidate, RankedLeg, cap_per_knowledge_base
from gateway.retrieval.kb_plan import KbPlan
from gateway.retrieval.query_embedding import (
    OtherModelQuestions,
    PendingEmbeddings,
    QueryEmbeddings,
)
from gateway.retrieval.versions import newest_versions
from gateway.telemetry import Telemetry
from ingest.embedder.embedding import Embedding
from ingest.index import (
    Hit,
    Index,
    IndexUnavailableError,
    Leg,
    LegKind,
    RankedPoint,
    RankResult,
)
from ingest.payload import PassagePayload
from settings.config import Config

T = TypeVar("T")
#: Something of one KB ranked in its Scope (index calls).
PlanRanking = Callable[["Search", KbPlan, Sequence[Embedding], int], Coroutine[Any, Any, T]]

#: Of a KB's keyword weight, the part its whole-document BM25 leg gets (the passage leg
#: gets the rest): a document's words spread over its passages, which a passage leg alone
#: misses. Chosen with the weights on three golden sets (docs/decisions/fusion-and-floors.md).
DOCUMENT_KEYWORD_SHARE = 0.75
#: How far past a KB's `top_k` a turn reads to fill the places of dropped copies.
COPY_RESERVE = 3
#: Passages each leg ranks per passage the KB may return (`top_k`), at least
#: `LEG_DEPTH_MIN` and at most `leg_limit`. Fusion rarely reaches deeper: on SciFact a
#: `top_k` 8 turn at depth 40 scores hybrid nDCG@10 0.7095 against 0.7097 at 100, and the
#: ranking call takes about 2 ms less (docs/benchmarks.md).
LEG_DEPTH_PER_RESULT = 5
LEG_DEPTH_MIN = 20


@dataclass(frozen=True, slots=True)
class Search:
    """What ranking a turn's legs uses: the index, its calls bounded by the config's
    timeouts, and counts."""

    index: Index
    telemetry: Telemetry
    config: Config


async def embed_queries(
    questions: QueryEmbeddings, timeout_s: float, tenant_id: str, texts: list[str]
) -> list[Embedding]:
    """Off the event loop, bounded in time (`timeout_s`), through the tenant's cache
    (`gateway.retrieval.query_embedding`)."""
    try:
        async with asyncio.timeout(timeout_s):
            return await questions.embed(tenant_id, texts)
    except (TimeoutError, RuntimeError, ValueError) as error:
        raise DependencyUnavailableError("embedder") from error


async def with_question_vectors(
    others: OtherModelQuestions | None,
    timeout_s: float,
    tenant_id: str,
    texts: list[str],
    plans: Sequence[KbPlan],
) -> list[KbPlan]:
    """The plans, each KB answering from another model than the deployment's given the
    question's vectors by that model: one embedding per model in use, whatever the number
    of KBs using it. Bounded in time (`timeout_s`); 503 `embedder` when it fails."""
    models = sorted({plan.dense_model for plan in plans if plan.dense_model})
    if not models:
        return list(plans)
    if others is None:
        raise DependencyUnavailableError("embedder")
    try:
        async with asyncio.timeout(timeout_s):
            found = await asyncio.gather(*(others.dense(tenant_id, m, texts) for m in models))
    except (TimeoutError, RuntimeError, ValueError) as error:
        raise DependencyUnavailableError("embedder") from error
    vectors = dict(zip(models, found, strict=True))
    return [
        dataclasses.replace(plan, question_dense=tuple(vectors[plan.dense_model]))
        if plan.dense_model
        else plan
        for plan in plans
    ]


async def search_plans(
    search: Search,
    plans: Sequence[KbPlan],
    embeddings: Sequence[Embedding],
    *,
    leg_limit: int,
) -> list[RankedLeg[RankedPoint]]:
    """Rank every KB concurrently; all or nothing (no partial answers across KBs)."""
    per_kb = await _per_plan(search, plans, _plan_ranked, embeddings, leg_limit)
    return [leg for legs in per_kb for leg in legs]


async def rank_plan(
    search: Search, plan: KbPlan, embeddings: Sequence[Embedding], *, leg_limit: int
) -> list[RankedLeg[RankedPoint]]:
    """One KB's legs ranked in its Scope (one engine call; one more for the keyword floor's
    scale when no dense passage reached `score_threshold`: `answers`), newest document
    versions only, each with its channel weight."""
    document_keywords = await _documents(search, plan)
    legs = legs_for(plan, embeddings, leg_limit, document_keywords=document_keywords)
    return await _weighed(search, plan, legs, await _ranked(search, plan, legs))


async def _ranked(search: Search, plan: KbPlan, legs: Sequence[Leg]) -> list[list[RankedPoint]]:
    """Each leg's hits in the KB's Scope: one engine call."""
    if not legs:
        return []
    with search.telemetry.tracing.span("turn.search.kb", legs=len(legs)):
        result: RankResult = await search.index.rank(plan.collection, plan.scope, legs)
    if result.exact_checks:
        search.telemetry.count("dense_exact_checks", result.exact_checks)
    return [list(found) for found in result.legs]


async def _weighed(
    search: Search, plan: KbPlan, legs: Sequence[Leg], found: list[list[RankedPoint]]
) -> list[RankedLeg[RankedPoint]]:
    """The KB's ranked legs: newest versions only, nothing unless the KB answers (`answers`),
    each with its channel weight; a keyword leg that found fewer passages than it asked
    for is exhaustive (`RankedLeg.exhaustive`)."""
    hits = _current_only(found)
    if not await answers(search.index, plan, legs, hits):
        hits = [[] for _ in legs]
    weights = leg_weights(plan, legs)
    return [
        RankedLeg(
            plan.kb.kb_id,
            leg.kind,
            weights[leg.kind],
            kept,
            exhaustive=leg.kind is not LegKind.DENSE and len(raw) < leg.limit,
        )
        for leg, kept, raw in zip(legs, hits, found, strict=True)
    ]


async def search_while_embedding(
    search: Search,
    plans: Sequence[KbPlan],
    pending: PendingEmbeddings,
    *,
    leg_limit: int,
    embedded: Callable[[], None] = lambda: None,
) -> list[RankedLeg[RankedPoint]]:
    """Every KB's ranked legs, as `search_plans` ranks them for the pending embeddings
    (`embedded` is called once they are known). When the model is to run in this thread
    (`pending.here`), the KBs' keyword legs are ranked meanwhile from the BM25 vectors
    (their engine calls handed to the index's workers before the model runs), and the
    dense legs after."""
    if not pending.here:
        embeddings = await _embedded(search, pending)
        embedded()
        return await search_plans(search, plans, embeddings, leg_limit=leg_limit)
    search.telemetry.count("turn_embedded_in_place")
    sparse = [Embedding((), vector) for vector in pending.sparse]
    documents = await _index_answers([_documents(search, plan) for plan in plans])
    keyword = asyncio.ensure_future(
        _index_answers(
            [
                _keyword_ranked(search, plan, sparse, leg_limit, document_keywords=known)
                for plan, known in zip(plans, documents, strict=True)
            ]
        )
    )
    # The keyword calls reach the index's workers before the model's run below holds this
    # thread without yielding to the loop: one pass of the loop starts the task, a second
    # the tasks it gathers (one per KB).
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    try:
        embeddings = await _embedded(search, pending)
    except BaseException:
        keyword.cancel()
        raise
    early = await keyword
    embedded()
    late = await _per_plan(search, plans, _dense_ranked, embeddings, leg_limit)
    legs = [
        await _merged(search, plan, kb_legs, keyword_hits, dense_hits)
        for plan, keyword_hits, (kb_legs, dense_hits) in zip(plans, early, late, strict=True)
    ]
    return [leg for kb_legs in legs for leg in kb_legs]


async def _keyword_ranked(
    search: Search,
    plan: KbPlan,
    embeddings: Sequence[Embedding],
    leg_limit: int,
    *,
    document_keywords: bool,
) -> list[list[RankedPoint]]:
    legs = legs_for(plan, embeddings, leg_limit, document_keywords=document_keywords)
    return await _ranked(search, plan, [leg for leg in legs if leg.kind is not LegKind.DENSE])


async def _dense_ranked(
    search: Search, plan: KbPlan, embeddings: Sequence[Embedding], leg_limit: int
) -> tuple[list[Leg], list[list[RankedPoint]]]:
    """All the KB's legs (`legs_for`'s order) and the hits of its dense ones."""
    document_keywords = await _documents(search, plan)
    legs = legs_for(plan, embeddings, leg_limit, document_keywords=document_keywords)
    return legs, await _ranked(search, plan, [leg for leg in legs if leg.kind is LegKind.DENSE])


async def _merged(
    search: Search,
    plan: KbPlan,
    legs: Sequence[Leg],
    keyword: list[list[RankedPoint]],
    dense: list[list[RankedPoint]],
) -> list[RankedLeg[RankedPoint]]:
    """The KB's legs (`legs_for`'s order), each with the hits of the call that ranked it."""
    calls = {True: iter(dense), False: iter(keyword)}
    found = [next(calls[leg.kind is LegKind.DENSE]) for leg in legs]
    return await _weighed(search, plan, legs, found)


async def _embedded(search: Search, pending: PendingEmbeddings) -> list[Embedding]:
    """The pending embeddings, bounded in time (`embed_queries`)."""
    try:
        async with asyncio.timeout(search.config.embed_timeout_s):
            return await pending.embeddings()
    except (TimeoutError, RuntimeError, ValueError) as error:
        raise DependencyUnavailableError("embedder") from error


async def _per_plan(
    search: Search,
    plans: Sequence[KbPlan],
    rank: PlanRanking[T],
    embeddings: Sequence[Embedding],
    leg_limit: int,
) -> list[T]:
    """`rank` for every KB, all or nothing (`_index_answers`)."""
    return await _index_answers([rank(search, plan, embeddings, leg_limit) for plan in plans])


async def _index_answers(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """All the calls' results, in order, or 503: an index that failed or missed its
    deadline (`IndexUnavailableError`) answers the turn `DependencyUnavailableError`."""
    try:
        return await _concurrently(calls)
    except IndexUnavailableError as error:
        raise DependencyUnavailableError("index") from error


async def _plan_ranked(
    search: Search, plan: KbPlan, embeddings: Sequence[Embedding], leg_limit: int
) -> list[RankedLeg[RankedPoint]]:
    return await rank_plan(search, plan, embeddings, leg_limit=leg_limit)


async def _documents(search: Search, plan: KbPlan) -> bool:
    return await search.index.document_keywords(plan.collection)


async def fetch_chosen(
    search: Search, plans: Sequence[KbPlan], chosen: Sequence[Candidate[RankedPoint]]
) -> list[Candidate[Hit]]:
    """The chosen passages with their payloads, read inside each KB's own Scope.

    A passage deleted since it was ranked is dropped; like the ranking, all or nothing.
    """
    by_kb = {plan.kb.kb_id: plan for plan in plans}
    wanted: dict[str, list[str]] = {}
    for candidate in chosen:
        wanted.setdefault(candidate.document_key[0], []).append(candidate.point_id)

    async def one(kb_id: str, point_ids: list[str]) -> dict[str, PassagePayload]:
        plan = by_kb[kb_id]
        return await search.index.fetch(plan.collection, plan.scope, point_ids)

    found = await _index_answers([one(kb, ids) for kb, ids in wanted.items()])
    payloads = {point_id: payload for part in found for point_id, payload in part.items()}
    return [
        candidate.with_hit(
            Hit(candidate.point_id, candidate.hit.score, payloads[candidate.point_id])
        )
        for candidate in chosen
        if candidate.point_id in payloads
    ]


async def fetch_distinct(
    search: Search,
    plans: Sequence[KbPlan],
    fused: Sequence[Candidate[RankedPoint]],
    limits: Mapping[str, int],
) -> tuple[list[Candidate[Hit]], int]:
    """The passages a turn returns, read back: the best `limits[kb]` of each KB and the
    best of all, as `cap_per_knowledge_base` keeps them, with copies and near-copies of
    a better-ranked one dropped where the KB's `drop_copies` is on
    (`gateway.retrieval.diversity`); and how many were.

    The places copies leave are filled from the next fused candidates, read in one more
    call (up to `COPY_RESERVE` times the limits in all); a turn whose candidates are
    mostly copies of each other returns fewer passages."""
    overall = max(limits.values())
    considered = cap_per_knowledge_base(fused, dict(limits), overall)
    read = await fetch_chosen(search, plans, considered)
    dropping = {plan.kb.kb_id for plan in plans if plan.drop_copies}
    if not dropping:
        return read, 0

    def may_drop(candidate: Candidate[Hit]) -> bool:
        return candidate.document_key[0] in dropping

    distinct, dropped = without_copies(read, _passage_text, may_drop)
    if not dropped:
        return distinct, 0
    wider = {kb: COPY_RESERVE * limit for kb, limit in limits.items()}
    seen = {candidate.point_id for candidate in considered}
    more = [c for c in cap_per_knowledge_base(fused, wider, COPY_RESERVE * overall)
            if c.point_id not in seen]  # fmt: skip
    read += await fetch_chosen(search, plans, more)
    order = {candidate.point_id: rank for rank, candidate in enumerate(fused)}
    read.sort(key=lambda candidate: order[candidate.point_id])
    distinct, dropped = without_copies(read, _passage_text, may_drop)
    kept = cap_per_knowledge_base(distinct, dict(limits), overall)
    return kept, dropped


def _passage_text(candidate: Candidate[Hit]) -> str:
    return candidate.hit.payload.text


async def _concurrently(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """All results, in order; a lone call runs in this task (most turns search one KB)."""
    if len(calls) == 1:
        return [await calls[0]]
    return list(await asyncio.gather(*calls))


def _current_only(legs: list[list[RankedPoint]]) -> list[list[RankedPoint]]:
    """Each leg without the passages of a document's superseded version (`newest_versions`
    over all legs at once: a replacement caught midway shows in any of them)."""
    every = [hit for leg in legs for hit in leg]
    current = newest_versions(every)
    if len(current) == len(every):
        return legs
    keep = {hit.point_id for hit in current}
    return [[hit for hit in leg if hit.point_id in keep] for leg in legs]


def legs_for(
    plan: KbPlan, embeddings: Sequence[Embedding], leg_limit: int, *, document_keywords: bool
) -> list[Leg]:
    """Per question: a dense leg (on the KB's own vector set) and the keyword legs of the
    KB's non-zero channels; the whole-document keyword leg where the collection stores its
    vectors. Each ranks `leg_depth` passages."""
    depth = leg_depth(plan.top_k.value, leg_limit)
    legs: list[Leg] = []
    own = plan.question_dense
    for position, embedding in enumerate(embeddings):
        if plan.dense_weight > 0:
            legs.append(
                Leg(
                    kind=LegKind.DENSE,
                    # the KB's own model's vector of the question where it has another
                    dense=embedding.dense if own is None else own[position],
                    limit=depth,
                    floor=plan.dense_floor,
                    vector=plan.dense_vector,
                )
            )
        if plan.keyword_weight > 0:
            legs.extend(keyword_legs(embedding.sparse, depth, document_keywords=document_keywords))
    return legs


def leg_depth(top_k: int, leg_limit: int) -> int:
    """Passages per leg for a KB that returns `top_k`: enough for fusion, capped at `leg_limit`."""
    return min(leg_limit, max(LEG_DEPTH_MIN, LEG_DEPTH_PER_RESULT * top_k))


def leg_weights(plan: KbPlan, legs: Sequence[Leg]) -> dict[LegKind, float]:
    """The KB's channel weights per leg kind: the keyword weight is shared between the
    passage and whole-document legs when both run (`DOCUMENT_KEYWORD_SHARE`, unless the
    plan sets its share)."""
    documents = any(leg.kind is LegKind.DOCUMENT_KEYWORD for leg in legs)
    planned = plan.document_keyword_share
    share = (DOCUMENT_KEYWORD_SHARE if planned is None else planned) if documents else 0.0
    return {
        LegKind.DENSE: plan.dense_weight,
        LegKind.KEYWORD: plan.keyword_weight * (1 - share),
        LegKind.DOCUMENT_KEYWORD: plan.keyword_weight * share,
    }
