"""The in-process measures of `bench.scale`: recall of each leg under full Scopes against
exact search, the shards' shape, and what a burst of writes does to turns running beside
it.

Recall opens the store with `EdgeEngine` as the gateway does (its defaults), so the legs
sent are the adapter's own (`EdgeEngine.rank`, one leg per call); the exact reference is
the same request with `SearchParams(exact=True)` (and the same per-scope IDF on keyword
legs) on the adapter's shard. The burst's turns call the Index port (`EdgeIndex` through
`BlockingIndex`: a worker thread and a deadline per call, as the gateway calls it).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qdrant_edge import (
    EdgeShard,
    IdfParams,
    Query,
    QueryBatchRequest,
    QueryRequest,
    SearchParams,
)
from qdrant_edge import SparseVector as EdgeSparse

from ingest.embedder.embedding import Embedding
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.engine import EDGE_DIR, EdgeEngine, _scope_filter
from ingest.index import (
    DENSE_VECTOR,
    DOCUMENT_SPARSE_VECTOR,
    SPARSE_VECTOR,
    Leg,
    LegKind,
    SparseVector,
)
from ingest.payload import Scope

TOP = 10
#: a returned point counts when its score reaches the exact 10th score (ties: near copies
#: of one abstract score alike, and which of them comes 10th is arbitrary)
SCORE_TOLERANCE = 1e-5
_USING = {
    LegKind.DENSE: DENSE_VECTOR,
    LegKind.KEYWORD: SPARSE_VECTOR,
    LegKind.DOCUMENT_KEYWORD: DOCUMENT_SPARSE_VECTOR,
}


@dataclass(frozen=True, slots=True)
class ScopeCase:
    """One full Scope in one collection, with how many points it admits."""

    name: str
    collection: str
    scope: Scope
    points: int
    questions: list[str]


def shards_shape(data_dir: Path) -> dict[str, dict[str, int]]:
    """Points, segments and indexed vectors of every collection (shards opened read-only
    in turn: call it while nothing else holds the data dir)."""
    shape = {}
    for path in sorted((data_dir / EDGE_DIR).iterdir()):
        if not path.is_dir():  # a pointer file older releases left (`ingest.engines.edge.shards`)
            continue
        shard = EdgeShard.load(str(path))
        try:
            info = shard.info()
            shape[path.name] = {
                "points": info.points_count,
                "segments": info.segments_count,
                "indexed_vectors": info.indexed_vectors_count,
            }
        finally:
            shard.close()
    return shape


def _legs(embedding: Embedding) -> list[Leg]:
    return [
        Leg(LegKind.DENSE, dense=embedding.dense, limit=TOP),
        Leg(LegKind.KEYWORD, sparse=embedding.sparse, limit=TOP),
        Leg(LegKind.DOCUMENT_KEYWORD, sparse=embedding.sparse, limit=TOP),
    ]


def _exact(shard: EdgeShard, scope: Scope, leg: Leg) -> list[float]:
    """Scores of the exact top 10 of one leg inside the scope."""
    where = _scope_filter(scope)
    if leg.kind is LegKind.DENSE:
        vector: Any = list(leg.dense or ())
        params = SearchParams(exact=True)
    else:
        sparse = leg.sparse or SparseVector((), ())
        vector = EdgeSparse(indices=list(sparse.indices), values=list(sparse.values))
        params = SearchParams(exact=True, idf=IdfParams(corpus=where))
    request = QueryRequest(
        limit=TOP,
        query=Query.Nearest(vector, using=_USING[leg.kind]),
        filter=where,
        params=params,
        with_payload=False,
    )
    (found,) = shard.query_batch(QueryBatchRequest([request]))
    return [point.score for point in found]


def _recall(found: Sequence[float], exact: Sequence[float]) -> float | None:
    if not exact:
        return None
    floor = exact[-1] - SCORE_TOLERANCE * max(1.0, abs(exact[-1]))
    return min(sum(score >= floor for score in found), len(exact)) / len(exact)


def measure_recall(
    index: EdgeEngine, cases: Sequence[ScopeCase], embed: Callable[[list[str]], list[Embedding]]
) -> list[dict[str, Any]]:
    """Per case and leg: mean and worst recall@10 of the adapter's search against exact
    search, and the median time of the adapter's call and of the exact one."""
    rows = []
    for case in cases:
        held = index.existing_shard(case.collection)  # the exact reference's shard
        if held is None:
            continue
        recalls: dict[str, list[float]] = {kind.value: [] for kind in LegKind}
        times: dict[str, list[float]] = {kind.value: [] for kind in LegKind}
        exact_times: dict[str, list[float]] = {kind.value: [] for kind in LegKind}
        for embedding in embed(case.questions):
            for leg in _legs(embedding):
                started = time.perf_counter()
                (found,) = index.rank(case.collection, case.scope, [leg]).legs
                times[leg.kind.value].append(time.perf_counter() - started)
                started = time.perf_counter()
                exact = _exact(held, case.scope, leg)
                exact_times[leg.kind.value].append(time.perf_counter() - started)
                recall = _recall([point.score for point in found], exact)
                if recall is not None:
                    recalls[leg.kind.value].append(recall)
        rows.append(
            {
                "scope": case.name,
                "collection": case.collection,
                "points_in_scope": case.points,
                "questions": len(case.questions),
                "legs": {
                    kind: {
                        "recall_at_10": _mean(recalls[kind]),
                        "recall_at_10_min": min(recalls[kind], default=None),
                        "median_ms": _median_ms(times[kind]),
                        "exact_median_ms": _median_ms(exact_times[kind]),
                    }
                    for kind in recalls
                },
            }
        )
    return rows


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.mean(values), 4) if values else None


def _median_ms(values: Sequence[float]) -> float | None:
    return round(statistics.median(values) * 1000, 2) if values else None


def writes_beside_turns(
    index: BlockingIndex,
    write: Callable[[], object],
    collection: str,
    scope: Scope,
    *,
    legs: Sequence[Leg],
    rounds: int,
) -> dict[str, Any]:
    """What a burst of writes does to the turns around it: the ranking call of a turn (all
    legs, through the Index port as the serving gateway calls it) before, during and after
    `write` runs on a thread of its own. The worst call during the writes is the longest a
    turn waited; after, the burst is searched exactly (no build while serving)."""
    before = _calls(index, collection, scope, legs, rounds)
    done = threading.Event()
    outcome: dict[str, Any] = {}

    def writing() -> None:
        started = time.perf_counter()
        try:
            write()
        finally:
            outcome["write_s"] = round(time.perf_counter() - started, 2)
            done.set()

    writer = threading.Thread(target=writing, name="bench-burst")
    writer.start()
    during: list[float] = []
    while not done.is_set():
        during.extend(_calls(index, collection, scope, legs, 1))
    writer.join()
    after = _calls(index, collection, scope, legs, rounds)
    return {
        **outcome,
        "rank_median_ms_before": _median_ms(before),
        "calls_during_writes": len(during),
        "rank_median_ms_during": _median_ms(during),
        "worst_call_during_writes_ms": round(max(during, default=0.0) * 1000, 1),
        "rank_median_ms_after_unindexed": _median_ms(after),
    }


def rank_median_ms(
    index: BlockingIndex, collection: str, scope: Scope, legs: Sequence[Leg], rounds: int
) -> float | None:
    """The median ranking call (all legs), in ms."""
    return _median_ms(_calls(index, collection, scope, legs, rounds))


def _calls(
    index: BlockingIndex, collection: str, scope: Scope, legs: Sequence[Leg], rounds: int
) -> list[float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        index.rank(collection, scope, legs)
        times.append(time.perf_counter() - started)
    return times
