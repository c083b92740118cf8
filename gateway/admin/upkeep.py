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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gateway.admin import lifecycle
from gateway.admin.provisioning import PLATFORM
from gateway.errors import GatewayError
from gateway.telemetry import Telemetry
from ingest.index import IndexUnavailableError
from settings.config import Config
from settings.store import SettingsStore, StoreUnavailableError

#: what a step may fail with and be tried again next period
_TRANSIENT = (StoreUnavailableError, IndexUnavailableError)


@dataclass(frozen=True, slots=True)
class Upkeep:
    """What the gateway's own upkeep uses: the deletions it finishes, the store it purges,
    counts and logs, and the platform's config (its periods)."""

    deletions: lifecycle.Deletions
    store: SettingsStore
    telemetry: Telemetry
    config: Config


async def finish_pending_deletions(upkeep: Upkeep) -> int:
    """Complete every deletion left marked; returns how many orgs and workspaces it
    finished (one another caller finished meanwhile is not counted)."""
    orgs, workspaces = await upkeep.store.pending_deletions()
    marked_orgs = {org.org_id for org in orgs}
    finished = 0
    for workspace in workspaces:
        if workspace.org_id in marked_orgs:
            continue  # its org's deletion takes it
        try:
            await lifecycle.delete_workspace(
                upkeep.deletions, workspace.org_id, workspace.tenant_id, PLATFORM
            )
            finished += 1
        except GatewayError:
            continue  # finished by another replica meanwhile
    for org in orgs:
        try:
            await lifecycle.delete_org(upkeep.deletions, org.org_id, PLATFORM)
            finished += 1
        except GatewayError:
            continue  # finished elsewhere, or workspaces still being created: next start
    if finished:
        upkeep.telemetry.log.info("pending_deletions_finished", finished=finished)
    return finished


async def purge_retained(upkeep: Upkeep, now: datetime | None = None) -> tuple[int, int]:
    """Purge expired turn records, and settings, KB and agent changes past their retention;
    returns (turn records, changes) removed."""
    turns = await upkeep.store.purge_expired_turns()
    settings_changes = admin_changes = 0
    days = upkeep.config.settings_history_days
    if days:
        cutoff = ((now or datetime.now(UTC)) - timedelta(days=days)).isoformat()
        settings_changes = await upkeep.store.purge_settings_history(cutoff)
        admin_changes = await upkeep.store.purge_admin_history(cutoff)
    if turns or settings_changes or admin_changes:
        upkeep.telemetry.log.info(
            "retention_purged",
            turns=turns,
            settings_changes=settings_changes,
            kb_and_agent_changes=admin_changes,
        )
    return turns, settings_changes + admin_changes


async def run_upkeep(upkeep: Upkeep) -> None:
    """Finish pending deletions, then purge on schedule, until cancelled."""
    pending = True
    while True:
        if pending:
            pending = not await _step(upkeep, "pending_deletions", finish_pending_deletions)
        await _step(upkeep, "retention", purge_retained)
        await asyncio.sleep(upkeep.config.retention_sweep_s)


async def _step(upkeep: Upkeep, name: str, work: Callable[[Upkeep], Awaitable[object]]) -> bool:
    """Run one step; False (logged) when a dependency failed it."""
    try:
        await work(upkeep)
    except _TRANSIENT as error:
        upkeep.telemetry.log.warning("upkeep_failed", step=name, error_type=type(error).__name__)
        return False
    return True
