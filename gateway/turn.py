"""The retrieval turn (DESIGN.md section 5), orchestration only.

Principal -> settings through the cache -> KB cap -> per-KB limits and Scope ->
one embedding batch -> every KB ranked concurrently (dense and keyword legs per
variation, reading only where each hit belongs) -> newest document versions ->
fusion -> per-KB and overall top_k -> the chosen passages' payloads -> abstain or
fence, record and answer. The rules live in
`settings.resolve`, `gateway.fusion` and `gateway.evidence`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from gateway.auth import Principal
from gateway.errors import DependencyUnavailableError, InvalidInputError, NotFoundError
from gateway.evidence import EvidenceBlock, fence
from gateway.fusion import Candidate, RankedLeg, cap_per_knowledge_base, fuse
from gateway.redaction import count_redactions, redact_texts_cached
from gateway.services import Services
from ingest.embedding import Embedding
from ingest.index import (
    Hit,
    IndexUnavailableError,
    Leg,
    LegKind,
    RankedPoint,
    RankResult,
    collection_for,
)
from ingest.payload import PassagePayload, Scope
from ingest.sync import newest_versions
from settings.records import Agent, KnowledgeBase, TurnPassage, TurnRecord, Workspace
from settings.resolve import (
    Resolved,
    resolve_fusion,
    resolve_kb_cap,
    resolve_keyword_floor,
    resolve_pii_entities,
    resolve_redaction,
    resolve_score_threshold,
    resolve_strict_isolation,
    resolve_top_k,
)
from settings.store import StoreUnavailableError

T = TypeVar("T")
P = ParamSpec("P")

_CHARS_PER_TOKEN = 4
#: Of a KB's keyword weight, the part its whole-document BM25 leg gets (the passage leg
#: gets the rest). Chosen on SciFact's tune half: a document's words spread over its
#: passages, which a passage leg alone misses (README, "Retrieval quality").
DOCUMENT_KEYWORD_SHARE = 0.5
#: Passages each leg ranks per passage the KB may return (`top_k`), at least
#: `LEG_DEPTH_MIN` and at most `leg_limit`. Fusion rarely reaches deeper: on SciFact a
#: `top_k` 8 turn at depth 40 scores hybrid nDCG@10 0.7095 against 0.7097 at 100, and the
#: ranking call takes about 2 ms less (README, "Benchmarks").
LEG_DEPTH_PER_RESULT = 5
LEG_DEPTH_MIN = 20
_TITLE = "\x1ftitle:"  # key prefix for titles redacted alongside passage texts


@dataclass(frozen=True, slots=True)
class KbPlan:
    """One KB's part of a turn: where, under which Scope, with which limits."""

    kb: KnowledgeBase
    scope: Scope
    #: where the KB's passages live (`collection_for` its storage and org)
    collection: str
    top_k: Resolved[int]
    score_threshold: Resolved[float]
    keyword_floor: float
    dense_weight: float
    keyword_weight: float


@dataclass(slots=True)
class TurnContext:
    """What the settings say for this principal and agent (shared with grounding)."""

    principal: Principal
    agent: Agent
    workspace: Workspace | None
    plans: list[KbPlan]
    skipped: list[str]
    strict: Resolved[bool]
    redaction: Resolved[bool]
    cap: Resolved[int]


@dataclass(slots=True)
class TurnResult:
    turn_id: str
    abstained: bool
    candidates: list[Candidate[Hit]]
    texts: dict[str, str]
    context: str
    effective: dict[str, Any]
    reason: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)


def validate_question(services: Services, question: str, variations: Sequence[str]) -> None:
    limit = services.config.max_question_chars
    if not question.strip():
        raise InvalidInputError("must not be empty", field="question")
    if len(question) > limit:
        raise InvalidInputError(f"must be at most {limit} characters", field="question")
    if len(variations) > services.config.bounds.max_variations:
        raise InvalidInputError(
            f"at most {services.config.bounds.max_variations} variations", field="variations"
        )
    for variation in variations:
        if not variation.strip() or len(variation) > limit:
            raise InvalidInputError(
                f"each variation must be 1..{limit} characters", field="variations"
            )


async def plan_turn(services: Services, principal: Principal, agent_id: str) -> TurnContext:
    """Load settings through the cache and decide which KBs are queried under which Scope."""
    agent = await services.settings.agent(principal.tenant_id, agent_id)
    if agent is None:
        raise NotFoundError("no such agent")
    workspace = await _workspace_or_none(services, principal.tenant_id)
    workspace_settings = workspace.settings if workspace else None
    bounds, defaults = services.config.bounds, services.config.defaults
    cap = resolve_kb_cap(workspace_settings, bounds, defaults)
    strict = resolve_strict_isolation(workspace_settings, workspace.created_at if workspace else "")
    redaction = resolve_redaction(workspace_settings, agent.settings)
    plans: list[KbPlan] = []
    for kb_id in agent.knowledge_base_ids[: cap.value]:
        kb = await services.settings.knowledge_base(principal.tenant_id, kb_id)
        if kb is None:
            continue  # detached since: nothing to search, and nothing to reveal
        fusion = resolve_fusion(kb.settings).value
        plans.append(
            KbPlan(
                kb=kb,
                scope=Scope.of(
                    org_id=principal.org_id,
                    tenant_id=principal.tenant_id,
                    kb_ids=[kb.kb_id],
                    clearance=principal.clearance,
                    strict=strict.value,
                ),
                collection=collection_for(kb.storage, kb.org_id),
                top_k=resolve_top_k(kb.settings, agent.settings, bounds, defaults),
                score_threshold=resolve_score_threshold(
                    kb.settings, agent.settings, bounds, defaults
                ),
                keyword_floor=resolve_keyword_floor(kb.settings, defaults).value,
                dense_weight=fusion.dense,
                keyword_weight=fusion.keyword,
            )
        )
    return TurnContext(
        principal=principal,
        agent=agent,
        workspace=workspace,
        plans=plans,
        skipped=agent.knowledge_base_ids[cap.value :],
        strict=strict,
        redaction=redaction,
        cap=cap,
    )


async def _workspace_or_none(services: Services, tenant_id: str) -> Workspace | None:
    """The workspace, or None when it cannot be read: the rules then fall back safely."""
    try:
        return await services.settings.workspace(tenant_id)
    except StoreUnavailableError:
        services.telemetry.count("settings_fallback")
        return None


async def embed_queries(services: Services, tenant_id: str, texts: list[str]) -> list[Embedding]:
    """Off the event loop, bounded in time: through the tenant's cache, batched with
    concurrent turns' questions (`ingest.query_embedding`)."""
    try:
        async with asyncio.timeout(services.config.embed_timeout_s):
            return await services.query_embeddings.embed(tenant_id, texts)
    except (TimeoutError, RuntimeError, ValueError) as error:
        raise DependencyUnavailableError("embedder") from error


async def search_plans(
    services: Services,
    plans: Sequence[KbPlan],
    embeddings: Sequence[Embedding],
    *,
    leg_limit: int,
) -> list[RankedLeg[RankedPoint]]:
    """Rank every KB concurrently; all or nothing (no partial answers across KBs)."""

    def rank(plan: KbPlan) -> tuple[list[Leg], RankResult]:
        document_keywords = services.index.document_keywords(plan.collection)
        legs = legs_for(plan, embeddings, leg_limit, document_keywords=document_keywords)
        return legs, services.index.rank(plan.collection, plan.scope, legs)

    async def one(plan: KbPlan) -> list[RankedLeg[RankedPoint]]:
        timeout_s = services.config.qdrant_timeout_s
        legs, result = await call_index(services.index.holds_the_gil, timeout_s, rank, plan)
        hits = _current_only([list(found) for found in result.legs])
        weights = leg_weights(plan, legs)
        return [
            RankedLeg(plan.kb.kb_id, leg.kind, weights[leg.kind], found)
            for leg, found in zip(legs, hits, strict=True)
        ]

    try:
        per_kb = await _concurrently([one(plan) for plan in plans])
    except (TimeoutError, IndexUnavailableError) as error:
        raise DependencyUnavailableError("index") from error
    return [leg for legs in per_kb for leg in legs]


async def fetch_chosen(
    services: Services, plans: Sequence[KbPlan], chosen: Sequence[Candidate[RankedPoint]]
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
        return await call_index(
            services.index.holds_the_gil,
            services.config.qdrant_timeout_s,
            services.index.fetch,
            plan.collection,
            plan.scope,
            point_ids,
        )

    try:
        found = await _concurrently([one(kb, ids) for kb, ids in wanted.items()])
    except (TimeoutError, IndexUnavailableError) as error:
        raise DependencyUnavailableError("index") from error
    payloads = {point_id: payload for part in found for point_id, payload in part.items()}
    return [
        candidate.with_hit(
            Hit(candidate.point_id, candidate.hit.score, payloads[candidate.point_id])
        )
        for candidate in chosen
        if candidate.point_id in payloads
    ]


async def call_index(
    holds_the_gil: bool, timeout_s: float, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """One index call: directly when the engine holds the GIL throughout (`Index`; a worker
    thread would add two hops and no concurrency), else in a worker thread, `timeout_s`
    at most."""
    if holds_the_gil:
        return call(*args, **kwargs)
    async with asyncio.timeout(timeout_s):
        return await asyncio.to_thread(call, *args, **kwargs)


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
    """Per question: a dense leg and the keyword legs of the KB's non-zero channels; the
    whole-document keyword leg where the collection stores its vectors. Each ranks
    `leg_depth` passages."""
    depth = leg_depth(plan.top_k.value, leg_limit)
    legs: list[Leg] = []
    for embedding in embeddings:
        if plan.dense_weight > 0:
            legs.append(
                Leg(
                    kind=LegKind.DENSE,
                    dense=embedding.dense,
                    limit=depth,
                    floor=plan.score_threshold.value,
                )
            )
        if plan.keyword_weight > 0 and embedding.sparse.indices:
            kinds = [LegKind.KEYWORD, *([LegKind.DOCUMENT_KEYWORD] if document_keywords else [])]
            legs.extend(
                Leg(kind=kind, sparse=embedding.sparse, limit=depth, floor=plan.keyword_floor)
                for kind in kinds
            )
    return legs


def leg_depth(top_k: int, leg_limit: int) -> int:
    """Passages per leg for a KB that returns `top_k`: enough for fusion, capped at `leg_limit`."""
    return min(leg_limit, max(LEG_DEPTH_MIN, LEG_DEPTH_PER_RESULT * top_k))


def leg_weights(plan: KbPlan, legs: Sequence[Leg]) -> dict[LegKind, float]:
    """The KB's channel weights per leg kind: the keyword weight is shared between the
    passage and whole-document legs when both run (`DOCUMENT_KEYWORD_SHARE`)."""
    documents = any(leg.kind is LegKind.DOCUMENT_KEYWORD for leg in legs)
    share = DOCUMENT_KEYWORD_SHARE if documents else 0.0
    return {
        LegKind.DENSE: plan.dense_weight,
        LegKind.KEYWORD: plan.keyword_weight * (1 - share),
        LegKind.DOCUMENT_KEYWORD: plan.keyword_weight * share,
    }


async def retrieve(
    services: Services,
    principal: Principal,
    agent_id: str,
    question: str,
    variations: Sequence[str],
) -> TurnResult:
    """Run one retrieval turn for the principal's agent, counted while it runs
    (`gateway.inflight`)."""
    with services.turns.running():
        validate_question(services, question, variations)
        timings: dict[str, float] = {}
        started = time.perf_counter()
        context = await plan_turn(services, principal, agent_id)
        turn_id = "turn_" + secrets.token_urlsafe(16)
        effective = {**_effective(context), "fusion_method": str(services.config.fusion_method)}
        if not context.plans:
            services.telemetry.count("turns_abstained")
            return TurnResult(turn_id, True, [], {}, "", effective, reason="no_knowledge_base")
        timings["plan"] = _ms_since(started)

        mark = time.perf_counter()
        embeddings = await embed_queries(services, principal.tenant_id, [question, *variations])
        timings["embed"] = _ms_since(mark)

        mark = time.perf_counter()
        legs = await search_plans(
            services, context.plans, embeddings, leg_limit=services.config.leg_limit
        )
        timings["search"] = _ms_since(mark)

        mark = time.perf_counter()
        fused = fuse(
            legs,
            method=services.config.fusion_method,
            passages_per_document=services.config.passages_per_document,
        )
        limits = {plan.kb.kb_id: plan.top_k.value for plan in context.plans}
        ranked = cap_per_knowledge_base(fused, limits, overall=max(limits.values()))
        timings["fuse"] = _ms_since(mark)

        mark = time.perf_counter()
        chosen = await fetch_chosen(services, context.plans, ranked)
        timings["fetch"] = _ms_since(mark)

        texts = {c.point_id: c.hit.payload.text for c in chosen}
        titles = {c.point_id: c.hit.payload.title for c in chosen}
        _count(services, context, legs=legs, fused=fused, chosen=chosen)
        if not chosen:
            services.telemetry.count("turns_abstained")
            return TurnResult(
                turn_id,
                True,
                [],
                {},
                "",
                effective,
                reason="nothing_above_floors",
                timings_ms=timings,
            )

        # PII redaction (issue 6): what is fenced, recorded and returned is the redacted text
        if context.redaction.value:
            mark = time.perf_counter()
            texts, titles = await _redacted(services, context, texts, titles)
            timings["redact"] = _ms_since(mark)

        mark = time.perf_counter()
        blocks = [
            EvidenceBlock(
                c.point_id, c.hit.payload.document_id, texts[c.point_id], titles.get(c.point_id, "")
            )
            for c in chosen
        ]
        await _record(services, principal, agent_id, turn_id, chosen=chosen, texts=texts)
        timings["record"] = _ms_since(mark)
        timings["total"] = _ms_since(started)
        for stage, value in timings.items():
            services.telemetry.observe_stage(f"turn_{stage}", value / 1000)
        return TurnResult(
            turn_id,
            False,
            chosen,
            texts,
            fence(blocks),
            effective,
            timings_ms=timings,
            titles=titles,
        )


async def _redacted(
    services: Services, context: TurnContext, texts: dict[str, str], titles: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The passages' texts and titles with the workspace's PII entity types redacted,
    through the per-workspace cache; fails closed (503) when redaction fails."""
    entities = resolve_pii_entities(context.workspace.settings if context.workspace else None)
    outgoing = {**texts, **{_TITLE + key: title for key, title in titles.items() if title}}
    try:
        redacted, counts = await asyncio.to_thread(
            redact_texts_cached,
            services.redactor,
            services.redaction_cache,
            context.principal.tenant_id,
            outgoing,
            entities.value,
        )
    except Exception as error:
        # Fail closed: text that could not be redacted is never returned.
        raise DependencyUnavailableError("redactor") from error
    count_redactions(services.telemetry, counts)
    return (
        {key: redacted[key] for key in texts},
        {key: redacted.get(_TITLE + key, title) for key, title in titles.items()},
    )


async def _record(
    services: Services,
    principal: Principal,
    agent_id: str,
    turn_id: str,
    *,
    chosen: Sequence[Candidate[Hit]],
    texts: dict[str, str],
) -> None:
    record = TurnRecord(
        turn_id=turn_id,
        tenant_id=principal.tenant_id,
        agent_id=agent_id,
        created_at=datetime.now(UTC).isoformat(),
        passages=[
            TurnPassage(
                passage_id=c.point_id,
                document_id=c.hit.payload.document_id,
                knowledge_base_id=c.hit.payload.knowledge_base_id,
                checksum=c.hit.payload.checksum,
                text=texts[c.point_id],
            )
            for c in chosen
        ],
    )
    try:
        await services.store.put_turn(record, services.config.turn_ttl_s)
    except StoreUnavailableError:
        # The evidence is still good; only later citation checks of this turn will
        # answer 404. Counted, never hidden.
        services.telemetry.count("turn_record_failed")


def _effective(context: TurnContext) -> dict[str, Any]:
    """The settings in force, which level set each, and whether a bound changed any."""
    plans = context.plans
    lead = max(plans, key=lambda p: p.top_k.value) if plans else None
    per_kb = {
        plan.kb.kb_id: {
            "top_k": plan.top_k.value,
            "score_threshold": plan.score_threshold.value,
            "keyword_floor": plan.keyword_floor,
            "fusion": {"dense": plan.dense_weight, "keyword": plan.keyword_weight},
            "sources": {"top_k": plan.top_k.source, "score_threshold": plan.score_threshold.source},
            "clamped": {
                "top_k": plan.top_k.clamped,
                "score_threshold": plan.score_threshold.clamped,
            },
        }
        for plan in plans
    }
    clamped = {
        "top_k": any(p.top_k.clamped for p in plans),
        "score_threshold": any(p.score_threshold.clamped for p in plans),
        "max_knowledge_bases_per_agent": context.cap.clamped,
    }
    return {
        "top_k": lead.top_k.value if lead else None,
        "score_threshold": lead.score_threshold.value if lead else None,
        "sources": {
            "top_k": lead.top_k.source if lead else "platform",
            "score_threshold": lead.score_threshold.source if lead else "platform",
        },
        "clamped": clamped if any(clamped.values()) else False,
        "knowledge_bases_queried": [plan.kb.kb_id for plan in plans],
        "knowledge_bases_skipped": list(context.skipped),
        "max_knowledge_bases_per_agent": context.cap.value,
        "strict_isolation": context.strict.value,
        "redaction": context.redaction.value,
        "per_knowledge_base": per_kb,
    }


def _count(
    services: Services,
    context: TurnContext,
    *,
    legs: Sequence[RankedLeg[RankedPoint]],
    fused: Sequence[Candidate[RankedPoint]],
    chosen: Sequence[Candidate[Hit]],
) -> None:
    """Counts only: KBs, candidates per leg kind, passages and estimated tokens."""
    telemetry = services.telemetry
    telemetry.count("turns")
    telemetry.count("turn_knowledge_bases_queried", len(context.plans))
    telemetry.count("turn_knowledge_bases_skipped", len(context.skipped))
    for kind in LegKind:
        telemetry.count(
            f"turn_candidates_{kind.value}", sum(len(leg.hits) for leg in legs if leg.kind is kind)
        )
    telemetry.count("turn_passages_returned", len(chosen))
    telemetry.count(
        "turn_tokens_returned", sum(len(c.hit.payload.text) for c in chosen) // _CHARS_PER_TOKEN
    )
    telemetry.count("turn_documents_considered", len(fused))


def _ms_since(mark: float) -> float:
    return round((time.perf_counter() - mark) * 1000, 2)
