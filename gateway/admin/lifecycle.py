"""Deleting workspaces and organizations (platform).

A deletion first marks the record `deleting`: from then on its id stays taken (creating
it again is a conflict) and a later DELETE of it finishes what an interrupted one left.
A workspace then loses, in this order, its keys (each revocation audited in the key
history; its keys answer 401 at once on this replica, and console sessions signed in
with them end at their next request), its agents, each KB's passages (through that KB's
own Scope, in its org collection and in `kb_shared`) and record, its turn records, and
finally its record with its settings and their history. An organization does that for
each of its workspaces, then drops its record; its (now empty) collection is left in
place. A deletion is recorded as one log line of ids and counts.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from gateway.access.auth import Principal
from gateway.admin.keys import key_event
from gateway.admin.knowledge import purge_passages
from gateway.errors import ConflictError, NotFoundError
from gateway.runtime.services import Services
from settings.records import Role, Workspace
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
    services.telemetry.log.info(
        "workspace_deleted", org_id=org_id, tenant_id=tenant_id, **_counts(removal)
    )
    return removal


async def delete_org(services: Services, org_id: str, actor: Principal) -> tuple[int, Removal]:
    """Delete an org, each of its workspaces first; returns how many workspaces went and
    what they held. NotFoundError when there is no such org (any more)."""
    if await services.store.mark_org_deleting(org_id) is None:
        raise NotFoundError("no such organization")
    workspaces, removal = 0, Removal()
    for _ in range(_ORG_SWEEPS):
        found = await services.store.list_workspaces(org_id)
        if not found:
            break
        for workspace in found:
            removal.add(await _remove_workspace(services, workspace, actor))
            workspaces += 1
    try:
        await services.store.delete_org(org_id)
    except NotEmptyError:
        raise ConflictError(
            "workspaces keep being created in this organization; delete it again", field="org_id"
        ) from None
    services.telemetry.log.info(
        "org_deleted", org_id=org_id, workspaces=workspaces, **_counts(removal)
    )
    return workspaces, removal


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
    removal.turns = await services.store.delete_turns(tenant_id)
    removal.settings_changes = len(await services.store.settings_history(tenant_id))
    await services.store.delete_workspace(tenant_id)
    services.settings.invalidate(tenant_id)
    services.telemetry.count("workspaces_deleted")
    return removal


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
