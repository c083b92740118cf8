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
from gateway.admin.calibration import forget as forget_calibration
from gateway.admin.keys import key_event
from gateway.admin.knowledge import purge_passages
from gateway.errors import ConflictError, NotFoundError
from gateway.runtime.services import Services
from ingest.index import org_collection
from settings.records import DeletionRecord, Role, Workspace
from settings.store import NotEmptyError

#: how many times an org deletion sweeps up workspaces created while it ran
_ORG_SWEEPS = 3


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
    services: Services, org_id: str, tenant_id: str, actor: Principal
) -> Removal:
    """Delete a workspace of the org and everything it owns; NotFoundError when the org has
    no such workspace (any more)."""
    workspace = await services.store.get_workspace(tenant_id)
    if workspace is None or workspace.org_id != org_id:
        raise NotFoundError("no such workspace in this organization")
    removal = await _remove_workspace(services, workspace, actor)
    services.telemetry.log.info("workspace_deleted", **_counts(removal))
    return removal


@dataclass(slots=True)
class OrgRemoval:
    """What an organization's deletion removed: its workspaces and their totals, and
    whether this call dropped its collection."""

    workspaces: int = 0
    removal: Removal = field(default_factory=Removal)
    collection_dropped: bool = False


async def delete_org(services: Services, org_id: str, actor: Principal) -> OrgRemoval:
    """Delete an org: each of its workspaces, then its collection, then its record.
    NotFoundError when there is no such org (any more)."""
    if await services.store.mark_org_deleting(org_id) is None:
        raise NotFoundError("no such organization")
    done = OrgRemoval()
    for _ in range(_ORG_SWEEPS):
        found = await services.store.list_workspaces(org_id)
        if not found:
            break
        for workspace in found:
            done.removal.add(await _remove_workspace(services, workspace, actor))
            done.workspaces += 1
    if not await services.store.list_workspaces(org_id):
        await _drop_collection(services, org_id, done)
    try:
        await services.store.delete_org(org_id)
    except NotEmptyError:
        raise ConflictError(
            "workspaces keep being created in this organization; delete it again", field="org_id"
        ) from None
    counts = {"workspaces": done.workspaces, **_counts(done.removal)}
    await _audit(services, actor, kind="organization", org_id=org_id, tenant_id="", counts=counts)
    services.telemetry.log.info("org_deleted", collection_dropped=done.collection_dropped, **counts)
    return done


async def _drop_collection(services: Services, org_id: str, done: OrgRemoval) -> None:
    left = await services.index.drop_collection(org_collection(org_id))
    done.collection_dropped = left is not None
    done.removal.passages += left or 0


async def _remove_workspace(services: Services, workspace: Workspace, actor: Principal) -> Removal:
    tenant_id = workspace.tenant_id
    await services.store.mark_workspace_deleting(tenant_id)
    services.settings.invalidate(tenant_id)
    removal = Removal(keys=await _revoke_keys(services, tenant_id, actor))
    for agent in await services.store.list_agents(tenant_id):
        removal.agents += await services.store.delete_agent(tenant_id, agent.agent_id)
    for kb in await services.store.list_knowledge_bases(tenant_id):
        removal.passages += await purge_passages(services, kb)
        removal.knowledge_bases += await services.store.delete_knowledge_base(tenant_id, kb.kb_id)
        # Again once the record is gone: a document write that began before may have landed.
        removal.passages += await purge_passages(services, kb)
    await forget_calibration(services, tenant_id)  # golden sets, evaluations (stopped)
    removal.turns = await services.store.delete_turns(tenant_id)
    removal.settings_changes = len(await services.store.settings_history(tenant_id))
    await services.store.delete_workspace(tenant_id)
    services.settings.invalidate(tenant_id)
    await _audit(
        services,
        actor,
        kind="workspace",
        org_id=workspace.org_id,
        tenant_id=tenant_id,
        counts=_counts(removal),
    )
    services.telemetry.count("workspaces_deleted")
    return removal


async def _audit(
    services: Services,
    actor: Principal,
    *,
    kind: str,
    org_id: str,
    tenant_id: str,
    counts: dict[str, int],
) -> None:
    await services.store.record_deletion(
        DeletionRecord(
            at=datetime.now(UTC).isoformat(),
            kind=kind,
            org_id=org_id,
            tenant_id=tenant_id,
            actor_key_id=actor.key_id,
            counts=counts,
        )
    )


async def deletion_history(services: Services) -> list[DeletionRecord]:
    """Every completed deletion's audit record, oldest first (platform)."""
    return await services.store.deletion_history()


async def _revoke_keys(services: Services, tenant_id: str, actor: Principal) -> int:
    """Revoke every key of the workspace, each audited; returns how many."""
    revoked = 0
    for key in await services.store.list_api_keys():
        if key.tenant_id != tenant_id or Role.PLATFORM.value in key.roles:
            continue
        event = key_event("revoked", key, actor)
        revoked += await services.store.revoke_api_key(key.key_id, event) is not None
    services.settings.invalidate_credentials()
    return revoked


def _counts(removal: Removal) -> dict[str, int]:
    return {item.name: getattr(removal, item.name) for item in fields(removal)}
