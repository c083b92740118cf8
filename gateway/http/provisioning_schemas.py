"""Request and answer bodies of organizations and workspaces: created, deleted (and
the history of deletions), and imported from an archive."""

from __future__ import annotations

from typing import Literal

import msgspec

from gateway.http.schemas import Strict


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
