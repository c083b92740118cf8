"""A model migration's job, page by page: a page of the KB's passages embedded with the
target model, and the job's progress (`gateway.admin.migration` runs the job)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec

from gateway.access.expensive import Stop, stop_point
from ingest.embedder.embedding import Embedder
from ingest.index import StoredPassage
from ingest.sync import embedding_input
from settings.migration import ModelMigration
from settings.store import SettingsStore

#: the job writes its progress to the store at most this often
PROGRESS_EVERY_S = 2.0


def embed_page(
    embedder: Embedder, page: Sequence[StoredPassage], lane: str, stop: Stop
) -> dict[str, tuple[float, ...]]:
    """One page's passages embedded as a write embeds them (title and text), on the
    model's runner in the workspace's lane."""
    stop_point(stop)
    texts = [embedding_input(p.payload.title, p.payload.text) for p in page]
    found = embedder.embed_documents(texts, lane=lane)
    return {p.point_id: e.dense for p, e in zip(page, found, strict=True)}


class Progress:
    """Passages done, the KB's passages, and the job's rate, written at most every
    `PROGRESS_EVERY_S`."""

    def __init__(self, migration: ModelMigration) -> None:
        self.done = migration.done
        self.total = migration.total
        self.rate = migration.rate
        self._since = time.monotonic()
        self._counted = 0

    def embedded(self, count: int) -> None:
        self.done = min(self.total, self.done + count) if self.total else self.done + count
        self._counted += count

    def apply(self, migration: ModelMigration) -> ModelMigration:
        at = datetime.now(UTC).isoformat()
        return msgspec.structs.replace(
            migration, done=self.done, total=self.total, rate=self.rate, updated_at=at
        )

    async def maybe_save(self, store: SettingsStore, migration: ModelMigration) -> None:
        elapsed = time.monotonic() - self._since
        if elapsed < PROGRESS_EVERY_S:
            return
        self.rate = round(self._counted / elapsed, 1)
        self._since, self._counted = time.monotonic(), 0
        await store.put_migration(self.apply(migration))
