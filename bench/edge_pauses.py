"""How long Qdrant Edge calls made beside turns stop them, on a real collection.

Every Edge call holds the GIL, so any long one stops every turn. On copies of one
collection of a store (`bench.scale`'s 1M store's `kb_shared`, say), side by side:

- `load`: a warm load of the collection with the `documentId` payload index in memory
  against on disk (the swap of an index build waits for such a load), alternated;
- `listing` and `deletion`: a median tenant's dense search every 2 ms while another thread
  lists the largest tenant's documents in a loop, or deletes its Scope once; one facet or
  one filtered delete (as the adapter did) against `EdgeEngine.document_ids` and
  `EdgeEngine.delete_scope` (pages). Reported: the search's wait (its time plus any wait
  for the GIL before it), median and worst, and the listing's or deletion's own time.

    uv run python -m bench.edge_pauses /tmp/kbgate-scale/store-1000000/qdrant-edge/kb_shared

Needs free disk for three copies of the collection.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from qdrant_edge import (
    CountRequest,
    EdgeShard,
    FacetRequest,
    FieldCondition,
    Filter,
    KeywordIndexParams,
    MatchValue,
    Memory,
    Query,
    QueryRequest,
    ScrollRequest,
    UpdateOperation,
)

from gateway.runtime.memory import bound_allocator
from ingest.engines.edge.engine import EDGE_DIR, EdgeEngine, _scope_filter
from ingest.payload import Classification, PayloadKey, Scope

RESULTS = Path(__file__).parent / "results" / "edge_pauses.json"
SEARCH_EVERY_S = 0.002


def _copy(source: Path, target: Path) -> None:
    """A copy of the collection, written back to disk (a fresh copy's dirty pages would be
    written out by Edge's first flush, holding the GIL)."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    os.sync()


def _warm(path: Path) -> None:
    for part in path.rglob("*"):
        if part.is_file():
            part.read_bytes()


def _with_document_index(path: Path, memory: Memory | None) -> None:
    shard = EdgeShard.load(str(path))
    try:
        shard.update(UpdateOperation.delete_field_index(PayloadKey.DOCUMENT_ID))
        params = KeywordIndexParams(is_tenant=False, enable_hnsw=False, memory=memory)
        shard.update(UpdateOperation.create_field_index(PayloadKey.DOCUMENT_ID, params))
        shard.flush()
    finally:
        shard.close()


def loads(source: Path, scratch: Path, rounds: int) -> dict[str, Any]:
    """Warm load times (ms) with the document index in memory and on disk, alternated."""
    arms = {
        "in memory": (scratch / "in-memory", None),
        "on disk": (scratch / "on-disk", Memory.Cold),
    }
    for path, memory in arms.values():
        _copy(source, path)
        _with_document_index(path, memory)
    times: dict[str, list[float]] = {name: [] for name in arms}
    for turn in range(rounds):
        for name in arms if turn % 2 == 0 else reversed(list(arms)):
            path = arms[name][0]
            _warm(path)
            started = time.perf_counter()
            shard = EdgeShard.load(str(path))
            times[name].append((time.perf_counter() - started) * 1000)
            shard.close()
    for path, _ in arms.values():
        shutil.rmtree(path, ignore_errors=True)
    return {name: _summary(values) for name, values in times.items()}


class _Store:
    """An EdgeEngine over a scratch copy of the collection, and the two tenants measured."""

    def __init__(self, source: Path, scratch: Path) -> None:
        self.collection = source.name
        _copy(source, scratch / EDGE_DIR / self.collection)
        self.index = EdgeEngine(scratch)
        anyone = Scope(org_id="o", tenant_id="t", kb_ids=frozenset({"k"}))
        self.index.count(self.collection, anyone)  # opens the shard
        held = self.index.existing_shard(self.collection)  # the benchmark reads the raw shard
        if held is None:
            raise RuntimeError(f"no collection {self.collection!r} in the copy")
        self.shard = held
        every = FacetRequest(key=PayloadKey.TENANT_ID, limit=10_000, exact=True)
        tenants = self.shard.facet(every).hits
        ranked = sorted(tenants, key=lambda hit: -hit.count)
        self.largest, _ = self._scope(str(ranked[0].value))
        self.median, self.vector = self._scope(str(ranked[len(ranked) // 2].value))
        self.passages = self.shard.count(
            CountRequest(exact=True, filter=_scope_filter(self.largest))
        )
        _warm(scratch / EDGE_DIR / self.collection)

    def _scope(self, tenant: str) -> tuple[Scope, list[float]]:
        """The tenant's Scope over all its KBs at the highest clearance, and a stored
        dense vector of it as the question."""
        where = Filter(must=[FieldCondition(key=PayloadKey.TENANT_ID, match=MatchValue(tenant))])
        facet = FacetRequest(
            key=PayloadKey.KNOWLEDGE_BASE_ID, limit=1_000, exact=True, filter=where
        )
        kbs = frozenset(str(hit.value) for hit in self.shard.facet(facet).hits)
        records, _ = self.shard.scroll(
            ScrollRequest(limit=1, filter=where, with_payload=True, with_vector=True)
        )
        payload, vectors = records[0].payload or {}, records[0].vector
        dense = vectors["dense"] if isinstance(vectors, dict) else []
        scope = Scope(
            org_id=str(payload[PayloadKey.ORG_ID]),
            tenant_id=tenant,
            kb_ids=kbs,
            clearance=Classification.RESTRICTED,
        )
        return scope, list(dense)  # type: ignore[arg-type]  # a dense vector is a list of floats

    def waits_beside(
        self, work: Callable[[], object], *, loop: bool, seconds: float
    ) -> dict[str, Any]:
        """The median tenant's searches (with any wait before each) while `work` runs on
        another thread, once or in a loop for `seconds`; and `work`'s own times."""
        stop, took = threading.Event(), []

        def other() -> None:
            while True:
                started = time.perf_counter()
                work()
                took.append((time.perf_counter() - started) * 1000)
                if not loop or stop.is_set():
                    return

        thread = threading.Thread(target=other)
        request = QueryRequest(
            query=Query.Nearest(self.vector, using="dense"),
            filter=_scope_filter(self.median),
            limit=40,
            with_payload=False,
        )
        waits: list[float] = []
        started = last = time.perf_counter()
        thread.start()
        while thread.is_alive() or len(waits) < 10:
            time.sleep(SEARCH_EVERY_S)
            self.shard.query(request)
            now = time.perf_counter()
            waits.append((now - last - SEARCH_EVERY_S) * 1000)
            last = now
            if now - started > seconds:
                stop.set()
        thread.join()
        return {"search_wait_ms": _summary(waits), "work_ms": _summary(took), "runs": len(took)}

    def facet_listing(self) -> None:
        """The listing as one facet (the adapter's former way)."""
        where = _scope_filter(self.largest)
        request = FacetRequest(
            key=PayloadKey.DOCUMENT_ID, limit=self.passages, exact=True, filter=where
        )
        self.shard.facet(request)

    def filter_deletion(self) -> None:
        """The deletion as one filtered delete and a flush (the adapter's former way)."""
        self.shard.update(UpdateOperation.delete_points_by_filter(_scope_filter(self.largest)))
        self.shard.flush()

    def close(self) -> None:
        self.index.close()


def pauses(source: Path, scratch: Path, rounds: int, seconds: float) -> dict[str, Any]:
    """Listing and deletion beside a small tenant's searches, one way then the other."""
    result: dict[str, Any] = {"listing": {}, "deletion": {}}
    for turn in range(rounds):
        for paged in (False, True) if turn % 2 == 0 else (True, False):
            arm = "pages" if paged else "one call"
            store = _Store(source, scratch)
            try:
                ways: dict[str, tuple[Callable[[], object], Callable[[], object], bool]] = {
                    "listing": (  # the former way, the paged way, in a loop
                        store.facet_listing,
                        partial(store.index.document_ids, store.collection, store.largest),
                        True,
                    ),
                    "deletion": (  # last: it empties the largest tenant's Scope
                        store.filter_deletion,
                        partial(store.index.delete_scope, store.collection, store.largest),
                        False,
                    ),
                }
                for kind, (one_call, in_pages, loop) in ways.items():
                    work = in_pages if paged else one_call
                    waits = store.waits_beside(work, loop=loop, seconds=seconds)
                    result[kind].setdefault(arm, []).append(waits)
                result["largest_tenant_passages"] = store.passages
            finally:
                store.close()
    return result


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 2),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
        "worst": round(ordered[-1], 1),
        "best": round(ordered[0], 1),
    }


def main() -> None:
    bound_allocator()  # the gateway's heap, so the engine's figures are the gateway's
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("collection", type=Path, help="a collection directory of a store")
    parser.add_argument("--rounds", type=int, default=6, help="alternated loads; pauses: half")
    parser.add_argument("--seconds", type=float, default=6.0, help="listing loop per arm")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        result = {
            "collection": str(args.collection),
            "load_ms": loads(args.collection, Path(scratch), args.rounds),
            **pauses(args.collection, Path(scratch), max(1, args.rounds // 2), args.seconds),
        }
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
