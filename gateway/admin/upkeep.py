"""What the gateway does on its own while it runs: finish deletions a crash left
unfinished, and purge what retention lets go.

`run_upkeep` is started by the app's lifespan. At start it finishes every workspace and
organization still marked `deleting` (as a platform DELETE would, audited as the
platform); it tries again each period until that succeeded once. Every
`KBGATE_RETENTION_SWEEP_S` it purges expired turn records (SQLite; Redis expires them
itself) and, with `KBGATE_SETTINGS_HISTORY_DAYS` set, settings changes older than that.
A failing step (store or index down) is logged and tried again next period. Logs carry
ids and counts only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from gateway.admin import lifecycle
from gateway.admin.provisioning import PLATFORM
from gateway.errors import GatewayError
from gateway.runtime.services import Services
from ingest.index import IndexUnavailableError
from settings.store import StoreUnavailableError

#: what a step may fail with and be tried again next period
_TRANSIENT = (StoreUnavailableError, IndexUnavailableError)


async def finish_pending_deletions(services: Services) -> int:
    """Complete every deletion left marked; returns how many orgs and workspaces it
    finished (one another caller finished meanwhile is not counted)."""
    orgs, workspaces = await services.store.pending_deletions()
    marked_orgs = {org.org_id for org in orgs}
    finished = 0
    for workspace in workspaces:
        if workspace.org_id in marked_orgs:
            continue  # its org's deletion takes it
        try:
            await lifecycle.delete_workspace(
                services, workspace.org_id, workspace.tenant_id, PLATFORM
            )
            finished += 1
        except GatewayError:
            continue  # finished by another replica meanwhile
    for org in orgs:
        try:
            await lifecycle.delete_org(services, org.org_id, PLATFORM)
            finished += 1
        except GatewayError:
            continue  # finished elsewhere, or workspaces still being created: next start
    if finished:
        services.telemetry.log.info("pending_deletions_finished", finished=finished)
    return finished


async def purge_retained(services: Services, now: datetime | None = None) -> tuple[int, int]:
    """Purge expired turn records, and settings, KB and agent changes past their retention;
    returns (turn records, changes) removed."""
    turns = await services.store.purge_expired_turns()
    settings_changes = admin_changes = 0
    days = services.config.settings_history_days
    if days:
        cutoff = ((now or datetime.now(UTC)) - timedelta(days=days)).isoformat()
        settings_changes = await services.store.purge_settings_history(cutoff)
        admin_changes = await services.store.purge_admin_history(cutoff)
    if turns or settings_changes or admin_changes:
        services.telemetry.log.info(
            "retention_purged",
            turns=turns,
            settings_changes=settings_changes,
            kb_and_agent_changes=admin_changes,
        )
    return turns, settings_changes + admin_changes


async def run_upkeep(services: Services) -> None:
    """Finish pending deletions, then purge on schedule, until cancelled."""
    pending = True
    while True:
        if pending:
            pending = not await _step(services, "pending_deletions", finish_pending_deletions)
        await _step(services, "retention", purge_retained)
        await asyncio.sleep(services.config.retention_sweep_s)


async def _step(
    services: Services, name: str, work: Callable[[Services], Awaitable[object]]
) -> bool:
    """Run one step; False (logged) when a dependency failed it."""
    try:
        await work(services)
    except _TRANSIENT as error:
        services.telemetry.log.warning("upkeep_failed", step=name, error_type=type(error).__name__)
        return False
    return True
