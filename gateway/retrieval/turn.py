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
from gateway.retrieval.budget import ContextBudget, Filled, estimated_tokens, fill
from gateway.retrieval.evidence import EvidenceBlock, fence
from gateway.retrieval.fusion import Candidate, RankedLeg, cap_per_knowledge_base, fuse
from gateway.retrieval.kb_plan import KbPlan
from gateway.retrieval.language import preferred
from gateway.retrieval.legs import (
    Search,
    fetch_distinct,
    search_while_embedding,
    with_question_vectors,
)
from gateway.retrieval.narrowing import AGENT_FILTER, TurnNarrowing, turn_narrowing
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
from gateway.safety.passages import Outgoing, PassageRedaction, Redacted, redact_outgoing
from gateway.telemetry import Telemetry
from ingest.index import Hit, LegKind, RankedPoint
from ingest.language import LanguageDetector
from settings.config import Config
from settings.effective import turn_retention
from settings.records import TurnPassage, TurnRecord
from settings.store import StoreUnavailableError, TurnRecords


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
    #: the question's language, reported by the turn and preferred by KBs that ask
    languages: LanguageDetector = field(default_factory=LanguageDetector)


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
    #: each passage's document fields as returned (redacted with its text), by passage id;
    #: a passage without fields has no entry
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: counts only: `passages_expired` (passages the filters kept whose validity ended);
    #: with a budget, `passages_sent`, `passages_left_out` and `<unit>_sent`,
    #: `<unit>_left_out` (`tokens` or `characters`)
    counts: dict[str, int] = field(default_factory=dict)
    #: each returned passage's heading path, as returned (redacted where texts are); a
    #: passage without one is absent
    headings: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TurnAsks:
    """What a turn asks beside its question: a `filter` (the JSON grammar of
    `ingest.metadata`), the moment its documents must be in force (`as_of`, RFC 3339;
    None: now)."""

    filter: Any = None
    as_of: str | None = None
    #: fill this budget best-first (`gateway.retrieval.budget`); None: every chosen passage
    budget: ContextBudget | None = None


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
    *,
    asks: TurnAsks | None = None,
) -> TurnResult:
    """Run one retrieval turn for the principal's agent."""
    validate_question(retrieval.config, question, variations)
    with retrieval.in_flight.entered(), retrieval.telemetry.tracing.span("turn"):
        return await _retrieve(
            retrieval, principal, agent_id, [question, *variations], asks or TurnAsks()
        )


async def _retrieve(
    retrieval: Retrieval, principal: Principal, agent_id: str, asked: list[str], asks: TurnAsks
) -> TurnResult:
    """The turn for the question and its variations (`asked`), counted `in_flight`."""
    clock = _Stopwatch()
    config, telemetry = retrieval.config, retrieval.telemetry
    context = await plan_turn(retrieval.planning, principal, agent_id)
    context.plans = await with_lines(retrieval.planning, context.plans)
    narrowing = turn_narrowing(
        context.plans,
        agent_filter=context.agent.settings.get(AGENT_FILTER),
        asked_filter=asks.filter,
        as_of=asks.as_of,
    )
    context.plans = await narrowing.applied(retrieval.search.index, context.plans)
    turn_id = "turn_" + secrets.token_urlsafe(16)
    effective = {
        **effective_settings(context),
        "fusion_method": str(config.fusion_method),
        "as_of": narrowing.as_of,
        "filtered": any(f is not None for f in narrowing.filters.values()),
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
    # a few hundredths of a millisecond for a question: cheaper here than a thread hop
    language = retrieval.languages.detect(asked[0])
    fused = preferred(fused, context.plans, language)
    effective["language"] = language
    clock.lap("fuse")
    limits = {plan.kb.kb_id: plan.top_k.value for plan in context.plans}
    chosen, copies = await fetch_distinct(retrieval.search, context.plans, fused, limits)
    telemetry.count("turn_copies_dropped", copies)
    clock.lap("fetch")
    _count(telemetry, context, legs=legs, fused=fused, chosen=chosen)
    counts = {"passages_expired": await _expired(retrieval.search, context.plans, narrowing)}
    clock.lap("count")
    if not chosen:
        abstained = _abstained(telemetry, turn_id, effective, "nothing_above_floors", clock.timings)
        abstained.counts = counts
        return abstained
    # what is fenced, recorded and returned is the redacted text (and headings, fields)
    outgoing = await _outgoing(retrieval.redaction, context, chosen)
    if context.redaction.value:
        clock.lap("redact")
    texts, titles, headings = outgoing.texts, outgoing.titles, outgoing.headings
    if asks.budget is not None:
        chosen, filled = fill(
            asks.budget, chosen, lambda c: texts[c.point_id] + titles.get(c.point_id, "")
        )
        counts.update(_budget_counts(asks.budget, filled, len(chosen)))
        if not chosen:
            over = _abstained(telemetry, turn_id, effective, "over_budget", clock.timings)
            over.counts = counts
            return over
    retention = turn_retention(context.workspace, config).value
    await _record(
        retrieval,
        principal,
        agent_id,
        turn_id,
        chosen=chosen,
        texts=texts,
        headings=headings,
        ttl_s=retention,
    )
    clock.lap("record")
    clock.finish(telemetry)
    blocks = [
        EvidenceBlock(
            c.point_id,
            c.hit.payload.document_id,
            texts[c.point_id],
            titles.get(c.point_id, ""),
            page=c.hit.payload.page,
            headings=headings.get(c.point_id, ()),
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
        fields=outgoing.fields,
        counts=counts,
        headings=headings,
    )


def _budget_counts(budget: ContextBudget, filled: Filled, sent: int) -> dict[str, int]:
    unit = budget.unit.value
    return {
        "passages_sent": sent,
        "passages_left_out": filled.passages_left_out,
        f"{unit}_sent": filled.sent,
        f"{unit}_left_out": filled.left_out,
    }


async def _expired(search: Search, plans: Sequence[KbPlan], narrowing: TurnNarrowing) -> int:
    """Passages the turn's filters keep in its KBs whose validity ended by its moment:
    they did not answer. Counted only in the KBs holding dated documents (those whose
    plans carry validity)."""
    counted = 0
    for plan in plans:
        if narrowing.dated(plan):
            counted += await search.index.count(plan.collection, narrowing.expired(plan))
    return counted


@dataclass(slots=True)
class _Stopwatch:
    """Each stage's milliseconds since the previous stage ended, and the turn's total."""

    started: float = field(default_factory=time.perf_counter)
    mark: float = field(default_factory=time.perf_counter)
    timings: dict[str, float] = field(default_factory=dict)
    #: the wall clock at `started`, in nanoseconds (for spans)
    wall_ns: int = field(default_factory=time.time_ns)
    #: (stage, start, end) in seconds since `started`
    laps: list[tuple[str, float, float]] = field(default_factory=list)

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round((now - self.mark) * 1000, 2)
        self.laps.append((stage, self.mark - self.started, now - self.started))
        self.mark = now

    def finish(self, telemetry: Telemetry) -> None:
        self.timings["total"] = round((time.perf_counter() - self.started) * 1000, 2)
        for stage, value in self.timings.items():
            telemetry.observe_stage(f"turn_{stage}", value / 1000)
        if telemetry.tracing.enabled:
            wall = self.wall_ns
            laps = [(name, wall + int(a * 1e9), wall + int(b * 1e9)) for name, a, b in self.laps]
            telemetry.tracing.stages("turn", laps)


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


async def _outgoing(
    redaction: PassageRedaction, context: TurnContext, chosen: Sequence[Candidate[Hit]]
) -> Redacted:
    """The chosen passages' texts, titles, heading paths and document fields as they
    leave: redacted when the turn's redaction is on (`_redacted`), else as stored."""
    if context.redaction.value:
        return await _redacted(redaction, context, chosen)
    payloads = {c.point_id: c.hit.payload for c in chosen}
    return Redacted(
        texts={point: payload.text for point, payload in payloads.items()},
        titles={point: payload.title for point, payload in payloads.items()},
        counts={},
        headings={point: p.headings for point, p in payloads.items() if p.headings},
        fields={point: p.metadata for point, p in payloads.items() if p.metadata},
    )


async def _redacted(
    redaction: PassageRedaction, context: TurnContext, chosen: Sequence[Candidate[Hit]]
) -> Redacted:
    """The passages' texts, titles, heading paths and document fields under the
    workspace's redaction policy, applied to the PII analyses stored with them; fails
    closed (503) when redaction fails."""
    where = {plan.kb.kb_id: (plan.collection, plan.scope) for plan in context.plans}
    outgoing = [
        Outgoing(c.point_id, c.hit.payload, *where[c.hit.payload.knowledge_base_id]) for c in chosen
    ]
    workspace_settings = context.workspace.settings if context.workspace else None
    return await redact_outgoing(
        redaction, context.principal.tenant_id, workspace_settings, outgoing
    )


async def _record(
    retrieval: Retrieval,
    principal: Principal,
    agent_id: str,
    turn_id: str,
    *,
    chosen: Sequence[Candidate[Hit]],
    texts: dict[str, str],
    headings: dict[str, tuple[str, ...]],
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
                page=c.hit.payload.page,
                headings=headings.get(c.point_id),
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
        "turn_tokens_returned", sum(estimated_tokens(c.hit.payload.text) for c in chosen)
    )
    telemetry.count("turn_documents_considered", len(fused))
