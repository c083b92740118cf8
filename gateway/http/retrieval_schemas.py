"""Request and answer bodies of a turn (`POST /v1/retrieve`) and of citation
verification."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from gateway.http.schemas import Filter, FusionWeights, Identifier, Moment, Strict


class BudgetIn(Strict):
    """How much evidence a turn may send, in one unit: passages are taken best first
    while they fit (a passage's text and title as returned); `tokens` by the offline
    estimate of one token per 4 characters, rounded up."""

    tokens: Annotated[int, msgspec.Meta(ge=1, le=10_000_000)] | None = None
    characters: Annotated[int, msgspec.Meta(ge=1, le=40_000_000)] | None = None


class RetrieveIn(Strict):
    agent_id: Identifier
    question: str
    variations: list[str] = msgspec.field(default_factory=list)
    #: only passages of documents whose fields pass it (AND-ed with the agent's own)
    filter: Filter | None = None
    #: answer as of this moment: documents whose validity does not hold then do not
    #: answer (RFC 3339; absent: now)
    as_of: Moment | None = None
    #: fill at most this much context, best first (exactly one of `tokens`, `characters`)
    budget: BudgetIn | None = None


class PassageOut(msgspec.Struct, kw_only=True):
    passage_id: str
    document_id: str
    knowledge_base_id: str
    text: str
    score: float
    dense_score: float | None
    keyword_score: float | None
    title: str = ""
    #: the document's own fields, as stored (declared datetimes in UTC)
    metadata: dict[str, Any] | None = None
    #: the page (PDF) or slide (PPTX) the passage starts on, from 1; absent without pages
    page: int | None = None
    #: the headings above the passage (Markdown, reStructuredText, HTML, DOCX), outermost
    #: first and its own section's last: at most 6, each at most 200 characters, redacted
    #: as its text is; absent without headings
    headings: list[str] | None = None


AbstentionReason = Literal["no_knowledge_base", "nothing_above_floors", "over_budget"]


class TurnCounts(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Counts of what a turn left out."""

    #: passages the filters kept whose document's validity ended by `as_of`
    passages_expired: int
    #: with a budget: passages sent and left out, and their size in its unit
    passages_sent: int | None = None
    passages_left_out: int | None = None
    tokens_sent: int | None = None
    tokens_left_out: int | None = None
    characters_sent: int | None = None
    characters_left_out: int | None = None


class SettingSources(msgspec.Struct, kw_only=True):
    """Which level set each limit: `platform`, `workspace`, `agent` or `knowledge_base`."""

    top_k: str
    score_threshold: str


class KbClamped(msgspec.Struct, kw_only=True):
    """Whether a platform bound changed each limit."""

    top_k: bool
    score_threshold: bool


class TurnClamped(msgspec.Struct, kw_only=True):
    """Which settings a platform bound changed in the turn (present when any did)."""

    top_k: bool
    score_threshold: bool
    max_knowledge_bases_per_agent: bool


class TurnKbEffective(msgspec.Struct, kw_only=True):
    """One queried KB's settings in force in the turn."""

    top_k: int
    score_threshold: float
    #: a share of the question's attainable BM25 score (`ingest.keyword_scale`)
    keyword_floor: float
    #: the joint score that still answers below `score_threshold` (null: none)
    joint_line: float | None
    fusion: FusionWeights
    drop_copies: bool
    sources: SettingSources
    clamped: KbClamped
    #: the dense vector set the KB's dense leg searched: `dense` (the deployment's model),
    #: or a model migration's `dense_<slug>`
    dense_vector: str


class TurnEffective(msgspec.Struct, kw_only=True):
    """The settings a turn ran with: the lead KB's limits (null when no KB was queried),
    which level set them, the KBs queried and skipped, isolation and redaction in force."""

    top_k: int | None
    score_threshold: float | None
    sources: SettingSources
    #: false when no bound changed anything
    clamped: bool | TurnClamped
    knowledge_bases_queried: list[str]
    #: attached KBs over the workspace's cap, in the agent's order
    knowledge_bases_skipped: list[str]
    max_knowledge_bases_per_agent: int
    strict_isolation: bool
    redaction: bool
    per_knowledge_base: dict[str, TurnKbEffective]
    #: how the dense and keyword legs are fused (`score` or `rrf`)
    fusion_method: str
    #: the moment documents' validity was judged at (RFC 3339, UTC): the asked `as_of`,
    #: else the turn's start
    as_of: str | None = None
    #: whether a filter (the agent's default or the request's) narrowed any KB
    filtered: bool = False
    #: the question's language (ISO 639-1), when detected
    language: str | None = None


class RetrieveOut(msgspec.Struct, kw_only=True):
    turn_id: str
    abstained: bool
    passages: list[PassageOut]
    #: the passages fenced as untrusted evidence, for a model's prompt
    context: str
    effective: TurnEffective
    #: why the turn abstained (`abstained` true)
    reason: AbstentionReason | None = None
    counts: TurnCounts = msgspec.field(default_factory=lambda: TurnCounts(passages_expired=0))


class CitationIn(Strict):
    passage_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    quote: Annotated[str, msgspec.Meta(max_length=5000)] | None = None


class VerifyIn(Strict):
    turn_id: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    citations: Annotated[list[CitationIn], msgspec.Meta(max_length=200)]


CitationRejection = Literal["not_returned_in_turn", "passage_deleted", "quote_not_found"]


class CitationVerdict(msgspec.Struct, kw_only=True, omit_defaults=True):
    passage_id: str
    #: a valid citation's document and page (the page its passage starts on, if any)
    document_id: str | None = None
    page: int | None = None
    #: a valid citation's heading path, as its turn returned it (if any)
    headings: list[str] | None = None
    #: why an invalid citation is invalid
    reason: CitationRejection | None = None


class VerifyOut(msgspec.Struct, kw_only=True):
    valid: list[CitationVerdict]
    invalid: list[CitationVerdict]
