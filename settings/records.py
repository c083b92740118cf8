"""The records kbgate keeps beside the index: orgs, workspaces, KBs, agents, keys, turns.

Settings values are kept as the JSON values that were stored (`Any`): the
resolution rules in `settings.resolve` validate them when read, so a malformed
value stored by an older release is ignored level by level instead of crashing
a turn.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec


class Role(enum.StrEnum):
    PLATFORM = "platform"
    ADMIN = "admin"
    INGEST = "ingest"
    RETRIEVE = "retrieve"


WORKSPACE_ROLES: frozenset[Role] = frozenset({Role.ADMIN, Role.INGEST, Role.RETRIEVE})


class Lifecycle(enum.StrEnum):
    """Where an org or workspace stands: in use, or marked for deletion (its id stays
    taken until the deletion completes, so an interrupted one is finished by the next)."""

    ACTIVE = "active"
    DELETING = "deleting"


class Org(msgspec.Struct, frozen=True, kw_only=True):
    org_id: str
    created_at: str
    state: Lifecycle = Lifecycle.ACTIVE


class Workspace(msgspec.Struct, frozen=True, kw_only=True):
    """A tenant: its id is unique across the platform and written on every passage."""

    tenant_id: str
    org_id: str
    created_at: str
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    state: Lifecycle = Lifecycle.ACTIVE


class KnowledgeBase(msgspec.Struct, frozen=True, kw_only=True):
    """A set of documents of one workspace. `settings` holds top_k, thresholds, fusion.

    `embedding_model` names the dense model whose vectors its turns search ("": the
    deployment's own, the `dense` vectors); only a model migration changes it
    (`gateway.admin.migration`)."""

    kb_id: str
    tenant_id: str
    org_id: str
    storage: str
    name: str = ""
    created_at: str = ""
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    embedding_model: str = ""


class Agent(msgspec.Struct, frozen=True, kw_only=True):
    """A workspace's assistant: ordered KBs and its own retrieval settings."""

    agent_id: str
    tenant_id: str
    knowledge_base_ids: list[str]
    created_at: str = ""
    settings: dict[str, Any] = msgspec.field(default_factory=dict)


class ApiKey(msgspec.Struct, frozen=True, kw_only=True):
    """A credential, stored by the sha256 of its secret; the secret itself is never kept."""

    key_id: str
    key_hash: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    created_at: str
    #: ISO 8601 instant after which the key answers 401; None: no expiry.
    expires_at: str | None = None
    #: when the key last authenticated (coarse: recorded at most once a minute); filled
    #: in by `list_api_keys`, never written inside the key's own record.
    last_used_at: str | None = None


class KeyEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One audited key change: a key created or revoked, and by whom (ids only, no secret)."""

    at: str
    action: str  # "created" or "revoked"
    key_id: str
    org_id: str
    tenant_id: str
    roles: list[str]
    clearance: str
    actor_key_id: str
    expires_at: str | None = None


class SettingChange(msgspec.Struct, frozen=True, kw_only=True):
    """One audited change: who (key id, never the key), when, what, from and to.

    A KB's setting applied from an evaluation names the KB and the evaluation."""

    at: str
    key_id: str
    setting: str
    old: Any
    new: Any
    knowledge_base_id: str | None = None
    evaluation_id: str | None = None


class AdminChange(msgspec.Struct, frozen=True, kw_only=True):
    """One audited change to a workspace's knowledge bases or agents: who (key id, never
    the key), when, which object and which of its stored fields. It holds ids and field
    names only, never a value, a name or any content; an agent's change also lists the
    ids of its knowledge bases afterwards, in order (attachments and their order)."""

    at: str
    key_id: str
    tenant_id: str
    kind: str  # "knowledge_base" or "agent"
    object_id: str
    action: str  # "created", "changed" or "deleted"
    fields: list[str] = msgspec.field(default_factory=list)
    knowledge_base_ids: list[str] | None = None


class DeletionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The audit record of one completed deletion: what was deleted (ids), by whom (key id,
    never the key), when, and how much of each kind went. It holds no content."""

    at: str
    kind: str  # "workspace" or "organization"
    org_id: str
    tenant_id: str = ""  # "" for an organization
    actor_key_id: str
    counts: dict[str, int] = msgspec.field(default_factory=dict)


class TurnPassage(msgspec.Struct, frozen=True, kw_only=True):
    """What one turn returned for one passage: enough to verify a citation later."""

    passage_id: str
    document_id: str
    knowledge_base_id: str
    checksum: str
    text: str
    #: the page or slide the passage starts on (None: its document has no pages)
    page: int | None = None
    #: the headings above the passage, as returned (None: none)
    headings: tuple[str, ...] | None = None


class TurnRecord(msgspec.Struct, frozen=True, kw_only=True):
    turn_id: str
    tenant_id: str
    agent_id: str
    created_at: str
    passages: list[TurnPassage]
