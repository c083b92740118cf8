"""The index failing or hanging under a turn: 503 with Retry-After, never a partial answer,
readiness names the index, and recovery without a restart; a call that never returns
holds up only its own request.

The real Qdrant Edge adapter runs over `FlakyEngine`, the real engine whose calls on one
collection (the shared one) fail or hang on demand, as a disk or an engine in trouble
would: the adapter's own worker pool and deadline answer for it. Where Docker runs,
tests/integration/test_index_contract.py covers a real unreachable server.
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Literal

import pytest
from litestar.testing import AsyncTestClient

from gateway.http.app import create_app
from gateway.runtime.services import build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import Embedder
from ingest.engines.edge.engine import EdgeEngine
from ingest.engines.edge.index import EdgeIndex
from ingest.index import (
    SHARED_COLLECTION,
    IndexUnavailableError,
    Leg,
    QueryResult,
    RankResult,
)
from ingest.payload import PassagePayload, Scope
from tests.api.conftest import Gateway, gateway_config
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

#: the index deadline once the workspaces exist: long enough for a turn's calls on a busy
#: shared machine, short enough for a test
TIMEOUT_S = 3.0
#: how long a hung call waits at most, should a test fail before releasing it
_HANG_LIMIT_S = 60.0
Mode = Literal["ok", "fail", "hang"]


class FlakyEngine(EdgeEngine):
    """The real engine, whose queries and pings on one collection fail or hang on demand.

    A hung call waits (without the GIL, in the adapter's worker thread) until `release`:
    it never answers in time, as an engine stuck on its disk would not."""

    def __init__(self, data_dir: Path, collection: str) -> None:
        super().__init__(data_dir)
        self.collection = collection
        self.mode: Mode = "ok"
        #: trouble only when the chosen passages' payloads are read, not while ranking
        self.only_fetch = False
        self._released = threading.Event()
        #: calls that hung so far
        self.hung = 0
        #: set when a call starts hanging
        self.hanging = threading.Event()

    def release(self) -> None:
        """Back to answering; calls hanging now return."""
        self.mode = "ok"
        self._released.set()

    def _trouble(self) -> None:
        if self.mode == "fail":
            raise IndexUnavailableError("connection refused")
        if self.mode == "hang":
            self.hung += 1
            self.hanging.set()
            self._released.wait(_HANG_LIMIT_S)

    def query(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> QueryResult:
        if collection == self.collection:
            self._trouble()
        return super().query(collection, scope, legs)

    def rank(self, collection: str, scope: Scope, legs: Sequence[Leg]) -> RankResult:
        if collection == self.collection and not self.only_fetch:
            self._trouble()
        return super().rank(collection, scope, legs)

    def fetch(
        self, collection: str, scope: Scope, point_ids: Sequence[str]
    ) -> dict[str, PassagePayload]:
        if collection == self.collection:
            self._trouble()
        return super().fetch(collection, scope, point_ids)

    def ping(self) -> None:
        self._trouble()
        super().ping()


@pytest.fixture
async def flaky(tmp_path: Path, embedder: Embedder) -> AsyncIterator[tuple[Gateway, FlakyEngine]]:
    """A gateway on the Qdrant Edge adapter over FlakyEngine; `_workspace` shortens the
    index deadline to `TIMEOUT_S`."""
    config = gateway_config(tmp_path / "data", qdrant_timeout_s=TIMEOUT_S)
    index = EdgeIndex(config.data_dir)
    engine = index.engine = FlakyEngine(config.data_dir, SHARED_COLLECTION)
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
            yield Gateway(client=client, services=services, logs=logs, config=config), engine
    finally:
        engine.release()
        await services.close()


async def _workspace(gw: Gateway) -> Tenant:
    """Two KBs: one in the org's collection, one in the shared collection."""
    tenant = await provision(gw, "acme", "acme-support")
    await tenant.kb("own", storage="org")
    await tenant.kb("common", storage="shared")
    await tenant.agent("bot", ["own", "common"])
    await tenant.doc("own", "pumps.txt", "Each pump is inspected every month by the engineer.")
    await tenant.doc("common", "valves.txt", "Each valve is inspected every month by the engineer.")
    _shorten_the_deadline(gw)
    return tenant


def _shorten_the_deadline(gw: Gateway) -> None:
    index = gw.services.index
    assert isinstance(index, EdgeIndex)
    index.timeout_s = TIMEOUT_S


@pytest.mark.parametrize("mode", ["fail", "hang"])
async def test_one_kb_failing_makes_the_turn_503_never_partial(
    flaky: tuple[Gateway, FlakyEngine], mode: Mode
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

    index.release()
    recovered = await tenant.retrieve("bot", "How often are pumps and valves inspected?")
    assert recovered.status_code == 200, recovered.text
    documents = {p["document_id"] for p in recovered.json()["passages"]}
    assert documents == {"pumps.txt", "valves.txt"}
    assert (await gw.client.get("/health/ready")).status_code == 200


@pytest.mark.parametrize("mode", ["fail", "hang"])
async def test_reading_the_chosen_passages_failing_makes_the_turn_503(
    flaky: tuple[Gateway, FlakyEngine], mode: Mode
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
    index.release()
    recovered = await tenant.retrieve("bot", "How often are pumps and valves inspected?")
    assert recovered.status_code == 200, recovered.text
    assert {p["document_id"] for p in recovered.json()["passages"]} == {"pumps.txt", "valves.txt"}


async def test_a_stuck_engine_call_holds_up_only_its_own_request(
    flaky: tuple[Gateway, FlakyEngine],
) -> None:
    """An engine call that never returns (the shared collection's ranking, stuck) answers
    its own turn 503 with Retry-After once the index deadline passes, while
    `/health/live` and another workspace's turns (its KB in its organization's collection)
    answer at once, before and after that deadline, while the stuck call stays stuck."""
    gw, engine = flaky
    stuck = await provision(gw, "acme", "acme-shared")
    await stuck.kb("common", storage="shared")
    await stuck.agent("bot", ["common"])
    await stuck.doc("common", "valves.txt", "Each valve is inspected every month by the engineer.")
    other = await provision(gw, "globex", "globex-own")
    await other.kb("own", storage="org")
    await other.agent("bot", ["own"])
    await other.doc("own", "pumps.txt", "Each pump is inspected every month by the engineer.")
    _shorten_the_deadline(gw)
    engine.mode = "hang"

    started = time.perf_counter()
    turn = asyncio.ensure_future(stuck.retrieve("bot", "How often are valves inspected?"))
    assert await asyncio.to_thread(engine.hanging.wait, 10)  # stuck in a worker now
    beside: list[float] = []
    for _ in range(3):
        began = time.perf_counter()
        live = await gw.client.get("/health/live")
        assert live.status_code == 200
        answered = await other.retrieve("bot", "How often are pumps inspected?")
        assert answered.status_code == 200, answered.text
        assert [p["document_id"] for p in answered.json()["passages"]] == ["pumps.txt"]
        beside.append(time.perf_counter() - began)
    answer = await turn
    waited = time.perf_counter() - started
    assert answer.status_code == 503, answer.text
    assert answer.json()["dependency"] == "index"
    assert int(answer.headers["retry-after"]) >= 1
    assert TIMEOUT_S <= waited < 2 * TIMEOUT_S
    assert max(beside) < TIMEOUT_S  # none of them waited for the stuck call's deadline
    live_after = await gw.client.get("/health/live")
    assert live_after.status_code == 200
    after = await other.retrieve("bot", "How often are pumps inspected?")
    assert after.status_code == 200, after.text
    assert engine.hung >= 1  # its ranking (and the KB's first line measurement) still stuck
