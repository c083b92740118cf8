"""Request and answer bodies of a workspace's settings, their history, and the
history of changes to its knowledge bases and agents."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from gateway.http.schemas import EffectiveCount, EffectiveFlag, Strict
from settings.resolve import PiiEntityName, PiiOperatorName

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
