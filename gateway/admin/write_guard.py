"""Document writes that race a deletion: nothing stays in a knowledge base that is going.

A write checks before it embeds that its workspace is not being deleted, and after it
wrote that its KB record is still the one it wrote into (same creation time) and its
workspace still not being deleted. A deletion marks the workspace, removes each KB
record and then deletes that KB's passages once more (`gateway.admin.lifecycle`,
`gateway.admin.knowledge.delete_knowledge_base`). So a write's points either land before
that last purge, which removes them, or the write finds the KB gone afterwards, takes
its document back out, and answers 404, as it would for any unknown KB.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager

from gateway.errors import NotFoundError
from gateway.telemetry import Telemetry
from ingest.sync import DocumentWriter, Target
from settings.records import KnowledgeBase, Lifecycle
from settings.store import SettingsStore


class KeyedLocks:
    """One asyncio lock per key, dropped when nobody holds or waits for it: one writer per
    document at a time in this process (replacing a document is read-then-write)."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        async with lock:
            yield


def _gone() -> NotFoundError:
    return NotFoundError("no such knowledge base")


async def require_live_workspace(store: SettingsStore, tenant_id: str) -> None:
    """NotFoundError while the workspace is being deleted (or is gone)."""
    workspace = await store.get_workspace(tenant_id)
    if workspace is None or workspace.state is Lifecycle.DELETING:
        raise _gone()


async def take_back_if_gone(
    store: SettingsStore,
    writer: DocumentWriter,
    telemetry: Telemetry,
    kb: KnowledgeBase,
    target: Target,
    *,
    document_id: str,
) -> None:
    """After a write into `kb`: when the KB was deleted (or deleted and made again) or its
    workspace is being deleted meanwhile, delete the document's points from `target`
    and raise NotFoundError."""
    current = await store.get_knowledge_base(kb.tenant_id, kb.kb_id)
    workspace = await store.get_workspace(kb.tenant_id)
    if (
        current is not None
        and current.created_at == kb.created_at
        and workspace is not None
        and workspace.state is not Lifecycle.DELETING
    ):
        return
    await asyncio.to_thread(writer.delete, target, document_id)
    telemetry.count("document_writes_taken_back")
    raise _gone()
