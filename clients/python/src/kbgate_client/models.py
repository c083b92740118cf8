"""kbgate's request and response bodies, written by `clients/python/codegen.py` from
the OpenAPI document (do not edit: regenerate; a test compares the two).

Request bodies leave unsent fields unset (`msgspec.UNSET`); answers are frozen, and a
field the gateway left out is None."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "Abstention",
    "AdminChangeOut",
    "AdminChangesOut",
    "AgentDeletedOut",
    "AgentEffective",
    "AgentList",
    "AgentOut",
    "AppliedOut",
    "BudgetIn",
    "BulkDocument",
    "BulkDocumentResult",
    "CitationIn",
    "CitationVerdict",
    "Counts",
    "CreateKey",
    "CreateOrg",
    "CreateWorkspace",
    "CurvePoint",
    "DeletedOut",
    "DeletionHistoryOut",
    "DeletionOut",
    "DocumentList",
    "DocumentOut",
    "DocumentSummary",
    "EffectiveAllowList",
    "EffectiveCount",
    "EffectiveEntities",
    "EffectiveFlag",
    "EffectiveFusion",
    "EffectiveNumber",
    "EffectiveOperators",
    "EvaluationList",
    "EvaluationOut",
    "EvaluationReport",
    "EvaluationStatus",
    "EvaluationSummary",
    "ExplainedSpan",
    "Figures",
    "FusionFigures",
    "FusionIn",
    "FusionWeights",
    "GoldenQuestionIn",
    "GoldenQuestionOut",
    "GoldenSetOut",
    "GroundingFlags",
    "GroundingIn",
    "GroundingOut",
    "HistoryOut",
    "KbClamped",
    "KbSettings",
    "KeyEventOut",
    "KeyHistoryOut",
    "KeyInfo",
    "KeyList",
    "KeyOut",
    "KnowledgeBaseDeletedOut",
    "KnowledgeBaseEffective",
    "KnowledgeBaseList",
    "KnowledgeBaseOut",
    "KnowledgeBaseRemoved",
    "LanguageIn",
    "Live",
    "MigrationOut",
    "MigrationProgressOut",
    "MigrationStatus",
    "MigrationStepOut",
    "OrgDeletedOut",
    "OrgOut",
    "Outcome",
    "PassageOut",
    "PatchWorkspaceSettings",
    "ProblemDetails",
    "ProgressOut",
    "PutAgent",
    "PutDocument",
    "PutGoldenSet",
    "PutKnowledgeBase",
    "Ready",
    "Recommendation",
    "RedactIn",
    "RedactOut",
    "RedactedEntity",
    "RedactionEffective",
    "RetrieveIn",
    "RetrieveOut",
    "RevokedOut",
    "SentenceOut",
    "SetFigures",
    "SettingChangeOut",
    "SettingSources",
    "StartMigration",
    "StatsOut",
    "SwitchMigration",
    "TurnClamped",
    "TurnCounts",
    "TurnEffective",
    "TurnKbEffective",
    "Validation",
    "VectorSetOut",
    "VerifyIn",
    "VerifyOut",
    "Weights",
    "WorkspaceDeletedOut",
    "WorkspaceEffective",
    "WorkspaceImported",
    "WorkspaceImportedOut",
    "WorkspaceOut",
    "WorkspaceRemoved",
    "WorkspaceSettingsOut",
]


class Abstention(msgspec.Struct, kw_only=True, frozen=True):
    answerable: float
    off_topic: float


class AdminChangeOut(msgspec.Struct, kw_only=True, frozen=True):
    at: str
    key_id: str
    kind: Literal["knowledge_base", "agent"]
    object_id: str
    action: Literal[
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
    fields: list[str]
    knowledge_base_ids: list[str] | None = None


class AdminChangesOut(msgspec.Struct, kw_only=True, frozen=True):
    changes: list[AdminChangeOut]


class AgentDeletedOut(msgspec.Struct, kw_only=True, frozen=True):
    agent_id: str
    deleted: bool


class AgentEffective(msgspec.Struct, kw_only=True, frozen=True):
    max_knowledge_bases_per_agent: EffectiveCount
    top_k: EffectiveCount
    score_threshold: EffectiveNumber


class AgentList(msgspec.Struct, kw_only=True, frozen=True):
    agents: list[AgentOut]


class AgentOut(msgspec.Struct, kw_only=True, frozen=True):
    agent_id: str
    knowledge_base_ids: list[str]
    settings: dict[str, Any]
    knowledge_bases_queried: list[str]
    knowledge_bases_skipped: list[str]
    effective: AgentEffective


class AppliedOut(msgspec.Struct, kw_only=True, frozen=True):
    kb_id: str
    evaluation_id: str
    changes: list[SettingChangeOut]
    knowledge_base: KnowledgeBaseOut


class BudgetIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    tokens: int | msgspec.UnsetType | None = msgspec.UNSET
    characters: int | msgspec.UnsetType | None = msgspec.UNSET


class BulkDocumentResult(msgspec.Struct, kw_only=True, frozen=True):
    line: int
    document_id: str | None = None
    status: Literal["indexed", "unchanged", "held_back", "failed"]
    passages: int
    reason: Literal["missing_classification", "unknown_classification"] | None = None
    problem: ProblemDetails | None = None


class CitationIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    passage_id: str
    quote: str | msgspec.UnsetType | None = msgspec.UNSET


class CitationVerdict(msgspec.Struct, kw_only=True, frozen=True):
    passage_id: str
    document_id: str | None = None
    page: int | None = None
    headings: list[str] | None = None
    reason: Literal["not_returned_in_turn", "passage_deleted", "quote_not_found"] | None = None


class Counts(msgspec.Struct, kw_only=True, frozen=True):
    questions: int
    off_topic: int
    off_topic_source: Literal["golden_set", "built_in"]
    missing_documents: int
    grounding_answers: int


class CreateKey(msgspec.Struct, kw_only=True, omit_defaults=True):
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str | msgspec.UnsetType | None = msgspec.UNSET
    expires_at: str | msgspec.UnsetType | None = msgspec.UNSET
    ttl_s: int | msgspec.UnsetType | None = msgspec.UNSET


class CreateOrg(msgspec.Struct, kw_only=True, omit_defaults=True):
    org_id: str


class CreateWorkspace(msgspec.Struct, kw_only=True, omit_defaults=True):
    tenant_id: str
    created_at: str | msgspec.UnsetType | None = msgspec.UNSET


class CurvePoint(msgspec.Struct, kw_only=True, frozen=True):
    floor: float
    answerable: float
    off_topic: float


class DeletedOut(msgspec.Struct, kw_only=True, frozen=True):
    deleted_passages: int


class DeletionHistoryOut(msgspec.Struct, kw_only=True, frozen=True):
    deletions: list[DeletionOut]


class DeletionOut(msgspec.Struct, kw_only=True, frozen=True):
    at: str
    kind: Literal["workspace", "organization"]
    org_id: str
    tenant_id: str
    actor_key_id: str
    counts: dict[str, int]


class DocumentList(msgspec.Struct, kw_only=True, frozen=True):
    documents: list[DocumentSummary]


class DocumentOut(msgspec.Struct, kw_only=True, frozen=True):
    status: Literal["indexed", "unchanged", "held_back"]
    passages: int
    reason: Literal["missing_classification", "unknown_classification"] | None = None


class DocumentSummary(msgspec.Struct, kw_only=True, frozen=True):
    document_id: str


class EffectiveAllowList(msgspec.Struct, kw_only=True, frozen=True):
    value: list[str]
    source: str
    clamped: bool = False


class EffectiveCount(msgspec.Struct, kw_only=True, frozen=True):
    value: int
    source: str
    clamped: bool = False


class EffectiveEntities(msgspec.Struct, kw_only=True, frozen=True):
    value: list[
        Literal[
            "CREDIT_CARD",
            "CRYPTO",
            "EMAIL_ADDRESS",
            "IBAN_CODE",
            "IP_ADDRESS",
            "LOCATION",
            "MAC_ADDRESS",
            "ORGANIZATION",
            "PERSON",
            "PHONE_NUMBER",
            "UK_NHS",
            "URL",
            "URL_WITH_CREDENTIALS",
            "US_ITIN",
            "US_SSN",
        ]
    ]
    source: str
    clamped: bool = False


class EffectiveFlag(msgspec.Struct, kw_only=True, frozen=True):
    value: bool
    source: str
    clamped: bool = False


class EffectiveFusion(msgspec.Struct, kw_only=True, frozen=True):
    value: FusionWeights
    source: str
    clamped: bool = False


class EffectiveNumber(msgspec.Struct, kw_only=True, frozen=True):
    value: float
    source: str
    clamped: bool = False


class EffectiveOperators(msgspec.Struct, kw_only=True, frozen=True):
    value: dict[str, Literal["replace", "mask", "pseudonym"]]
    source: str
    clamped: bool = False


class EvaluationList(msgspec.Struct, kw_only=True, frozen=True):
    evaluations: list[EvaluationSummary]


class EvaluationOut(msgspec.Struct, kw_only=True, frozen=True):
    evaluation_id: str
    kb_id: str
    status: EvaluationStatus
    created_at: str
    updated_at: str
    key_id: str
    progress: ProgressOut
    error: str | None
    report: EvaluationReport | None
    applied_at: str | None
    applied_by: str | None


class EvaluationReport(msgspec.Struct, kw_only=True, frozen=True):
    counts: Counts
    channels: dict[str, Figures]
    fusion: list[FusionFigures]
    current: Outcome
    recommendation: Recommendation
    curves: dict[str, list[CurvePoint]]
    grounding_curve: list[GroundingFlags]
    target: Abstention
    seconds: float


EvaluationStatus = Literal["running", "done", "failed"]


class EvaluationSummary(msgspec.Struct, kw_only=True, frozen=True):
    evaluation_id: str
    status: EvaluationStatus
    created_at: str
    updated_at: str
    progress: ProgressOut
    applied_at: str | None


class ExplainedSpan(msgspec.Struct, kw_only=True, frozen=True):
    start: int
    end: int
    type: str
    recognizer: str
    score: float


class Figures(msgspec.Struct, kw_only=True, frozen=True):
    ndcg_10: float
    recall_10: float
    recall_100: float


class FusionFigures(msgspec.Struct, kw_only=True, frozen=True):
    weights: Weights
    ndcg_10: float
    recall_10: float
    recall_100: float


class FusionIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    dense: float = 1.0
    keyword: float = 0.4


class FusionWeights(msgspec.Struct, kw_only=True, frozen=True):
    dense: float
    keyword: float


class GoldenQuestionIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    question: str
    document_ids: list[str]
    grades: list[int] | msgspec.UnsetType | None = msgspec.UNSET


class GoldenQuestionOut(msgspec.Struct, kw_only=True, frozen=True):
    question: str
    document_ids: list[str]
    grades: list[int] | None = None


class GoldenSetOut(msgspec.Struct, kw_only=True, frozen=True):
    kb_id: str
    questions: list[GoldenQuestionOut]
    off_topic: list[str]
    updated_at: str
    updated_by: str


class GroundingFlags(msgspec.Struct, kw_only=True, frozen=True):
    floor: float
    supported: float
    other_domain: float
    mixed: float


class GroundingIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    agent_id: str
    answer: str
    mode: Literal["whole", "sentences"] = "whole"
    filter: dict[str, Any] | msgspec.UnsetType | None = msgspec.UNSET
    as_of: str | msgspec.UnsetType | None = msgspec.UNSET


class GroundingOut(msgspec.Struct, kw_only=True, frozen=True):
    status: Literal["supported", "flagged", "skipped"]
    score: float | None
    floor: float
    matches: int
    reason: (
        Literal[
            "no_knowledge_base", "embedding_failed", "no_matches", "no_scope", "index_unavailable"
        ]
        | None
    ) = None
    sentences: list[SentenceOut] | None = None


class HistoryOut(msgspec.Struct, kw_only=True, frozen=True):
    changes: list[SettingChangeOut]


class KbClamped(msgspec.Struct, kw_only=True, frozen=True):
    top_k: bool
    score_threshold: bool


class KbSettings(msgspec.Struct, kw_only=True, frozen=True):
    score_threshold: float
    keyword_floor: float
    grounding_floor: float
    fusion: Weights
    top_k: int


class KeyEventOut(msgspec.Struct, kw_only=True, frozen=True):
    at: str
    action: str
    key_id: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    actor_key_id: str
    expires_at: str | None


class KeyHistoryOut(msgspec.Struct, kw_only=True, frozen=True):
    events: list[KeyEventOut]


class KeyInfo(msgspec.Struct, kw_only=True, frozen=True):
    key_id: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    created_at: str
    expires_at: str | None
    last_used_at: str | None


class KeyList(msgspec.Struct, kw_only=True, frozen=True):
    keys: list[KeyInfo]


class KeyOut(msgspec.Struct, kw_only=True, frozen=True):
    key: str
    key_id: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    created_at: str = ""
    expires_at: str | None = None


class KnowledgeBaseDeletedOut(msgspec.Struct, kw_only=True, frozen=True):
    kb_id: str
    deleted: KnowledgeBaseRemoved


class KnowledgeBaseEffective(msgspec.Struct, kw_only=True, frozen=True):
    top_k: EffectiveCount
    score_threshold: EffectiveNumber
    keyword_floor: EffectiveNumber
    grounding_floor: EffectiveNumber
    drop_copies: EffectiveFlag
    fusion: EffectiveFusion


class KnowledgeBaseList(msgspec.Struct, kw_only=True, frozen=True):
    knowledge_bases: list[KnowledgeBaseOut]


class KnowledgeBaseOut(msgspec.Struct, kw_only=True, frozen=True):
    kb_id: str
    name: str
    storage: str
    collection: str
    settings: dict[str, Any]
    effective: KnowledgeBaseEffective


class KnowledgeBaseRemoved(msgspec.Struct, kw_only=True, frozen=True):
    passages: int
    documents: int
    agents_detached: int


class LanguageIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    restrict: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    prefer: str | msgspec.UnsetType | None = msgspec.UNSET


class Live(msgspec.Struct, kw_only=True, frozen=True):
    status: str


class MigrationOut(msgspec.Struct, kw_only=True, frozen=True):
    migration_id: str
    kb_id: str
    status: MigrationStatus
    source_model: str
    target_model: str
    created_at: str
    updated_at: str
    key_id: str
    switch_when_not_worse_by: float | None
    progress: MigrationProgressOut
    error: str | None
    validation: Validation | None
    vector_sets: list[VectorSetOut]
    steps: list[MigrationStepOut]


class MigrationProgressOut(msgspec.Struct, kw_only=True, frozen=True):
    done: int
    total: int
    rate: float


MigrationStatus = Literal[
    "building", "built", "switched", "rolled_back", "retired", "cancelled", "failed"
]


class MigrationStepOut(msgspec.Struct, kw_only=True, frozen=True):
    at: str
    key_id: str
    action: str


class OrgDeletedOut(msgspec.Struct, kw_only=True, frozen=True):
    org_id: str
    workspaces: int
    deleted: WorkspaceRemoved
    collection_dropped: bool = False


class OrgOut(msgspec.Struct, kw_only=True, frozen=True):
    org_id: str
    created_at: str
    collection: str


class Outcome(msgspec.Struct, kw_only=True, frozen=True):
    settings: KbSettings
    predicted: Abstention
    measured: Abstention
    ndcg_10: float
    grounding: GroundingFlags


class PassageOut(msgspec.Struct, kw_only=True, frozen=True):
    passage_id: str
    document_id: str
    knowledge_base_id: str
    text: str
    score: float
    dense_score: float | None
    keyword_score: float | None
    title: str = ""
    metadata: dict[str, Any] | None = None
    page: int | None = None
    headings: list[str] | None = None


class PatchWorkspaceSettings(msgspec.Struct, kw_only=True, omit_defaults=True):
    strict_rag_isolation: bool | msgspec.UnsetType | None = msgspec.UNSET
    rag_pii_redaction: bool | msgspec.UnsetType | None = msgspec.UNSET
    max_knowledge_bases_per_agent: int | msgspec.UnsetType | None = msgspec.UNSET
    pii_entities: (
        list[
            Literal[
                "CREDIT_CARD",
                "CRYPTO",
                "EMAIL_ADDRESS",
                "IBAN_CODE",
                "IP_ADDRESS",
                "LOCATION",
                "MAC_ADDRESS",
                "ORGANIZATION",
                "PERSON",
                "PHONE_NUMBER",
                "UK_NHS",
                "URL",
                "URL_WITH_CREDENTIALS",
                "US_ITIN",
                "US_SSN",
            ]
        ]
        | msgspec.UnsetType
        | None
    ) = msgspec.UNSET
    pii_allow_list: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    pii_operators: dict[str, Literal["replace", "mask", "pseudonym"]] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )
    turn_retention_s: int | msgspec.UnsetType | None = msgspec.UNSET


class ProblemDetails(msgspec.Struct, kw_only=True, frozen=True):
    status: int
    title: str
    detail: str | None = None
    field: str | None = None
    dependency: str | None = None


class ProgressOut(msgspec.Struct, kw_only=True, frozen=True):
    stage: str
    done: int
    total: int


class PutAgent(msgspec.Struct, kw_only=True, omit_defaults=True):
    knowledge_base_ids: list[str]
    top_k: int | msgspec.UnsetType | None = msgspec.UNSET
    score_threshold: float | msgspec.UnsetType | None = msgspec.UNSET
    pii_redaction: bool | msgspec.UnsetType | None = msgspec.UNSET
    filter: dict[str, Any] | msgspec.UnsetType | None = msgspec.UNSET


class PutDocument(msgspec.Struct, kw_only=True, omit_defaults=True):
    text: str
    classification: str | msgspec.UnsetType | None = msgspec.UNSET
    title: str = ""
    source: str = ""
    metadata: dict[str, str | int | float | bool | list[str]] | msgspec.UnsetType | None = (
        msgspec.UNSET
    )
    valid_from: str | msgspec.UnsetType | None = msgspec.UNSET
    valid_until: str | msgspec.UnsetType | None = msgspec.UNSET


class PutGoldenSet(msgspec.Struct, kw_only=True, omit_defaults=True):
    questions: list[GoldenQuestionIn]
    off_topic: list[str] | msgspec.UnsetType = msgspec.UNSET


class PutKnowledgeBase(msgspec.Struct, kw_only=True, omit_defaults=True):
    name: str = ""
    storage: Literal["org", "shared"] = "org"
    top_k: int | msgspec.UnsetType | None = msgspec.UNSET
    score_threshold: float | msgspec.UnsetType | None = msgspec.UNSET
    keyword_floor: float | msgspec.UnsetType | None = msgspec.UNSET
    grounding_floor: float | msgspec.UnsetType | None = msgspec.UNSET
    fusion: FusionIn | msgspec.UnsetType | None = msgspec.UNSET
    drop_copies: bool | msgspec.UnsetType | None = msgspec.UNSET
    metadata_fields: (
        dict[str, Literal["string", "number", "boolean", "datetime", "string_list"]]
        | msgspec.UnsetType
        | None
    ) = msgspec.UNSET
    language: LanguageIn | msgspec.UnsetType | None = msgspec.UNSET


class Ready(msgspec.Struct, kw_only=True, frozen=True):
    status: str
    dependencies: dict[str, dict[str, Any]]


class Recommendation(msgspec.Struct, kw_only=True, frozen=True):
    settings: KbSettings
    predicted: Abstention
    measured: Abstention
    ndcg_10: float
    grounding: GroundingFlags
    changes: dict[str, float | Weights]
    meets_target: bool
    cautions: list[str] | None = None


class RedactIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    agent_id: str
    text: str | msgspec.UnsetType = msgspec.UNSET
    value: Any | msgspec.UnsetType = msgspec.UNSET
    explain: bool = False


class RedactOut(msgspec.Struct, kw_only=True, frozen=True):
    text: str | None = None
    value: Any = None
    redacted: bool
    entities: list[RedactedEntity]
    effective: RedactionEffective
    spans: list[ExplainedSpan] | None = None


class RedactedEntity(msgspec.Struct, kw_only=True, frozen=True):
    type: str
    count: int


class RedactionEffective(msgspec.Struct, kw_only=True, frozen=True):
    redaction: bool
    entities: list[str]


class RetrieveIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    agent_id: str
    question: str
    variations: list[str] | msgspec.UnsetType = msgspec.UNSET
    filter: dict[str, Any] | msgspec.UnsetType | None = msgspec.UNSET
    as_of: str | msgspec.UnsetType | None = msgspec.UNSET
    budget: BudgetIn | msgspec.UnsetType | None = msgspec.UNSET


class RetrieveOut(msgspec.Struct, kw_only=True, frozen=True):
    turn_id: str
    abstained: bool
    passages: list[PassageOut]
    context: str
    effective: TurnEffective
    reason: Literal["no_knowledge_base", "nothing_above_floors", "over_budget"] | None = None
    counts: TurnCounts | None = None


class RevokedOut(msgspec.Struct, kw_only=True, frozen=True):
    key_id: str
    revoked: bool


class SentenceOut(msgspec.Struct, kw_only=True, frozen=True):
    index: int
    text: str
    status: Literal["supported", "flagged", "skipped"]
    score: float | None
    matches: int


class SetFigures(msgspec.Struct, kw_only=True, frozen=True):
    model: str
    vector: str
    ndcg_10: float
    recall_10: float
    recall_100: float
    dense_ndcg_10: float
    abstention: dict[str, float]
    recommended: dict[str, float]
    recommended_ndcg_10: float
    recommended_abstention: dict[str, float]
    meets_target: bool


class SettingChangeOut(msgspec.Struct, kw_only=True, frozen=True):
    at: str
    key_id: str
    setting: str
    old: Any
    new: Any
    knowledge_base_id: str | None = None
    evaluation_id: str | None = None


class SettingSources(msgspec.Struct, kw_only=True, frozen=True):
    top_k: str
    score_threshold: str


class StartMigration(msgspec.Struct, kw_only=True, omit_defaults=True):
    model: str
    switch_when_not_worse_by: float | msgspec.UnsetType | None = msgspec.UNSET


class StatsOut(msgspec.Struct, kw_only=True, frozen=True):
    documents: int
    passages: int
    held_back: int


class SwitchMigration(msgspec.Struct, kw_only=True, omit_defaults=True):
    override: bool = False
    max_ndcg_drop: float | msgspec.UnsetType | None = msgspec.UNSET


class TurnClamped(msgspec.Struct, kw_only=True, frozen=True):
    top_k: bool
    score_threshold: bool
    max_knowledge_bases_per_agent: bool


class TurnCounts(msgspec.Struct, kw_only=True, frozen=True):
    passages_expired: int
    passages_sent: int | None = None
    passages_left_out: int | None = None
    tokens_sent: int | None = None
    tokens_left_out: int | None = None
    characters_sent: int | None = None
    characters_left_out: int | None = None


class TurnEffective(msgspec.Struct, kw_only=True, frozen=True):
    top_k: int | None
    score_threshold: float | None
    sources: SettingSources
    clamped: bool | TurnClamped
    knowledge_bases_queried: list[str]
    knowledge_bases_skipped: list[str]
    max_knowledge_bases_per_agent: int
    strict_isolation: bool
    redaction: bool
    per_knowledge_base: dict[str, TurnKbEffective]
    fusion_method: str
    as_of: str | None = None
    filtered: bool = False
    language: str | None = None


class TurnKbEffective(msgspec.Struct, kw_only=True, frozen=True):
    top_k: int
    score_threshold: float
    keyword_floor: float
    joint_line: float | None
    fusion: FusionWeights
    drop_copies: bool
    sources: SettingSources
    clamped: KbClamped
    dense_vector: str


class Validation(msgspec.Struct, kw_only=True, frozen=True):
    status: str
    started_at: str
    key_id: str
    finished_at: str | None = None
    old: SetFigures | None = None
    new: SetFigures | None = None
    ndcg_10_change: float | None = None
    error: str | None = None


class VectorSetOut(msgspec.Struct, kw_only=True, frozen=True):
    model: str
    vector: str
    answering: bool


class VerifyIn(msgspec.Struct, kw_only=True, omit_defaults=True):
    turn_id: str
    citations: list[CitationIn]


class VerifyOut(msgspec.Struct, kw_only=True, frozen=True):
    valid: list[CitationVerdict]
    invalid: list[CitationVerdict]


class Weights(msgspec.Struct, kw_only=True, frozen=True):
    dense: float
    keyword: float


class WorkspaceDeletedOut(msgspec.Struct, kw_only=True, frozen=True):
    tenant_id: str
    org_id: str
    deleted: WorkspaceRemoved


class WorkspaceEffective(msgspec.Struct, kw_only=True, frozen=True):
    strict_rag_isolation: EffectiveFlag
    rag_pii_redaction: EffectiveFlag
    max_knowledge_bases_per_agent: EffectiveCount
    pii_entities: EffectiveEntities
    turn_retention_s: EffectiveCount
    pii_allow_list: EffectiveAllowList
    pii_operators: EffectiveOperators


class WorkspaceImported(msgspec.Struct, kw_only=True, frozen=True):
    knowledge_bases: int
    agents: int
    golden_sets: int
    passages: int
    pii_analysed: int = 0


class WorkspaceImportedOut(msgspec.Struct, kw_only=True, frozen=True):
    tenant_id: str
    org_id: str
    imported: WorkspaceImported
    signature: Literal["verified", "unsigned", "unverified"] = "unsigned"


class WorkspaceOut(msgspec.Struct, kw_only=True, frozen=True):
    tenant_id: str
    org_id: str
    created_at: str


class WorkspaceRemoved(msgspec.Struct, kw_only=True, frozen=True):
    passages: int
    knowledge_bases: int
    agents: int
    keys: int
    turns: int
    settings_changes: int


class WorkspaceSettingsOut(msgspec.Struct, kw_only=True, frozen=True):
    tenant_id: str
    org_id: str
    created_at: str
    settings: dict[str, Any]
    effective: WorkspaceEffective


class BulkDocument(PutDocument, kw_only=True):
    document_id: str
