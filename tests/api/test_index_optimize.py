"""A gateway start indexes what earlier runs wrote to Qdrant Edge, before it serves, and
starts anyway when indexing fails; what it is written while it serves is searched exactly
until the next start.

Edge's optimizer holds the GIL while it builds a segment's HNSW graph, so only a start
builds, before the first turn. These tests lower the indexing threshold to 1 KB so that a
few documents are enough to build the graph that a real store gets from about 6,500
passages.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from gateway.http.app import create_app
from gateway.runtime.services import build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import Embedder
from ingest.engines.edge.index import EdgeIndex
from ingest.index import IndexUnavailableError
from tests.api.conftest import Gateway, gateway_config
from tests.api.tenants import provision

pytestmark = pytest.mark.anyio

StartGateway = Callable[[], AbstractAsyncContextManager[Gateway]]

MANUALS = {
    "pumps.txt": "Each pump is inspected every month by the site engineer. " * 8,
    "valves.txt": "Relief valves are replaced every five years, or after any leak. " * 8,
    "boilers.txt": "Boiler water is tested weekly for hardness and dissolved oxygen. " * 8,
}


@pytest.fixture
def start(tmp_path: Path, embedder: Embedder) -> StartGateway:
    """Starts of one gateway on one data dir, with `KBGATE_EDGE_INDEXING_THRESHOLD_KB` 1."""
    config = gateway_config(tmp_path / "data", edge_indexing_threshold_kb=1)

    @asynccontextmanager
    async def started() -> AsyncIterator[Gateway]:
        logs = io.StringIO()
        services = await build_services(
            config, Telemetry(build_logger("INFO", logs)), embedder=embedder
        )
        try:
            async with AsyncTestClient(create_app(config, services)) as client:
                yield Gateway(client=client, services=services, logs=logs, config=config)
        finally:
            await services.close()

    return started


def _events(logs: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in logs.getvalue().splitlines() if line.startswith("{")]


def _optimized_events(logs: io.StringIO) -> list[dict[str, object]]:
    return [line for line in _events(logs) if line.get("event") == "index_optimized"]


async def test_start_indexes_earlier_writes_and_turns_stay_in_scope(start: StartGateway) -> None:
    """Documents ingested by one run are indexed when the next run starts: it logs
    `index_optimized` with a count and a duration only, its turns find the right document
    and never another tenant's, and a third start has nothing left to index."""
    async with start() as gw:
        assert _optimized_events(gw.logs) == []
        support = await provision(gw, "acme", "acme-support")
        sales = await provision(gw, "acme", "acme-sales")  # same org: the same collection
        for tenant in (support, sales):
            await tenant.kb("manuals")
            await tenant.agent("bot", ["manuals"])
        for name, text in MANUALS.items():
            await support.doc("manuals", name, text)
        await sales.doc("manuals", "secret.txt", "Each pump is inspected every month. " * 8)

    async with start() as gw:
        [event] = _optimized_events(gw.logs)
        assert set(event) >= {"collections", "duration_ms"}
        assert event["collections"] == 1
        assert not {"tenant", "collection", "kb", "text"} & set(event)
        assert await gw.services.index.optimize() == []
        support.gw = gw  # workspaces and keys are in the data dir
        turn = await support.retrieve("bot", "How often is each pump inspected?")
        assert turn.status_code == 200, turn.text
        passages = turn.json()["passages"]
        assert passages[0]["document_id"] == "pumps.txt"
        assert {p["document_id"] for p in passages} <= set(MANUALS)

    async with start() as gw:
        assert _optimized_events(gw.logs) == []


class _OptimizerDown(EdgeIndex):
    """Qdrant Edge whose optimizer fails (a full disk, say); everything else is real."""

    async def optimize(self) -> list[str]:
        raise IndexUnavailableError("simulated: the optimizer failed")


async def test_a_failing_optimizer_does_not_stop_the_start(
    tmp_path: Path, embedder: Embedder
) -> None:
    """When indexing fails at start, the gateway still starts, logs
    `index_optimize_failed` with nothing about which collection, and serves turns from
    the plain segments."""
    config = gateway_config(tmp_path / "data")
    logs = io.StringIO()
    services = await build_services(
        config,
        Telemetry(build_logger("INFO", logs)),
        embedder=embedder,
        engine=(_OptimizerDown(config.data_dir), "qdrant-edge"),
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            gw = Gateway(client=client, services=services, logs=logs, config=config)
            failed = [line for line in _events(logs) if line["event"] == "index_optimize_failed"]
            assert len(failed) == 1
            assert set(failed[0]) <= {"event", "level", "timestamp"}
            tenant = await provision(gw, "acme", "acme-support")
            await tenant.kb("manuals")
            await tenant.agent("bot", ["manuals"])
            await tenant.doc("manuals", "pumps.txt", MANUALS["pumps.txt"])
            turn = await tenant.retrieve("bot", "How often is each pump inspected?")
            assert turn.status_code == 200, turn.text
            assert turn.json()["passages"][0]["document_id"] == "pumps.txt"
    finally:
        await services.close()


async def test_search_pool_setting_reaches_the_shards(tmp_path: Path, embedder: Embedder) -> None:
    """`KBGATE_EDGE_SEARCH_THREADS` sizes the search pool of every shard the gateway opens,
    and a later start without it puts back the default: one thread per usable core."""
    shard_config = tmp_path / "data" / "qdrant-edge" / "kb_shared" / "edge_config.json"
    cores = len(os.sched_getaffinity(0))
    for overrides, recorded in (({"edge_search_threads": cores + 2}, cores + 2), ({}, cores)):
        config = gateway_config(tmp_path / "data", **overrides)
        telemetry = Telemetry(build_logger("WARNING"))
        services = await build_services(config, telemetry, embedder=embedder)
        try:
            await services.index.ensure_collection("kb_shared")
        finally:
            await services.close()
        assert json.loads(shard_config.read_text())["max_search_threads"] == recorded
