"""Request and response bodies: msgspec Structs, strict (unknown fields are refused)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from settings.resolve import (
    DEFAULT_DENSE_WEIGHT,
    DEFAULT_KEYWORD_WEIGHT,
    PiiEntityName,
    PiiOperatorName,
)


class Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base of every request body: unknown fields are an error, not silently dropped."""


class ProblemDetails(msgspec.Struct, kw_only=True, omit_defaults=True):
    """RFC 9457 problem details: the body of every error kbgate answers."""

    status: int
    title: str
    detail: str | None = None
    #: the offending input field (400, 404, 409, 413, 422)
    field: str | None = None
    #: what is unavailable (503): index, store or embedder
    dependency: str | None = None


class CreateOrg(Strict):
    org_id: str


class OrgOut(msgspec.Struct, kw_only=True):
    org_id: str
    created_at: str
    collection: str


class CreateWorkspace(Strict):
    tenant_id: str
    created_at: str | None = None


class WorkspaceOut(msgspec.Struct, kw_only=True):
    tenant_id: str
    org_id: str
    created_at: str


class WorkspaceRemoved(msgspec.Struct, kw_only=True):
    """What a workspace (or organization) deletion removed: counts only."""

    passages: int
    knowledge_bases: int
    agents: int
    keys: int
    turns: int
    settings_changes: int


class WorkspaceDeletedOut(msgspec.Struct, kw_only=True):
    tenant_id: str
    org_id: str
    deleted: WorkspaceRemoved


class OrgDeletedOut(msgspec.Struct, kw_only=True):
    org_id: str
    workspaces: int
    #: totals over its workspaces
    deleted: WorkspaceRemoved
    #: whether its collection `kb_org_<org_id>` was dropped by this call
    collection_dropped: bool = False


class DeletionOut(msgspec.Struct, kw_only=True):
    """One completed deletion: ids, who (key id), when, counts of what went."""

    at: str
    kind: Literal["workspace", "organization"]
    org_id: str
    tenant_id: str
    actor_key_id: str
    counts: dict[str, int]


class DeletionHistoryOut(msgspec.Struct, kw_only=True):
    deletions: list[DeletionOut]


class WorkspaceImported(msgspec.Struct, kw_only=True):
    """What an import wrote: counts only."""

    knowledge_bases: int
    agents: int
    golden_sets: int
    passages: int
    #: passages whose PII this deployment analysed at import (all of them, unless the
    #: archive is signed with its archive key: then its stored analyses are kept)
    pii_analysed: int = 0


#: `verified`: signed with this deployment's archive key (its PII analyses kept);
#: `unsigned`: no signature; `unverified`: a signature this deployment cannot verify
#: (another key, or the archive changed since it was signed)
ArchiveSignature = Literal["verified", "unsigned", "unverified"]


class WorkspaceImportedOut(msgspec.Struct, kw_only=True):
    tenant_id: str
    org_id: str
    imported: WorkspaceImported
    signature: ArchiveSignature = "unsigned"


class CreateKey(Strict):
    """`clearance` defaults to `restricted` for admin and ingest keys (the only one they
    may have), `internal` otherwise. At most one of `expires_at` (ISO 8601) or `ttl_s`."""

    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str | None = None
    expires_at: str | None = None
    ttl_s: int | None = None


class KeyOut(msgspec.Struct, kw_only=True):
    """The only response that ever carries a secret: shown once, stored hashed."""

    key: str
    key_id: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    created_at: str = ""
    expires_at: str | None = None


class KeyInfo(msgspec.Struct, kw_only=True):
    """A key's metadata: never its secret nor its hash."""

    key_id: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    created_at: str
    expires_at: str | None
    last_used_at: str | None


class KeyList(msgspec.Struct, kw_only=True):
    keys: list[KeyInfo]


class RevokedOut(msgspec.Struct, kw_only=True):
    key_id: str
    revoked: bool


class KeyEventOut(msgspec.Struct, kw_only=True):
    """One key created or revoked: when, by which key (its id), and the key's metadata."""

    at: str
    action: str
    key_id: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    actor_key_id: str
    expires_at: str | None


class KeyHistoryOut(msgspec.Struct, kw_only=True):
    events: list[KeyEventOut]


class Live(msgspec.Struct, kw_only=True):
    status: str


class Ready(msgspec.Struct, kw_only=True):
    status: str
    dependencies: dict[str, dict[str, Any]]


# ---- knowledge bases, agents, documents -------------------------------------------

PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]
UnitFloat = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Floor = Annotated[float, msgspec.Meta(ge=0.0, le=1_000_000.0)]
Identifier = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
FieldName = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
MetadataFieldType = Literal["string", "number", "boolean", "datetime", "string_list"]
#: a document field's value: a string, a number, a boolean, a datetime (an RFC 3339
#: string, in a field declared `datetime`) or a list of strings
MetadataValue = str | int | float | bool | list[str]
#: a document's own fields (at most 64), returned with its passages; those its KB
#: declares (`metadata_fields`) are checked against their type and may be filtered by
Metadata = Annotated[dict[FieldName, MetadataValue], msgspec.Meta(max_length=64)]
#: an RFC 3339 date or date-time (`2026-05-01`, `2026-05-01T12:00:00Z`; no offset: UTC)
Moment = Annotated[str, msgspec.Meta(min_length=10, max_length=40)]


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


class EffectiveNumber(msgspec.Struct, kw_only=True):
    value: float
    source: str
    clamped: bool = False


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


# ---- retrieval and citations --------------------------------------------------------


#: A filter on document fields (`ingest.metadata`): an object whose keys are field names
#: (declared in the queried KBs' `metadata_fields`, or `document_id`,
#: `knowledge_base_id`, `language`) or `$and` / `$or` (a list of filters) / `$not` (a
#: filter); a field's value is a value to equal, or an object of operators, all of which
#: must hold: `$eq $ne $in $nin` (every type; on a list of strings: any item), `$gt $gte
#: $lt $lte` (numbers, datetimes as RFC 3339), `$exists` (true, false). At most 6 levels
#: of `$and`/`$or`/`$not`, 64 field conditions, 100 values in one `$in`/`$nin`. It narrows
#: the turn inside what the key may see (tenant, KBs, clearance, org): it never widens it.
#: An undeclared or reserved field, a wrong type or an unknown operator answers 422 naming
#: it (`field`: `filter.<name>`).
Filter = Annotated[
    dict[str, Any],
    msgspec.Meta(
        description="a filter on document fields: {field: value | {$op: value}}, "
        "$and/$or/$not; operators $eq $ne $in $nin $gt $gte $lt $lte $exists",
        examples=[{"region": "eu", "year": {"$gte": 2024}, "$or": [{"tags": "pumps"}]}],
    ),
]


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


class FusionWeights(msgspec.Struct, kw_only=True):
    dense: float
    keyword: float


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


# ---- workspace settings -------------------------------------------------------------

KbCap = Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]


PiiEntities = Annotated[list[PiiEntityName], msgspec.Meta(min_length=1, max_length=32)]
#: values and patterns redaction keeps (`settings.pii_allow_list`: exact values, CIDR
#: ranges, `re:` patterns); each entry is also checked to parse, else 422
PiiAllowList = Annotated[
    list[Annotated[str, msgspec.Meta(min_length=1, max_length=200)]],
    msgspec.Meta(max_length=100),
]
RetentionSeconds = Annotated[int, msgspec.Meta(ge=1, le=10 * 365 * 86_400)]
#: entity type -> how its values are replaced: `replace` (`<PERSON>`, every type not
#: named), `mask` (every character `*`), `pseudonym` (`<PERSON_7f3a12>`, the same value the
#: same token within the workspace)
PiiOperators = dict[PiiEntityName, PiiOperatorName]


class PatchWorkspaceSettings(Strict):
    """Only the fields sent change; null resets a setting to its default."""

    strict_rag_isolation: bool | msgspec.UnsetType | None = msgspec.UNSET
    rag_pii_redaction: bool | msgspec.UnsetType | None = msgspec.UNSET
    max_knowledge_bases_per_agent: KbCap | msgspec.UnsetType | None = msgspec.UNSET
    pii_entities: PiiEntities | msgspec.UnsetType | None = msgspec.UNSET
    pii_allow_list: PiiAllowList | msgspec.UnsetType | None = msgspec.UNSET
    pii_operators: PiiOperators | msgspec.UnsetType | None = msgspec.UNSET
    #: seconds a turn record (the texts a turn returned) is kept; clamped to
    #: 1..KBGATE_TURN_TTL_MAX_S when used
    turn_retention_s: RetentionSeconds | msgspec.UnsetType | None = msgspec.UNSET


class EffectiveFlag(msgspec.Struct, kw_only=True):
    value: bool
    source: str
    clamped: bool = False


class EffectiveCount(msgspec.Struct, kw_only=True):
    value: int
    source: str
    clamped: bool = False


class EffectiveEntities(msgspec.Struct, kw_only=True):
    value: list[PiiEntityName]
    source: str
    clamped: bool = False


class EffectiveAllowList(msgspec.Struct, kw_only=True):
    value: list[str]
    source: str
    clamped: bool = False


class EffectiveOperators(msgspec.Struct, kw_only=True):
    value: dict[PiiEntityName, PiiOperatorName]
    source: str
    clamped: bool = False


class WorkspaceEffective(msgspec.Struct, kw_only=True):
    """Each workspace setting in force, which level set it, and whether a bound changed it."""

    strict_rag_isolation: EffectiveFlag
    rag_pii_redaction: EffectiveFlag
    max_knowledge_bases_per_agent: EffectiveCount
    #: the configured types a loaded recognizer finds (`clamped`: some have none)
    pii_entities: EffectiveEntities
    turn_retention_s: EffectiveCount
    pii_allow_list: EffectiveAllowList
    #: the types whose operator is not `replace` (every other type is replaced by `<TYPE>`)
    pii_operators: EffectiveOperators


class WorkspaceSettingsOut(msgspec.Struct, kw_only=True):
    tenant_id: str
    org_id: str
    created_at: str
    settings: dict[str, Any]
    effective: WorkspaceEffective


class SettingChangeOut(msgspec.Struct, kw_only=True, omit_defaults=True):
    at: str
    key_id: str
    setting: str
    old: Any
    new: Any
    #: the KB whose setting an applied evaluation changed (absent: a workspace setting)
    knowledge_base_id: str | None = None
    #: the evaluation whose recommendation was applied
    evaluation_id: str | None = None


class HistoryOut(msgspec.Struct, kw_only=True):
    changes: list[SettingChangeOut]


ChangedKind = Literal["knowledge_base", "agent"]
#: a model migration's steps change which model a KB is embedded with or answers from
#: (`gateway.admin.migration`; field `embedding_model`)
ChangeAction = Literal[
    "created",
    "changed",
    "deleted",
    "model_migration_started",
    "model_migration_cancelled",
    "model_migration_switched",
    "model_migration_switched_with_override",
    "model_migration_switched_by_policy",
    "model_migration_rolled_back",
    "model_migration_retired",
]


class AdminChangeOut(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One change to a knowledge base or an agent: ids and field names, never values."""

    at: str
    key_id: str
    kind: ChangedKind
    object_id: str
    action: ChangeAction
    #: the stored fields the change set (empty for a deletion)
    fields: list[str]
    #: an agent's knowledge bases after the change, in order (agents only)
    knowledge_base_ids: list[str] | None = None


class AdminChangesOut(msgspec.Struct, kw_only=True):
    changes: list[AdminChangeOut]


# ---- PII redaction of egress ------------------------------------------------------


class RedactIn(Strict):
    """Exactly one of `text` (a string) or `value` (any JSON value, e.g. tool arguments).
    `explain` (admin keys, `text` only) adds why each span was hidden."""

    agent_id: Identifier
    text: str | msgspec.UnsetType = msgspec.UNSET
    value: Any = msgspec.UNSET
    explain: bool = False


class RedactedEntity(msgspec.Struct, kw_only=True):
    type: str
    count: int


class RedactionEffective(msgspec.Struct, kw_only=True):
    """What the two gates decided, and which entity types the workspace redacts."""

    redaction: bool
    entities: list[str]


class ExplainedSpan(msgspec.Struct, kw_only=True):
    """One hidden span of the request's `text`: [start, end) in characters, its entity
    type, the recognizer that found it and the recognizer's score."""

    start: int
    end: int
    type: str
    recognizer: str
    score: float


class RedactOut(msgspec.Struct, kw_only=True):
    """`text` answers a text request, `value` a JSON one; `redacted`: anything replaced;
    `spans` (with `explain`) why each span was hidden."""

    text: str | msgspec.UnsetType = msgspec.UNSET
    value: Any = msgspec.UNSET
    redacted: bool
    entities: list[RedactedEntity]
    effective: RedactionEffective
    spans: list[ExplainedSpan] | msgspec.UnsetType = msgspec.UNSET


# ---- grounding ----------------------------------------------------------------------


class GroundingIn(Strict):
    agent_id: Identifier
    answer: str
    mode: Literal["whole", "sentences"] = "whole"
    #: check against the passages a turn with this filter and moment would search
    filter: Filter | None = None
    as_of: Moment | None = None


GroundingStatus = Literal["supported", "flagged", "skipped"]
GroundingSkipReason = Literal[
    "no_knowledge_base", "embedding_failed", "no_matches", "no_scope", "index_unavailable"
]


class SentenceOut(msgspec.Struct, kw_only=True):
    index: int
    text: str
    status: GroundingStatus
    score: float | None
    matches: int


class GroundingOut(msgspec.Struct, kw_only=True, omit_defaults=True):
    status: GroundingStatus
    score: float | None
    floor: float
    matches: int
    #: why the check was skipped (status `skipped`)
    reason: GroundingSkipReason | None = None
    sentences: list[SentenceOut] | None = None
