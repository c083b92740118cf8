"""The SettingsStore's upkeep contract on every adapter (SQLite, a real redis-server, a
Redis container where Docker runs): deletions left marked, and retention purges."""

from __future__ import annotations

import asyncio

import pytest

from settings.records import AdminChange, TurnPassage, TurnRecord
from settings.store import SettingsStore
from tests.integration.test_store_contract import (  # the contract suite's backends
    backend,
    org,
    redis_container_url,
    redis_server,
    store,
    workspace,
)

__all__ = ["backend", "redis_container_url", "redis_server", "store"]  # fixtures, by name

pytestmark = pytest.mark.anyio


async def test_pending_deletions_lists_what_is_marked_and_nothing_else(
    store: SettingsStore,
) -> None:
    """Only orgs and workspaces marked `deleting` are pending, each ordered by id; once
    removed they are not pending any more."""
    for org_id in ("acme", "globex"):
        await store.create_org(org(org_id))
    for tenant_id, org_id in (("t2", "acme"), ("t1", "acme"), ("t3", "globex")):
        await store.create_workspace(workspace(tenant_id, org_id))
    assert await store.pending_deletions() == ([], [])

    await store.mark_workspace_deleting("t2")
    await store.mark_workspace_deleting("t1")
    await store.mark_org_deleting("globex")
    orgs, workspaces = await store.pending_deletions()

    assert [o.org_id for o in orgs] == ["globex"]
    assert [w.tenant_id for w in workspaces] == ["t1", "t2"]
    await store.delete_workspace("t1")
    assert [w.tenant_id for w in (await store.pending_deletions())[1]] == ["t2"]


async def test_settings_history_is_purged_before_a_cutoff_for_every_workspace(
    store: SettingsStore,
) -> None:
    """Changes made before the cutoff go, in every workspace; later ones stay, in order,
    and the count says how many went."""
    await store.create_org(org())
    for tenant_id in ("t1", "t2"):
        await store.create_workspace(workspace(tenant_id))
        for day, value in (("01", 1), ("02", 2), ("05", 3)):
            await store.update_workspace_settings(
                tenant_id,
                {"max_knowledge_bases_per_agent": value},
                key_id="k",
                at=f"2026-06-{day}T00:00:00+00:00",
            )

    removed = await store.purge_settings_history("2026-06-03T00:00:00+00:00")

    assert removed == 4
    for tenant_id in ("t1", "t2"):
        kept = await store.settings_history(tenant_id)
        assert [c.new for c in kept] == [3]
    assert await store.purge_settings_history("2026-06-03T00:00:00+00:00") == 0


async def test_kb_and_agent_changes_are_purged_before_a_cutoff_for_every_workspace(
    store: SettingsStore,
) -> None:
    """KB and agent changes made before the cutoff go, in every workspace; later ones
    stay, in order, and the count says how many went."""
    await store.create_org(org())
    for tenant_id in ("t1", "t2"):
        await store.create_workspace(workspace(tenant_id))
        for day, object_id in (("01", "kb-a"), ("02", "kb-b"), ("05", "bot")):
            await store.record_admin_change(
                AdminChange(
                    at=f"2026-06-{day}T00:00:00+00:00",
                    key_id="k",
                    tenant_id=tenant_id,
                    kind="agent" if object_id == "bot" else "knowledge_base",
                    object_id=object_id,
                    action="created",
                )
            )

    removed = await store.purge_admin_history("2026-06-03T00:00:00+00:00")

    assert removed == 4
    for tenant_id in ("t1", "t2"):
        kept = await store.admin_history(tenant_id)
        assert [c.object_id for c in kept] == ["bot"]
    assert await store.purge_admin_history("2026-06-03T00:00:00+00:00") == 0


async def test_expired_turn_records_are_gone_after_a_purge(store: SettingsStore) -> None:
    """A turn past its time cannot be read, and after `purge_expired_turns` (SQLite) or
    Redis's own expiry it is not kept either: purging again removes nothing; a live turn
    stays readable."""
    passage = TurnPassage(
        passage_id="p", document_id="d", knowledge_base_id="kb", checksum="c", text="x"
    )

    def turn(turn_id: str) -> TurnRecord:
        return TurnRecord(
            turn_id=turn_id, tenant_id="t1", agent_id="a", created_at="now", passages=[passage]
        )

    await store.put_turn(turn("short"), ttl_s=1)
    await store.put_turn(turn("long"), ttl_s=60)
    await asyncio.sleep(1.2)

    assert await store.get_turn("t1", "short") is None
    await store.purge_expired_turns()
    assert await store.purge_expired_turns() == 0
    assert await store.get_turn("t1", "long") is not None
    assert await store.delete_turns("t1") == 1  # only the live one was still kept
