"""Dense-leg recall@10 under a full Scope filter once Edge's HNSW graph is built.

Writes a synthetic shared collection through kbgate's own adapter (`EdgeEngine.upsert`
with `Passage` objects, so payloads and payload indexes are kbgate's: keyword indexes
on the Scope keys, `tenantId` the tenant key) under Edge's default indexing config (as
`kbgate serve` runs it), builds the indexes with `EdgeEngine.optimize`, then searches
the shard directly with the adapter's own Scope filter (`_scope_filter`) under several
`SearchParams`, against `SearchParams(exact=True)`.

Data (synthetic, not embeddings of text): clustered unit vectors (`--centroids` random
centroids; each knowledge base draws its passages from three of them, plus Gaussian
noise of about the centroid's norm, normalised); ~1,000 tenants with Zipf sizes (s=1),
1-5 KBs each, labels public/internal/confidential/restricted at 40/30/20/10 %, tenants
spread over 20 orgs; empty BM25 vectors. Queries: a scope point plus noise ("near":
a tenant asking about its own documents) or any collection point plus noise ("any":
the filter unrelated to where the query lands).

    uv run python -m bench.filtered_recall --points 100000 --out bench/results/filtered_recall.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from qdrant_edge import AcornSearchParams, EdgeShard, Query, QueryRequest, SearchParams

from ingest.engines.edge.engine import EDGE_DIR, EdgeEngine, _scope_filter
from ingest.index import DENSE_VECTOR, SHARED_COLLECTION, Passage, SparseVector
from ingest.payload import CLASSIFICATION_ORDER, Classification, PassagePayload, Scope

DIM = 384
TENANTS = 1000
ORGS = 20
TOPICS_PER_KB = 3
LABEL_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
#: noise per dimension: a point's noise has about the norm of its unit centroid
NOISE = 1 / np.sqrt(DIM)
BATCH = 1000
TOP = 10

Vectors = npt.NDArray[np.float32]
Ints = npt.NDArray[np.int64]

#: name -> search params of the dense leg (None: what the adapter sends today)
CONFIGS: dict[str, SearchParams | None] = {
    "exact": SearchParams(exact=True),
    "default": None,
    "acorn": SearchParams(acorn=AcornSearchParams(enable=True)),
    "ef256": SearchParams(hnsw_ef=256),
    "acorn_ef256": SearchParams(hnsw_ef=256, acorn=AcornSearchParams(enable=True)),
}


@dataclass(frozen=True, slots=True)
class Corpus:
    """Every point's vector and, per point, its tenant, KB (within the tenant) and label
    index; tenants are numbered by size, largest first."""

    vectors: Vectors
    tenant: Ints
    kb: Ints
    label: Ints
    kb_counts: Ints
    org_of_tenant: Ints

    def point_id(self, position: int) -> str:
        return str(uuid.UUID(int=position + 1))


@dataclass(frozen=True, slots=True)
class ScopeCase:
    name: str
    scope: Scope
    mask: npt.NDArray[np.bool_]


def _unit_rows(rows: Vectors) -> Vectors:
    normalised: Vectors = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return normalised


def make_corpus(points: int, centroids: int, seed: int) -> Corpus:
    rng = np.random.default_rng(seed)
    weights = 1 / np.arange(1, TENANTS + 1)
    drawn = rng.choice(TENANTS, size=points, p=weights / weights.sum())
    # renumber tenants by size, largest first (ties broken by the draw)
    by_size = np.argsort(-np.bincount(drawn, minlength=TENANTS), kind="stable")
    tenant = np.argsort(by_size)[drawn].astype(np.int64)
    kb_counts = rng.integers(1, 6, size=TENANTS)
    kb_counts[0] = 5  # the largest tenant has several KBs to choose one of
    kb = (rng.random(points) * kb_counts[tenant]).astype(np.int64)
    label = rng.choice(len(CLASSIFICATION_ORDER), size=points, p=LABEL_WEIGHTS).astype(np.int64)
    centres = _unit_rows(rng.standard_normal((centroids, DIM)).astype(np.float32))
    kb_topics = rng.integers(0, centroids, size=(TENANTS, 5, TOPICS_PER_KB))
    topic = kb_topics[tenant, kb, rng.integers(0, TOPICS_PER_KB, size=points)]
    noise = rng.standard_normal((points, DIM)).astype(np.float32) * np.float32(NOISE)
    vectors = _unit_rows(centres[topic] + noise)
    return Corpus(
        vectors=vectors,
        tenant=tenant,
        kb=kb,
        label=label,
        kb_counts=kb_counts.astype(np.int64),
        org_of_tenant=rng.integers(0, ORGS, size=TENANTS).astype(np.int64),
    )


def _payload(corpus: Corpus, position: int) -> PassagePayload:
    tenant = int(corpus.tenant[position])
    return PassagePayload(
        tenant_id=f"t{tenant}",
        knowledge_base_id=f"t{tenant}-kb{corpus.kb[position]}",
        org_id=f"org{corpus.org_of_tenant[tenant]}",
        document_id=f"t{tenant}-d{position // 8}",
        document_version="v1",
        passage_index=position % 8,
        classification=CLASSIFICATION_ORDER[corpus.label[position]].value,
        text="x",
        title="",
        source="",
        checksum="0",
        indexed_at="2026-01-01T00:00:00+00:00",
    )


def _batches(corpus: Corpus) -> Iterator[list[Passage]]:
    empty = SparseVector((), ())
    for start in range(0, len(corpus.vectors), BATCH):
        stop = min(start + BATCH, len(corpus.vectors))
        yield [
            Passage(
                point_id=corpus.point_id(position),
                dense=tuple(corpus.vectors[position].tolist()),
                sparse=empty,
                payload=_payload(corpus, position),
            )
            for position in range(start, stop)
        ]


def build(corpus: Corpus, data_dir: Path) -> dict[str, Any]:
    """Write and index the collection through the adapter; its timings and shape."""
    index = EdgeEngine(data_dir, dense_dim=DIM)
    started = time.perf_counter()
    for passages in _batches(corpus):
        index.upsert(SHARED_COLLECTION, passages)
    upsert_s = time.perf_counter() - started
    started = time.perf_counter()
    index.optimize()
    optimize_s = time.perf_counter() - started
    index.close()
    shard = EdgeShard.load(str(data_dir / EDGE_DIR / SHARED_COLLECTION))
    try:
        info = shard.info()
        return {
            "upsert_s": round(upsert_s, 1),
            "optimize_s": round(optimize_s, 1),
            "segments": info.segments_count,
            "points": info.points_count,
            "indexed_vectors": info.indexed_vectors_count,
        }
    finally:
        shard.close()


def _case(
    corpus: Corpus,
    name: str,
    tenant: int,
    kbs: int | None,
    clearance: str,
    *,
    strict: bool = True,
) -> ScopeCase:
    """`kbs`: the tenant's first `kbs` KBs, all of them when None."""
    count = int(corpus.kb_counts[tenant]) if kbs is None else kbs
    level = CLASSIFICATION_ORDER.index(Classification(clearance))
    scope = Scope.of(
        org_id=f"org{corpus.org_of_tenant[tenant]}",
        tenant_id=f"t{tenant}",
        kb_ids=[f"t{tenant}-kb{kb}" for kb in range(count)],
        clearance=clearance,
        strict=strict,
    )
    mask = (corpus.tenant == tenant) & (corpus.kb < count) & (corpus.label <= level)
    return ScopeCase(name, scope, mask)


def scope_cases(corpus: Corpus) -> list[ScopeCase]:
    """Scopes from a large tenant's whole workspace down to a small tenant's."""
    mid = next(t for t in range(40, TENANTS) if corpus.kb_counts[t] >= 2)
    small = 300
    cases = [
        _case(corpus, "largest tenant, all KBs, restricted", 0, None, "restricted"),
        _case(
            corpus,
            "largest tenant, all KBs, restricted, strict off",
            0,
            None,
            "restricted",
            strict=False,
        ),
        _case(corpus, "largest tenant, all KBs, public", 0, None, "public"),
        _case(corpus, "largest tenant, 1 KB, internal", 0, 1, "internal"),
        _case(corpus, "largest tenant, 1 KB, public", 0, 1, "public"),
        _case(corpus, "3rd tenant, all KBs, restricted", 2, None, "restricted"),
        _case(corpus, "3rd tenant, all KBs, public", 2, None, "public"),
        _case(corpus, "10th tenant, 1 KB, internal", 9, 1, "internal"),
        _case(corpus, f"mid tenant (#{mid + 1}), 1 KB, internal", mid, 1, "internal"),
        _case(
            corpus, f"small tenant (#{small + 1}), all KBs, restricted", small, None, "restricted"
        ),
    ]
    return [case for case in cases if case.mask.sum() >= TOP]


def _queries(corpus: Corpus, pool: npt.NDArray[np.int64], count: int, seed: int) -> Vectors:
    rng = np.random.default_rng(seed)
    anchors = corpus.vectors[rng.choice(pool, size=count)]
    noise = rng.standard_normal((count, DIM)).astype(np.float32) * np.float32(NOISE)
    return _unit_rows(anchors + noise)


def _search(
    shard: EdgeShard, case: ScopeCase, vector: list[float], params: SearchParams | None
) -> tuple[list[str], float]:
    request = QueryRequest(
        limit=TOP,
        query=Query.Nearest(vector, using=DENSE_VECTOR),
        filter=_scope_filter(case.scope),
        with_payload=False,
        params=params,
    )
    started = time.perf_counter()
    found = shard.query(request)
    elapsed = time.perf_counter() - started
    return [str(point.id) for point in found], elapsed


def _brute_force(corpus: Corpus, case: ScopeCase, query: Vectors) -> set[str]:
    positions = np.flatnonzero(case.mask)
    scores = corpus.vectors[positions] @ query
    best = positions[np.argsort(-scores)[:TOP]]
    return {corpus.point_id(int(position)) for position in best}


def _ms(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000, 2)


def measure(
    shard: EdgeShard, corpus: Corpus, case: ScopeCase, kind: str, queries: Vectors
) -> dict[str, Any]:
    """Recall@10 of every config against exact, and latencies, queries interleaved."""
    recalls: dict[str, list[float]] = {name: [] for name in CONFIGS}
    short: dict[str, int] = dict.fromkeys(CONFIGS, 0)
    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    exact_is_exact = 0
    for query in queries:
        vector = query.tolist()
        found = {name: _search(shard, case, vector, params) for name, params in CONFIGS.items()}
        exact = set(found["exact"][0])
        exact_is_exact += exact == _brute_force(corpus, case, query)
        for name, (ids, elapsed) in found.items():
            recalls[name].append(len(exact & set(ids)) / len(exact))
            short[name] += len(ids) < len(exact)
            times[name].append(elapsed)
    in_scope = int(case.mask.sum())
    return {
        "scope": case.name,
        "queries": kind,
        "points_in_scope": in_scope,
        "selectivity": round(in_scope / len(corpus.vectors), 5),
        "exact_matches_numpy": round(exact_is_exact / len(queries), 3),
        "configs": {
            name: {
                "recall_at_10": round(statistics.mean(recalls[name]), 3),
                "recall_at_10_min": round(min(recalls[name]), 2),
                "queries_short_of_10": short[name],
                "median_ms": _ms(times[name], 0.5),
                "p95_ms": _ms(times[name], 0.95),
            }
            for name in CONFIGS
        },
    }


def _warm(shard: EdgeShard, corpus: Corpus, case: ScopeCase) -> None:
    for query in _queries(corpus, np.flatnonzero(case.mask), 5, seed=0):
        for params in CONFIGS.values():
            _search(shard, case, query.tolist(), params)


def _print_table(rows: list[dict[str, Any]]) -> None:
    names = list(CONFIGS)
    header = f"{'scope':52} {'q':4} {'points':>7} {'sel%':>6} " + " ".join(
        f"{name + ' R@10/med/p95':>26}" for name in names
    )
    print(header)
    for row in rows:
        cells = " ".join(
            f"{c['recall_at_10']:>8.3f} {c['median_ms']:>7.2f} {c['p95_ms']:>7.2f}ms"
            for c in (row["configs"][name] for name in names)
        )
        print(
            f"{row['scope']:52} {row['queries']:4} {row['points_in_scope']:>7} "
            f"{row['selectivity'] * 100:>6.2f} {cells}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50, help="per scope and query kind")
    parser.add_argument("--centroids", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    corpus = make_corpus(args.points, args.centroids, args.seed)
    cases = scope_cases(corpus)
    rows = []
    with tempfile.TemporaryDirectory() as data_dir:
        built = build(corpus, Path(data_dir))
        print(json.dumps(built), flush=True)
        shard = EdgeShard.load(str(Path(data_dir) / EDGE_DIR / SHARED_COLLECTION))
        try:
            for number, case in enumerate(cases):
                _warm(shard, corpus, case)
                pools = {"near": np.flatnonzero(case.mask), "any": np.arange(args.points)}
                for kind, pool in pools.items():
                    queries = _queries(corpus, pool, args.queries, seed=args.seed + number)
                    rows.append(measure(shard, corpus, case, kind, queries))
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            shard.close()
    _print_table(rows)
    result = {
        "command": "uv run python -m bench.filtered_recall " + " ".join(sys.argv[1:]),
        "points": args.points,
        "tenants": TENANTS,
        "orgs": ORGS,
        "dim": DIM,
        "queries_per_row": args.queries,
        "build": built,
        "configs": {
            "exact": "SearchParams(exact=True): the reference",
            "default": "params=None, what both adapters send for the dense leg today",
            "acorn": "SearchParams(acorn=AcornSearchParams(enable=True)), max_selectivity 0.4",
            "ef256": "SearchParams(hnsw_ef=256)",
            "acorn_ef256": "SearchParams(hnsw_ef=256, acorn=AcornSearchParams(enable=True))",
        },
        "rows": rows,
        "notes": "Synthetic clustered vectors (not text embeddings), written through "
        "EdgeEngine.upsert with Edge's default indexing config and indexed with "
        "EdgeEngine.optimize; searched one query at a time on the shard with the adapter's "
        "Scope filter, limit 10. 'near': queries near a scope point; 'any': near any "
        "point. exact_matches_numpy: share of queries whose exact top 10 equals a numpy "
        "brute force over the scope's points; queries_short_of_10: queries that returned fewer "
        "points than exact did. Latencies interleaved per query in one run.",
    }
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
