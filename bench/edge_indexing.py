"""What indexing an Edge collection (`EdgeEngine.optimize`) does to a turn's ranking call.

Copies every point of a data dir's collection (vectors and payloads, nothing re-embedded)
into two fresh Edge stores: one left in plain segments, searched exactly, as a gateway
leaves what it writes while serving; one indexed, as a gateway start leaves it. Then,
side by side per question: the ranking call of the turn (all three legs, under the
bench's Scope) and the dense leg alone, their median times, and how much of the exact
top 100 the indexed store returns per leg.

    uv run python -m bench.edge_indexing --data-dir /tmp/kbgate-turnbench2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from qdrant_edge import EdgeShard, ScrollRequest

from bench.turn_latency import AGENT, DATASET, PLATFORM_KEY, _principal, _read_jsonl
from gateway.retrieval.kb_plan import KbPlan
from gateway.retrieval.legs import legs_for
from gateway.retrieval.plan import plan_turn
from gateway.runtime.services import build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import Embedding
from ingest.engines.edge.engine import EDGE_DIR, EdgeEngine
from ingest.index import (
    DENSE_VECTOR,
    DOCUMENT_SPARSE_VECTOR,
    SPARSE_VECTOR,
    LegKind,
    Passage,
    SparseVector,
)
from ingest.payload import from_payload
from settings.config import load_config

RESULTS = Path(__file__).parent / "results" / "edge_indexing.json"


async def _plan_and_questions(data_dir: Path, count: int) -> tuple[KbPlan, list[Embedding]]:
    config = load_config(
        {"KBGATE_PLATFORM_KEY": PLATFORM_KEY, "KBGATE_MODEL_CACHE_DIR": str(data_dir / "models")},
        data_dir=data_dir,
    )
    services = await build_services(config, Telemetry(build_logger("WARNING")))
    try:
        plan = (await plan_turn(services.planning, _principal(), AGENT)).plans[0]
        questions = [q["text"] for q in _read_jsonl(DATASET / "queries.jsonl")][:count]
        return plan, services.embedder.embed_queries(questions)
    finally:
        await services.close()


def _sparse(raw: Any) -> SparseVector:
    return SparseVector(tuple(raw.indices), tuple(raw.values))


def _passages(shard_dir: Path) -> list[Passage]:
    """Every point of a shard, as the writer made it."""
    shard = EdgeShard.load(str(shard_dir))
    passages: list[Passage] = []
    offset = None
    try:
        while True:
            records, offset = shard.scroll(
                ScrollRequest(offset=offset, limit=1000, with_payload=True, with_vector=True)
            )
            for record in records:
                vectors: dict[str, Any] = record.vector  # type: ignore[assignment]  # named vectors
                document = vectors.get(DOCUMENT_SPARSE_VECTOR)
                passages.append(
                    Passage(
                        point_id=str(record.id),
                        dense=tuple(vectors[DENSE_VECTOR]),
                        sparse=_sparse(vectors[SPARSE_VECTOR]),
                        payload=from_payload(record.payload or {}),
                        document_sparse=_sparse(document) if document is not None else None,
                    )
                )
            if offset is None:
                return passages
    finally:
        shard.close()


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    plan, questions = asyncio.run(_plan_and_questions(args.data_dir, args.queries))
    passages = _passages(args.data_dir / EDGE_DIR / plan.collection)
    with tempfile.TemporaryDirectory() as plain_dir, tempfile.TemporaryDirectory() as indexed_dir:
        plain, indexed = EdgeEngine(Path(plain_dir)), EdgeEngine(Path(indexed_dir))
        for store in (plain, indexed):
            for start in range(0, len(passages), 500):
                store.upsert(plan.collection, passages[start : start + 500])
        started = time.perf_counter()
        indexed.optimize()
        optimize_s = time.perf_counter() - started

        times: dict[str, list[float]] = {"plain": [], "indexed": []}
        dense_times: dict[str, list[float]] = {"plain": [], "indexed": []}
        overlap: dict[str, list[float]] = {kind.value: [] for kind in LegKind}
        for embedding in questions:
            legs = legs_for(plan, [embedding], 100, document_keywords=True)
            dense = [leg for leg in legs if leg.kind is LegKind.DENSE]
            answers = {}
            for name, store in (("plain", plain), ("indexed", indexed)):
                started = time.perf_counter()
                answers[name] = store.rank(plan.collection, plan.scope, legs).legs
                times[name].append(time.perf_counter() - started)
                started = time.perf_counter()
                store.rank(plan.collection, plan.scope, dense)
                dense_times[name].append(time.perf_counter() - started)
            for leg, exact, found in zip(legs, answers["plain"], answers["indexed"], strict=True):
                if exact:
                    shared = {p.point_id for p in exact} & {p.point_id for p in found}
                    overlap[leg.kind.value].append(len(shared) / len(exact))
        plain.close()
        indexed.close()

    result = {
        "command": "uv run python -m bench.edge_indexing --data-dir " + str(args.data_dir),
        "passages": len(passages),
        "questions": len(questions),
        "optimize_s": round(optimize_s, 2),
        "rank_median_ms": {name: _median_ms(values) for name, values in times.items()},
        "dense_leg_median_ms": {name: _median_ms(values) for name, values in dense_times.items()},
        "share_of_exact_top100_found": {
            kind: round(statistics.mean(values), 4) for kind, values in overlap.items() if values
        },
        "notes": "plain: points in plain segments, searched exactly (what a serving gateway "
        "writes); indexed: after EdgeEngine.optimize (what a gateway start leaves). Times "
        "interleaved per question in one run; the Scope filter of the bench's KB applies.",
    }
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
