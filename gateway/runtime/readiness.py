"""Readiness: whether each dependency answers, every check bounded by its timeout.

`GET /health/ready` reports it; each check also sets the dependency's `dependency_up`
gauge.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.telemetry import Telemetry
from ingest.embedder.embedding import Embedder
from ingest.index import Index, IndexUnavailableError
from settings.config import Config
from settings.store import SettingsStore, StoreUnavailableError


class Readiness:
    """The index, the store and the model, as the composition root built them."""

    def __init__(
        self,
        index: tuple[Index, str],
        store: tuple[SettingsStore, str],
        embedder: Embedder,
        telemetry: Telemetry,
        config: Config,
    ) -> None:
        """`index` and `store`: each adapter and its engine's name."""
        (self.index, self.index_engine), (self.store, self.store_engine) = index, store
        self.embedder = embedder
        self.telemetry = telemetry
        self.config = config

    async def dependencies(self) -> dict[str, dict[str, Any]]:
        """Per-dependency status; each check bounded by its timeout."""
        return {
            "index": await self._check(
                "index",
                self.index_engine,
                self.index.ping(),
                self.config.qdrant_timeout_s,
            ),
            "store": await self._check(
                "store", self.store_engine, self.store.ping(), self.config.redis_timeout_s
            ),
            "embedder": {"status": "up", "dense_dim": self.embedder.dense_dim},
        }

    async def _check(self, name: str, engine: str, probe: Any, timeout_s: float) -> dict[str, Any]:
        try:
            await asyncio.wait_for(probe, timeout=timeout_s)
        except (IndexUnavailableError, StoreUnavailableError, TimeoutError, OSError):
            self.telemetry.dependency_up.labels(dependency=name).set(0)
            return {"status": "down", "engine": engine}
        self.telemetry.dependency_up.labels(dependency=name).set(1)
        return {"status": "up", "engine": engine}
