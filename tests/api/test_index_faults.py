"""The index failing or hanging under a turn: 503 with Retry-After, never a partial answer,
readiness names the index, and recovery without a restart.

The real Qdrant Edge index sits behind `FlakyIndex`, which fails or stalls the calls to one
collection on demand (the shared one), as a Qdrant node that is down or slow would. Where
Docker runs, tests/integration/test_index_contract.py covers a real unreachable server.
"""

from __future__ import annotations

import io
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
from litestar.testing import AsyncTestClient

from gateway.http.app import create_app
from gateway.runtime.services import build_services
from gateway.runtime.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import Embedder
from ingest.engines.edge.index import EdgeIndex
from ingest.index import (
    SHARED_COLLECTION,
    Index,
    IndexUnavailableError,
    Leg,
    QueryResult,
    RankResult,
)
from ingest.payload import PassagePayload, Scope
from tests.api.conftest import Gateway, gateway_config
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

TIMEOUT_S = 0.5
Mode = Literal["ok", "fail", "hang"]


class FlakyIndex:
    """A real index whose queries and pings on one collection fail or hang on demand.

    Its hang sleeps without the GIL, as a call waiting on a network engine does, so the
    turn calls it from a worker thread under the index timeout (Edge itself, which holds
    the GIL throughout, is called directly).
    """

    holds_the_gil = False

    def __init__(self, inner: Index, collection: str) -> None:
        self.inner = inner
        self.collection = collection
        self.mode: Mode = "ok"
        #: trouble only when the chosen passages' payloads are read, not while ranking
        self.only_fetch = False

    def _trouble(self) -> None:
        if self.mode == "fail":
            raise IndexUnavailableError("connection refused")
        if self.mode == "hang":
            time.sleep(3 * TIMEOUT_S)

    def query(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> QueryResult:
        if collection == self.collection:
            self._trouble()
        return self.inner.query(collection, scope, legs)

    def rank(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> RankResult:
        if collection == self.collection and not self.only_fetch:
            self._trouble()
        return self.inner.rank(collection, scope, legs)

    def fetch(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, PassagePayload]:
        if collection == self.collection:
            self._trouble()
        return self.inner.fetch(collection, scope, point_ids)

    def ping(self) -> None:
        self._trouble()
        self.inner.ping()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
async def flaky(tmp_path: Path, embedder: Embedder) -> AsyncIterator[tuple[Gateway, FlakyIndex]]:
    """A gateway whose index is Qdrant Edge behind FlakyIndex, with a short index timeout."""
    config = gateway_config(tmp_path / "data", qdrant_timeout_s=TIMEOUT_S)
    index = FlakyIndex(EdgeIndex(config.data_dir), SHARED_COLLECTION)
    logs = io.StringIO()
    services = await build_services(
        config,
        Telemetry(build_logger("INFO", logs)),
        embedder=embedder,
        engine=(index, "qdrant-edge"),
    )
    app = create_app(config, services)
    try:
        async with AsyncTestClient(app) as client:
            yield Gateway(client=client, services=services, logs=logs, config=config), index
    finally:
        await services.close()


async def _workspace(gw: Gateway) -> Tenant:
    """Two KBs: one in the org's collection, one in the shared collection."""
    tenant = await provision(gw, "acme", "acme-support")
    await tenant.kb("own", storage="org")
    await tenant.kb("common", storage="shared")
    await tenant.agent("bot", ["own", "common"])
    await tenant.doc("own", "pumps.txt", "Each pump is inspected every month by the engineer.")
    await tenant.doc("common", "valves.txt", "Each valve is inspected every month by the engineer.")
    return tenant


@pytest.mark.parametrize("mode", ["fail", "hang"])
async def test_one_kb_failing_makes_the_turn_503_never_partial(
    flaky: tuple[Gateway, FlakyIndex], mode: Mode
) -> None:
    """With the shared collection down or slower than KBGATE_QDRANT_TIMEOUT_S, a turn over
    both KBs answers 503 with Retry-After and problem details naming the index — not the
    other KB's passages alone — and readiness says the index is down. Once it answers
    again, the same turn returns both KBs' documents, with no restart."""
    gw, index = flaky
    tenant = await _workspace(gw)
    index.mode = mode
    started = time.perf_counter()
    turn = await tenant.retrieve("bot", "How often are pumps and valves inspected?")
    assert turn.status_code == 503, turn.text
    assert time.perf_counter() - started < 2 * TIMEOUT_S + 1
    assert int(turn.headers["retry-after"]) >= 1
    assert turn.headers["content-type"].startswith("application/problem+json")
    assert turn.json()["dependency"] == "index"
    assert "pumps" not in turn.text
    ready = await gw.client.get("/health/ready")
    assert ready.status_code == 503
    assert ready.json()["dependencies"]["index"]["status"] == "down"

    index.mode = "ok"
    recovered = await tenant.retrieve("bot", "How often are pumps and valves inspected?")
    assert recovered.status_code == 200, recovered.text
    documents = {p["document_id"] for p in recovered.json()["passages"]}
    assert documents == {"pumps.txt", "valves.txt"}
    assert (await gw.client.get("/health/ready")).status_code == 200


@pytest.mark.parametrize("mode", ["fail", "hang"])
async def test_reading_the_chosen_passages_failing_makes_the_turn_503(
    flaky: tuple[Gateway, FlakyIndex], mode: Mode
) -> None:
    """Ranking reads only where hits belong; the chosen passages' texts are read after
    fusion. When that second read fails or hangs on one KB, the turn answers 503 naming
    the index — never the other KB's passages alone — and recovers with no restart."""
    gw, index = flaky
    tenant = await _workspace(gw)
    index.only_fetch, index.mode = True, mode
    turn = await tenant.retrieve("bot", "How often are pumps and valves inspected?")
    assert turn.status_code == 503, turn.text
    assert turn.json()["dependency"] == "index"
    assert "pumps" not in turn.text
    index.mode = "ok"
    recovered = await tenant.retrieve("bot", "How often are pumps and valves inspected?")
    assert recovered.status_code == 200, recovered.text
    assert {p["document_id"] for p in recovered.json()["passages"]} == {"pumps.txt", "valves.txt"}
