"""A gateway start indexes what earlier runs wrote to Qdrant Edge, before it serves, and
starts anyway when indexing fails; while it serves, it indexes what it was written beside
the turns.

Edge's optimizer holds the GIL while it builds a segment's HNSW graph, so the serving
gateway builds in a child process, on a copy of the shard. These tests lower the indexing
threshold to 1 KB so that a few documents are enough to build the graph that a real store
gets from about 6,500 passages.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import anyio
import pytest
from litestar.testing import AsyncTestClient

from gateway.http.app import create_app
from gateway.runtime.services import Services, build_services
from gateway.runtime.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import Embedder
from ingest.engines.edge.index import EdgeIndex
from ingest.index import IndexUnavailableError
from tests.api.conftest import Gateway, gateway_config
from tests.api.tenants import Tenant, provision

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
        assert gw.services.index.optimize() == []
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

    def optimize(self) -> list[str]:
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
            services.index.ensure_collection("kb_shared")
        finally:
            await services.close()
        assert json.loads(shard_config.read_text())["max_search_threads"] == recorded


@asynccontextmanager
async def _manuals_indexed_while_serving(
    tmp_path: Path, embedder: Embedder, **overrides: object
) -> AsyncIterator[tuple[Services, Tenant, dict[str, object]]]:
    """A gateway indexing what it is written (1 KB threshold, a check every 0.2 s), once
    it logged the build of a KB of the manuals: its services, the tenant and the log line."""
    config = gateway_config(
        tmp_path / "data", edge_indexing_threshold_kb=1, index_check_s=0.2, **overrides
    )
    logs = io.StringIO()
    services = await build_services(
        config, Telemetry(build_logger("INFO", logs)), embedder=embedder
    )
    try:
        async with AsyncTestClient(create_app(config, services)) as client:
            gw = Gateway(client=client, services=services, logs=logs, config=config)
            tenant = await provision(gw, "acme", "acme-support")
            await tenant.kb("manuals")
            await tenant.agent("bot", ["manuals"])
            for name, text in MANUALS.items():
                await tenant.doc("manuals", name, text)
            with anyio.fail_after(60):
                while not (built := _built_events(logs)):  # noqa: ASYNC110 — a log, not an event
                    await anyio.sleep(0.1)
            yield services, tenant, built[0]
    finally:
        await services.close()


async def test_the_serving_gateway_indexes_what_it_was_written(
    tmp_path: Path, embedder: Embedder
) -> None:
    """Documents written over HTTP are indexed while the gateway serves: within a few
    checks (`KBGATE_INDEX_CHECK_S`) it logs `index_built_beside` with a count and
    durations only (in all, and the indexed copy's load), the collection lives in the
    swapped generation, and turns keep answering from it."""
    async with _manuals_indexed_while_serving(tmp_path, embedder) as (services, tenant, built):
        edge = services.config.data_dir / "qdrant-edge"
        assert (edge / "kb_org_acme.live").read_text().startswith("kb_org_acme~")
        assert set(built) == {
            *("event", "level", "timestamp"),
            *("collections", "duration_ms", "load_ms"),
        }
        assert built["collections"] == 1
        load_ms, duration_ms = built["load_ms"], built["duration_ms"]
        assert isinstance(load_ms, int)
        assert isinstance(duration_ms, int)
        assert 0 < load_ms <= duration_ms
        turn = await tenant.retrieve("bot", "How often is each pump inspected?")
        assert turn.status_code == 200, turn.text
        assert turn.json()["passages"][0]["document_id"] == "pumps.txt"


async def test_a_collection_moved_to_its_host_keeps_serving_turns_and_writes(
    tmp_path: Path, embedder: Embedder
) -> None:
    """With `KBGATE_EDGE_HOST_FROM_POINTS` reached, the indexed copy is loaded by a host
    process: the build logs no load in the gateway (`load_ms` 0), and turns, document
    writes and deletions go on through the host until the gateway closes, which stops it."""
    async with _manuals_indexed_while_serving(tmp_path, embedder, edge_host_from_points=1) as (
        services,
        tenant,
        built,
    ):
        assert built["load_ms"] == 0
        shards = services.index._shards  # type: ignore[attr-defined]  # the embedded adapter's
        assert shards.host_of("kb_org_acme") is not None
        turn = await tenant.retrieve("bot", "How often is each pump inspected?")
        assert turn.status_code == 200, turn.text
        assert turn.json()["passages"][0]["document_id"] == "pumps.txt"
        await tenant.doc("manuals", "valves.txt", "Valves are greased every spring.")
        turn = await tenant.retrieve("bot", "When are the valves greased?")
        assert turn.json()["passages"][0]["document_id"] == "valves.txt"
        gone = await tenant.gw.client.delete(
            "/v1/knowledge-bases/manuals/documents/valves.txt", headers=tenant.headers()
        )
        assert gone.status_code == 200, gone.text
    assert shards._hosts == {}  # stopped with the gateway


async def test_a_restart_serves_the_large_collection_from_a_host_and_builds_it_into_the_next(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A start hands a collection of `KBGATE_EDGE_HOST_FROM_POINTS` points to a host once
    it is indexed; a document written then is built beside it into a new host, which takes
    the collection over (no load in the gateway), and turns find it there."""
    async with _manuals_indexed_while_serving(tmp_path, embedder, edge_host_from_points=1) as (
        services,
        tenant,
        _,
    ):
        config = services.config
    logs = io.StringIO()
    services = await build_services(
        config, Telemetry(build_logger("INFO", logs)), embedder=embedder
    )
    try:
        shards = services.index._shards  # type: ignore[attr-defined]  # the embedded adapter's
        first = shards.host_of("kb_org_acme")
        assert first is not None
        async with AsyncTestClient(create_app(config, services)) as client:
            tenant.gw = Gateway(client=client, services=services, logs=logs, config=config)
            await tenant.doc("manuals", "valves.txt", "Valves are greased every spring.")
            with anyio.fail_after(60):
                while not (built := _built_events(logs)):  # noqa: ASYNC110 — a log, not an event
                    await anyio.sleep(0.1)
            assert built[0]["load_ms"] == 0
            second = shards.host_of("kb_org_acme")
            assert second is not None
            assert second is not first
            assert not first.alive
            turn = await tenant.retrieve("bot", "When are the valves greased?")
            assert turn.status_code == 200, turn.text
            assert turn.json()["passages"][0]["document_id"] == "valves.txt"
    finally:
        await services.close()
    assert shards._hosts == {}


async def test_a_host_that_died_is_started_again_by_the_next_upkeep_round(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A host process killed outright is started again by the next upkeep round, before
    any call asks for its collection: logged and counted (`index_host_started_again`) as
    a count only, and turns answer from the new host with every document."""
    async with _manuals_indexed_while_serving(tmp_path, embedder, edge_host_from_points=1) as (
        services,
        tenant,
        _,
    ):
        shards = services.index._shards  # type: ignore[attr-defined]  # the embedded adapter's
        dead = shards.host_of("kb_org_acme")
        assert dead is not None
        dead._process.kill()
        with anyio.fail_after(30):
            while not (started := _events_named(tenant.gw.logs, "index_hosts_started_again")):  # noqa: ASYNC110 — a log, not an event
                await anyio.sleep(0.1)
        assert {key: started[0][key] for key in ("hosts", "level")} == {
            "hosts": 1,
            "level": "warning",
        }
        assert set(started[0]) == {"event", "level", "timestamp", "hosts"}
        again = shards.host_of("kb_org_acme")
        assert again is not None
        assert again is not dead
        assert again.alive
        metrics = await tenant.gw.client.get("/metrics", headers=tenant.gw.platform)
        assert 'kbgate_events_total{event="index_host_started_again"} 1.0' in metrics.text
        turn = await tenant.retrieve("bot", "How often is each pump inspected?")
        assert turn.status_code == 200, turn.text
        assert turn.json()["passages"][0]["document_id"] == "pumps.txt"
        assert shards.host_of("kb_org_acme") is again


def _events_named(logs: io.StringIO, name: str) -> list[dict[str, object]]:
    return [line for line in _events(logs) if line.get("event") == name]


def _built_events(logs: io.StringIO) -> list[dict[str, object]]:
    return [line for line in _events(logs) if line.get("event") == "index_built_beside"]
