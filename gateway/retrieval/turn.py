"""The retrieval turn, orchestration only.

Principal -> plan (settings through the cache, KB cap, per-KB limits and Scope) -> one
embedding call -> every KB ranked (its keyword legs while the question is embedded),
newest document versions only -> fusion
-> per-KB and overall top_k -> the chosen passages' payloads, copies of better-ranked ones
replaced by the next -> abstain, or redact, fence, record and answer. The rules live in
`settings.resolve`, `gateway.retrieval.plan`, `gateway.retrieval.legs`,
`gateway.retrieval.fusion`, `gateway.retrieval.diversity` and `gateway.retrieval.evidence`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gateway.access.auth import Principal
from gateway.errors import InvalidInputError
from gateway.retrieval.evidence import EvidenceBlock, fence
from gateway.retrieval.fusion import Candidate, RankedLeg, cap_per_knowledge_base, fuse
from gateway.retrieval.kb_plan import KbPlan
from gateway.retrieval.legs import (
    Search,
    fetch_distinct,
    search_while_embedding,
    with_question_vectors,
)
from gateway.retrieval.plan import (
    Planning,
    TurnContext,
    effective_settings,
    plan_turn,
    with_lines,
)
from gateway.retrieval.query_embedding import (
    OtherModelQuestions,
    QueryEmbeddings,
    TurnsInFlight,
)
from gateway.safety.passages import Outgoing, PassageRedaction, redact_outgoing
from gateway.telemetry import Telemetry
from ingest.index import Hit, LegKind, RankedPoint
from settings.config import Config
from settings.effective import turn_retention
from settings.records import TurnPassage, TurnRecord
from settings.store import StoreUnavailableError, TurnRecords

_CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Retrieval:
    """What a retrieval turn uses: its plan, the question embeddings, the index's legs, the
    redaction of what it returns, the turn records, counts and the platform's config."""

    planning: Planning
    questions: QueryEmbeddings
    search: Search
    redaction: PassageRedaction
    records: TurnRecords
    telemetry: Telemetry
    config: Config
    #: questions embedded by the other models KBs answer from (None: the deployment's only)
    other_questions: OtherModelQuestions | None = None
    #: retrieval turns running now: a lone turn embeds in its own thread
    in_flight: TurnsInFlight = field(default_factory=TurnsInFlight)


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


def validate_question(config: Config, question: str, variations: Sequence[str]) -> None:
    limit = config.max_question_chars
    if not question.strip():
        raise InvalidInputError("must not be empty", field="question")
    if len(question) > limit:
        raise InvalidInputError(f"must be at most {limit} characters", field="question")
    if len(variations) > config.bounds.max_variations:
        raise InvalidInputError(
            f"at most {config.bounds.max_variations} variations", field="variations"
        )
    for variation in variations:
        if not variation.strip() or len(variation) > limit:
            raise InvalidInputError(
                f"each variation must be 1..{limit} characters", field="variations"
            )


async def retrieve(
    retrieval: Retrieval,
    principal: Principal,
    agent_id: str,
    question: str,
    variations: Sequence[str],
) -> TurnResult:
    """Run one retrieval turn for the principal's agent."""
    validate_question(retrieval.config, question, variations)
    with retrieval.in_flight.entered():
        return await _retrieve(retrieval, principal, agent_id, [question, *variations])


async def _retrieve(
    retrieval: Retrieval, principal: Principal, agent_id: str, asked: list[str]
) -> TurnResult:
    """The turn for the question and its variations (`asked`), counted `in_flight`."""
    clock = _Stopwatch()
    config, telemetry = retrieval.config, retrieval.telemetry
    context = await plan_turn(retrieval.planning, principal, agent_id)
    context.plans = await with_lines(retrieval.planning, context.plans)
    turn_id = "turn_" + secrets.token_urlsafe(16)
    effective = {
        **effective_settings(context),
        "fusion_method": str(config.fusion_method),
    }
    if not context.plans:
        return _abstained(telemetry, turn_id, effective, "no_knowledge_base", {})
    context.plans = await with_question_vectors(
        retrieval.other_questions,
        config.embed_timeout_s,
        principal.tenant_id,
        asked,
        context.plans,
    )
    clock.lap("plan")
    # a lone turn runs the model in this thread, its keyword legs searched meanwhile
    alone = retrieval.in_flight.alone
    # the deployment's model runs only for KBs answering from it; BM25 is always needed
    others_only = all(plan.dense_model for plan in context.plans)
    keywords = retrieval.questions.keywords_only(asked) if others_only else None
    pending = keywords or retrieval.questions.start(principal.tenant_id, asked, here=alone)
    legs = await search_while_embedding(
        retrieval.search,
        context.plans,
        pending,
        leg_limit=config.leg_limit,
        embedded=lambda: clock.lap("embed"),
    )
    clock.lap("search")
    fused, _ = fused_and_capped(config, context.plans, legs)
    clock.lap("fuse")
    limits = {plan.kb.kb_id: plan.top_k.value for plan in context.plans}
    chosen, copies = await fetch_distinct(retrieval.search, context.plans, fused, limits)
    telemetry.count("turn_copies_dropped", copies)
    clock.lap("fetch")
    _count(telemetry, context, legs=legs, fused=fused, chosen=chosen)
    if not chosen:
        return _abstained(telemetry, turn_id, effective, "nothing_above_floors", clock.timings)
    texts = {c.point_id: c.hit.payload.text for c in chosen}
    titles = {c.point_id: c.hit.payload.title for c in chosen}
    if context.redaction.value:
        # what is fenced, recorded and returned is the redacted text
        texts, titles = await _redacted(retrieval.redaction, context, chosen)
        clock.lap("redact")
    retention = turn_retention(context.workspace, config).value
    await _record(
        retrieval, principal, agent_id, turn_id, chosen=chosen, texts=texts, ttl_s=retention
    )
    clock.lap("record")
    clock.finish(telemetry)
    blocks = [
        EvidenceBlock(
            c.point_id, c.hit.payload.document_id, texts[c.point_id], titles.get(c.point_id, "")
        )
        for c in chosen
    ]
    return TurnResult(
        turn_id,
        False,
        chosen,
        texts,
        fence(blocks),
        effective,
        timings_ms=clock.timings,
        titles=titles,
    )


@dataclass(slots=True)
class _Stopwatch:
    """Each stage's milliseconds since the previous stage ended, and the turn's total."""

    started: float = field(default_factory=time.perf_counter)
    mark: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round((now - self.mark) * 1000, 2)
        self.mark = now

    def finish(self, telemetry: Telemetry) -> None:
        self.timings["total"] = round((time.perf_counter() - self.started) * 1000, 2)
        for stage, value in self.timings.items():
            telemetry.observe_stage(f"turn_{stage}", value / 1000)


def _abstained(
    telemetry: Telemetry,
    turn_id: str,
    effective: dict[str, Any],
    reason: str,
    timings: dict[str, float],
) -> TurnResult:
    telemetry.count("turns_abstained")
    return TurnResult(turn_id, True, [], {}, "", effective, reason=reason, timings_ms=timings)


def fused_and_capped(
    config: Config, plans: Sequence[KbPlan], legs: Sequence[RankedLeg[RankedPoint]]
) -> tuple[list[Candidate[RankedPoint]], list[Candidate[RankedPoint]]]:
    """Every candidate fused across legs, and those kept by the per-KB and overall top_k."""
    fused = fuse(
        legs,
        method=config.fusion_method,
        passages_per_document=config.passages_per_document,
    )
    limits = {plan.kb.kb_id: plan.top_k.value for plan in plans}
    return fused, cap_per_knowledge_base(fused, limits, overall=max(limits.values()))


async def _redacted(
    redaction: PassageRedaction, context: TurnContext, chosen: Sequence[Candidate[Hit]]
) -> tuple[dict[str, str], dict[str, str]]:
    """The passages' texts and titles under the workspace's redaction policy, applied to the
    PII analyses stored with them; fails closed (503) when redaction fails."""
    where = {plan.kb.kb_id: (plan.collection, plan.scope) for plan in context.plans}
    outgoing = [
        Outgoing(c.point_id, c.hit.payload, *where[c.hit.payload.knowledge_base_id]) for c in chosen
    ]
    workspace_settings = context.workspace.settings if context.workspace else None
    redacted = await redact_outgoing(
        redaction, context.principal.tenant_id, workspace_settings, outgoing
    )
    return redacted.texts, redacted.titles


async def _record(
    retrieval: Retrieval,
    principal: Principal,
    agent_id: str,
    turn_id: str,
    *,
    chosen: Sequence[Candidate[Hit]],
    texts: dict[str, str],
    ttl_s: int,
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
        await retrieval.records.put_turn(record, ttl_s)
    except StoreUnavailableError:
        # The evidence is still good; only later citation checks of this turn will
        # answer 404. Counted, never hidden.
        retrieval.telemetry.count("turn_record_failed")


def _count(
    telemetry: Telemetry,
    context: TurnContext,
    *,
    legs: Sequence[RankedLeg[RankedPoint]],
    fused: Sequence[Candidate[RankedPoint]],
    chosen: Sequence[Candidate[Hit]],
) -> None:
    """Counts only: KBs, candidates per leg kind, passages and estimated tokens."""
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
