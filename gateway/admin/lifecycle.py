"""Deleting workspaces and organizations (platform).

A deletion first marks the record `deleting`: from then on its id stays taken (creating
it again is a conflict) and a later DELETE of it finishes what an interrupted one left.
A workspace then loses, in this order, its keys (each revocation audited in the key
history; its keys answer 401 at once on this replica, and console sessions signed in
with them end at their next request), its agents, each KB's passages (through that KB's
own Scope, in its org collection and in `kb_shared`) and record, its golden sets and
evaluations (a running one stopped), its turn records, and
finally its record with its settings, its settings and KB/agent change histories, its
held-back counts, its pseudonym key and its key history (every key event of its id): a
workspace created again under the id starts with none of them. An organization does that for
each of its workspaces, then drops its collection `kb_org_<org_id>` (whatever points it
still held, written by no workspace left, are counted with the passages) and its record.
Each completed deletion leaves an audit record in the store (ids, the actor's key id,
counts; no content), read through `deletion_history`; its log line carries counts only.

Writes race deletions safely: a document write checks before it embeds that its
workspace is not being deleted, and after it wrote that its KB is still there
(`gateway.admin.knowledge`); since a deletion marks the workspace, removes each KB record
and then deletes that KB's passages once more, whatever a write put in lands before that
last purge or is taken back out by the write itself, which answers 404.

Deletions left unfinished by a crash are finished at start (`gateway.admin.upkeep`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import UTC, datetime

from gateway.access.auth import Principal
from gateway.admin.calibration import Calibration
from gateway.admin.calibration import forget as forget_calibration
from gateway.admin.keys import key_event
from gateway.admin.knowledge import purge_passages
from gateway.errors import ConflictError, NotFoundError
from gateway.telemetry import Telemetry
from ingest.index import Index, org_collection
from settings.cache import CachedSettings
from settings.records import DeletionRecord, Role, Workspace
from settings.store import NotEmptyError, SettingsStore

#: how many times an org deletion sweeps up workspaces created while it ran
_ORG_SWEEPS = 3


@dataclass(frozen=True, slots=True)
class Deletions:
    """What deleting workspaces and organizations uses: their records, keys and audit in
    the store, the settings cache (and the credentials) their deletion invalidates, the
    index their passages and collections live in, their golden sets and evaluations, and
    counts."""

    store: SettingsStore
    settings: CachedSettings
    index: Index
    calibration: Calibration
    telemetry: Telemetry


@dataclass(slots=True)
class Removal:
    """What a deletion removed (counts only)."""

    passages: int = 0
    knowledge_bases: int = 0
    agents: int = 0
    keys: int = 0
    turns: int = 0
    settings_changes: int = 0

    def add(self, other: Removal) -> None:
        for item in fields(self):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))


async def delete_workspace(
    deletions: Deletions, org_id: str, tenant_id: str, actor: Principal
) -> Removal:
    """Delete a workspace of the org and everything it owns; NotFoundError when the org has
    no such workspace (any more)."""
    workspace = await deletions.store.get_workspace(tenant_id)
    if workspace is None or workspace.org_id != org_id:
        raise NotFoundError("no such workspace in this organization")
    removal = await _remove_workspace(deletions, workspace, actor)
    deletions.telemetry.log.info("workspace_deleted", **_counts(removal))
    return removal


@dataclass(slots=True)
class OrgRemoval:
    """What an organization's deletion removed: its workspaces and their totals, and
    whether this call dropped its collection."""

    workspaces: int = 0
    removal: Removal = field(default_factory=Removal)
    collection_dropped: bool = False


async def delete_org(deletions: Deletions, org_id: str, actor: Principal) -> OrgRemoval:
    """Delete an org: each of its workspaces, then its collection, then its record.
    NotFoundError when there is no such org (any more)."""
    if await deletions.store.mark_org_deleting(org_id) is None:
        raise NotFoundError("no such organization")
    done = OrgRemoval()
    for _ in range(_ORG_SWEEPS):
        found = await deletions.store.list_workspaces(org_id)
        if not found:
            break
        for workspace in found:
            done.removal.add(await _remove_workspace(deletions, workspace, actor))
            done.workspaces += 1
    if not await deletions.store.list_workspaces(org_id):
        await _drop_collection(deletions.index, org_id, done)
    try:
        await deletions.store.delete_org(org_id)
    except NotEmptyError:
        raise ConflictError(
            "workspaces keep being created in this organization; delete it again", field="org_id"
        ) from None
    counts = {"workspaces": done.workspaces, **_counts(done.removal)}
    await _audit(
        deletions.store, actor, kind="organization", org_id=org_id, tenant_id="", counts=counts
    )
    deletions.telemetry.log.info(
        "org_deleted", collection_dropped=done.collection_dropped, **counts
    )
    return done


async def _drop_collection(index: Index, org_id: str, done: OrgRemoval) -> None:
    left = await index.drop_collection(org_collection(org_id))
    done.collection_dropped = left is not None
    done.removal.passages += left or 0


async def _remove_workspace(
    deletions: Deletions, workspace: Workspace, actor: Principal
) -> Removal:
    tenant_id = workspace.tenant_id
    await deletions.store.mark_workspace_deleting(tenant_id)
    deletions.settings.invalidate(tenant_id)
    removal = Removal(
        keys=await _revoke_keys(deletions.store, deletions.settings, tenant_id, actor)
    )
    for agent in await deletions.store.list_agents(tenant_id):
        removal.agents += await deletions.store.delete_agent(tenant_id, agent.agent_id)
    for kb in await deletions.store.list_knowledge_bases(tenant_id):
        removal.passages += await purge_passages(deletions.index, kb)
        removal.knowledge_bases += await deletions.store.delete_knowledge_base(tenant_id, kb.kb_id)
        # Again once the record is gone: a document write that began before may have landed.
        removal.passages += await purge_passages(deletions.index, kb)
    await forget_calibration(deletions.calibration, tenant_id)  # golden sets, evaluations (stopped)
    removal.turns = await deletions.store.delete_turns(tenant_id)
    removal.settings_changes = len(await deletions.store.settings_history(tenant_id))
    await deletions.store.delete_workspace(tenant_id)
    deletions.settings.invalidate(tenant_id)
    await _audit(
        deletions.store,
        actor,
        kind="workspace",
        org_id=workspace.org_id,
        tenant_id=tenant_id,
        counts=_counts(removal),
    )
    deletions.telemetry.count("workspaces_deleted")
    return removal


async def _audit(
    store: SettingsStore,
    actor: Principal,
    *,
    kind: str,
    org_id: str,
    tenant_id: str,
    counts: dict[str, int],
) -> None:
    await store.record_deletion(
        DeletionRecord(
            at=datetime.now(UTC).isoformat(),
            kind=kind,
            org_id=org_id,
            tenant_id=tenant_id,
            actor_key_id=actor.key_id,
            counts=counts,
        )
    )


async def deletion_history(store: SettingsStore) -> list[DeletionRecord]:
    """Every completed deletion's audit record, oldest first (platform)."""
    return await store.deletion_history()


async def _revoke_keys(
    store: SettingsStore, settings: CachedSettings, tenant_id: str, actor: Principal
) -> int:
    """Revoke every key of the workspace, each audited; returns how many."""
    revoked = 0
    for key in await store.list_api_keys():
        if key.tenant_id != tenant_id or Role.PLATFORM.value in key.roles:
            continue
        event = key_event("revoked", key, actor)
        revoked += await store.revoke_api_key(key.key_id, event) is not None
    settings.invalidate_credentials()
    return revoked


def _counts(removal: Removal) -> dict[str, int]:
    return {item.name: getattr(removal, item.name) for item in fields(removal)}
