"""Qdrant Edge vs qdrant-client local mode: hybrid query latency on synthetic passages.

Each size gets one collection per engine filled with the same synthetic points
(random 384-d unit vectors, Zipf-distributed sparse terms, 20 tenants x 5 KBs);
then the same hybrid queries (a dense and a keyword leg, limit 100, one tenant's
Scope) run alternately on every engine. Medians and p99 in one run, and the ratio.
Edge runs twice: as written (plain segments, what a serving gateway leaves) and
indexed (`EdgeIndex.optimize`, what a gateway start leaves; `optimize_s`).

    uv run python bench/engines.py [--sizes 20000 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.engines.server.index import ServerIndex
from ingest.index import Leg, LegKind, Passage, SparseVector, org_collection
from ingest.payload import PassagePayload, Scope

RESULTS = Path(__file__).parent / "results" / "engines.json"
PLOT = RESULTS.with_suffix(".png")
ENGINES = ("qdrant-edge", "qdrant-edge-indexed", "qdrant-client-local")
DIM = 384
VOCAB = 30_000
TENANTS = 20
KBS = 5
COLLECTION = org_collection("bench")


def _sparse(rng: np.random.Generator, terms: int) -> SparseVector:
    ids = np.unique(np.minimum(rng.zipf(1.3, size=terms), VOCAB - 1))
    return SparseVector(
        tuple(int(i) for i in ids), tuple(float(v) for v in rng.integers(1, 4, len(ids)))
    )


def _unit(rng: np.random.Generator) -> tuple[float, ...]:
    vector = rng.standard_normal(DIM).astype(np.float32)
    return tuple(float(v) for v in vector / np.linalg.norm(vector))


def _passages(size: int, seed: int) -> list[Passage]:
    rng = np.random.default_rng(seed)
    passages = []
    for position in range(size):
        tenant = f"t{position % TENANTS}"
        kb = f"kb{(position // TENANTS) % KBS}"
        passages.append(
            Passage(
                point_id=str(uuid.UUID(int=position + 1)),
                dense=_unit(rng),
                sparse=_sparse(rng, 60),
                payload=PassagePayload(
                    tenant_id=tenant,
                    knowledge_base_id=kb,
                    org_id="bench",
                    document_id=f"d{position // 3}",
                    document_version="v1",
                    passage_index=position % 3,
                    classification="internal",
                    text="x",
                    title="",
                    source="",
                    checksum="0",
                    indexed_at="2026-01-01T00:00:00+00:00",
                ),
            )
        )
    return passages


def _fill(index: BlockingIndex, passages: list[Passage]) -> float:
    started = time.perf_counter()
    index.ensure_collection(COLLECTION)
    for start in range(0, len(passages), 512):
        index.upsert(COLLECTION, passages[start : start + 512])
    return time.perf_counter() - started


def _query(
    index: BlockingIndex, scope: Scope, dense: tuple[float, ...], sparse: SparseVector
) -> float:
    legs = [
        Leg(kind=LegKind.DENSE, dense=dense, limit=100),
        Leg(kind=LegKind.KEYWORD, sparse=sparse, limit=100),
    ]
    started = time.perf_counter()
    index.query(COLLECTION, scope, legs)
    return (time.perf_counter() - started) * 1000


def measure(size: int, queries: int) -> dict[str, object]:
    passages = _passages(size, seed=size)
    rng = np.random.default_rng(7)
    picker = random.Random(7)
    with tempfile.TemporaryDirectory() as scratch:
        indexed = BlockingIndex(EdgeIndex(Path(scratch) / "indexed"))
        engines: dict[str, BlockingIndex] = {
            "qdrant-edge": BlockingIndex(EdgeIndex(Path(scratch) / "plain")),
            "qdrant-edge-indexed": indexed,
            "qdrant-client-local": BlockingIndex(ServerIndex.local(None)),
        }
        fill = {name: round(_fill(index, passages), 2) for name, index in engines.items()}
        started = time.perf_counter()
        indexed.optimize()
        optimize_s = round(time.perf_counter() - started, 2)
        latencies: dict[str, list[float]] = {name: [] for name in engines}
        for _ in range(queries):
            scope = Scope.of(
                org_id="bench",
                tenant_id=f"t{picker.randrange(TENANTS)}",
                kb_ids=[f"kb{picker.randrange(KBS)}", f"kb{picker.randrange(KBS)}"],
            )
            dense, sparse = _unit(rng), _sparse(rng, 8)
            for name, index in engines.items():
                latencies[name].append(_query(index, scope, dense, sparse))
        for index in engines.values():
            index.close()
    summary: dict[str, object] = {
        "passages": size,
        "queries": queries,
        "fill_s": fill,
        "optimize_s": optimize_s,
    }
    for name, values in latencies.items():
        ordered = sorted(values)
        summary[name] = {
            "median_ms": round(statistics.median(ordered), 3),
            "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 3),
        }
    edge = statistics.median(latencies["qdrant-edge"])
    local = statistics.median(latencies["qdrant-client-local"])
    summary["local_over_edge_median"] = round(local / edge, 2)
    summary["indexed_over_plain_edge_median"] = round(
        statistics.median(latencies["qdrant-edge-indexed"]) / edge, 2
    )
    return summary


def plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    """Median and p99 query latency per engine against collection size (log scale)."""
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results, key=int)
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for engine in ENGINES:
        measured = [size for size in sizes if engine in results[size]]  # older runs lack some
        for stat, style in (("median_ms", "-o"), ("p99_ms", ":x")):
            values = [results[size][engine][stat] for size in measured]
            axis.plot(
                [int(size) for size in measured], values, style, label=f"{engine} {stat[:-3]}"
            )
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("passages in the collection")
    axis.set_ylabel("hybrid query latency (ms)")
    axis.set_title("Qdrant Edge vs qdrant-client local mode (one tenant's Scope, limit 100)")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    results = [measure(size, args.queries) for size in args.sizes]
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    merged = {**previous, **{str(r["passages"]): r for r in results}}
    RESULTS.write_text(json.dumps(merged, indent=2) + "\n")
    plot(merged, PLOT)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
