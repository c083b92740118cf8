"""Request and answer bodies of knowledge bases, agents and documents (one at a time
or in bulk)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from gateway.http.schemas import (
    EffectiveCount,
    EffectiveFlag,
    EffectiveNumber,
    Filter,
    FusionWeights,
    Identifier,
    Moment,
    ProblemDetails,
    Strict,
)
from settings.resolve import DEFAULT_DENSE_WEIGHT, DEFAULT_KEYWORD_WEIGHT

PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]
UnitFloat = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Floor = Annotated[float, msgspec.Meta(ge=0.0, le=1_000_000.0)]
FieldName = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
MetadataFieldType = Literal["string", "number", "boolean", "datetime", "string_list"]
#: a document field's value: a string, a number, a boolean, a datetime (an RFC 3339
#: string, in a field declared `datetime`) or a list of strings
MetadataValue = str | int | float | bool | list[str]
#: a document's own fields (at most 64), returned with its passages; those its KB
#: declares (`metadata_fields`) are checked against their type and may be filtered by
Metadata = Annotated[dict[FieldName, MetadataValue], msgspec.Meta(max_length=64)]


class FusionIn(Strict):
    dense: Floor = DEFAULT_DENSE_WEIGHT
    keyword: Floor = DEFAULT_KEYWORD_WEIGHT


LanguageCode = Annotated[str, msgspec.Meta(pattern="^[a-z]{2}$")]


class LanguageIn(Strict):
    """A KB's language rules: `restrict` keeps only passages in these languages (ISO
    639-1; passages whose language could not be told stay); `prefer` ranks passages in
    one language (a code, or `question`: the question's detected one) ahead of the KB's
    others."""

    restrict: Annotated[list[LanguageCode], msgspec.Meta(max_length=40)] | None = None
    prefer: Annotated[str, msgspec.Meta(pattern="^([a-z]{2}|question)$")] | None = None


class PutKnowledgeBase(Strict):
    """Create or replace a KB's settings; an absent setting falls back to the agent/platform."""

    name: Annotated[str, msgspec.Meta(max_length=200)] = ""
    storage: Literal["org", "shared"] = "org"
    top_k: PositiveInt | None = None
    score_threshold: UnitFloat | None = None
    #: a share of the question's attainable BM25 score (`ingest.keyword_scale`)
    keyword_floor: UnitFloat | None = None
    grounding_floor: UnitFloat | None = None
    fusion: FusionIn | None = None
    #: drop passages that copy a better-ranked one from a turn (default on)
    drop_copies: bool | None = None
    #: the document fields a turn may filter by, and their types (at most 32; names are
    #: a letter or `_` then letters, digits, `_`; a payload contract key is refused): each
    #: gets a payload index. Fields not declared are kept and returned, not filtered by.
    metadata_fields: (
        Annotated[dict[FieldName, MetadataFieldType], msgspec.Meta(max_length=32)] | None
    ) = None
    #: which languages the KB answers in, or prefers
    language: LanguageIn | None = None


class EffectiveFusion(msgspec.Struct, kw_only=True):
    value: FusionWeights
    source: str
    clamped: bool = False


class KnowledgeBaseEffective(msgspec.Struct, kw_only=True):
    """Each KB setting in force without an agent, which level set it (`knowledge_base`,
    `measured`, `platform`), and whether a bound changed it."""

    top_k: EffectiveCount
    score_threshold: EffectiveNumber
    #: a share of the question's attainable BM25 score (`ingest.keyword_scale`)
    keyword_floor: EffectiveNumber
    grounding_floor: EffectiveNumber
    drop_copies: EffectiveFlag
    fusion: EffectiveFusion


class AgentEffective(msgspec.Struct, kw_only=True):
    """The agent's limits in force: its KB cap, `top_k` and `score_threshold`."""

    max_knowledge_bases_per_agent: EffectiveCount
    top_k: EffectiveCount
    score_threshold: EffectiveNumber


class KnowledgeBaseOut(msgspec.Struct, kw_only=True):
    kb_id: str
    name: str
    storage: str
    collection: str
    settings: dict[str, Any]
    effective: KnowledgeBaseEffective


class KnowledgeBaseList(msgspec.Struct, kw_only=True):
    knowledge_bases: list[KnowledgeBaseOut]


class PutAgent(Strict):
    knowledge_base_ids: Annotated[list[Identifier], msgspec.Meta(max_length=100)]
    top_k: PositiveInt | None = None
    score_threshold: UnitFloat | None = None
    pii_redaction: bool | None = None
    #: a filter every turn of the agent applies, AND-ed with the turn's own
    filter: Filter | None = None


class AgentOut(msgspec.Struct, kw_only=True):
    agent_id: str
    knowledge_base_ids: list[str]
    settings: dict[str, Any]
    knowledge_bases_queried: list[str]
    knowledge_bases_skipped: list[str]
    effective: AgentEffective


class AgentList(msgspec.Struct, kw_only=True):
    agents: list[AgentOut]


class PutDocument(Strict):
    text: str
    classification: str | None = None
    title: Annotated[str, msgspec.Meta(max_length=1000)] = ""
    source: Annotated[str, msgspec.Meta(max_length=2000)] = ""
    metadata: Metadata | None = None
    #: the document answers from this moment on (absent: always has)
    valid_from: Moment | None = None
    #: ... and until this moment, not at it or after (absent: no end)
    valid_until: Moment | None = None


DocumentStatus = Literal["indexed", "unchanged", "held_back"]
HeldBackReason = Literal["missing_classification", "unknown_classification"]


class DocumentOut(msgspec.Struct, kw_only=True, omit_defaults=True):
    status: DocumentStatus
    passages: int
    #: why a document was held back (status `held_back`)
    reason: HeldBackReason | None = None


class BulkDocument(PutDocument, kw_only=True):
    """One line of a bulk write (`POST /v1/knowledge-bases/{kb_id}/documents`): a
    document as `PutDocument` has it, with its id."""

    document_id: str


BulkStatus = Literal["indexed", "unchanged", "held_back", "failed"]


class BulkDocumentResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One line of a bulk write's answer: what became of one line of the request."""

    #: the request line it answers, counted from 1 (blank lines count, and get no result)
    line: int
    #: absent when the line did not decode
    document_id: str | None = None
    status: BulkStatus
    passages: int
    #: why a document was held back (status `held_back`)
    reason: HeldBackReason | None = None
    #: why a line failed (status `failed`): nothing of it was written
    problem: ProblemDetails | None = None


class DeletedOut(msgspec.Struct, kw_only=True):
    deleted_passages: int


class KnowledgeBaseRemoved(msgspec.Struct, kw_only=True):
    passages: int
    documents: int
    agents_detached: int


class KnowledgeBaseDeletedOut(msgspec.Struct, kw_only=True):
    kb_id: str
    deleted: KnowledgeBaseRemoved


class AgentDeletedOut(msgspec.Struct, kw_only=True):
    agent_id: str
    deleted: bool


class DocumentSummary(msgspec.Struct, kw_only=True):
    document_id: str


class DocumentList(msgspec.Struct, kw_only=True):
    documents: list[DocumentSummary]


class StatsOut(msgspec.Struct, kw_only=True):
    documents: int
    passages: int
    held_back: int
