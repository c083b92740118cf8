"""What computing keyword IDF over the tenant's points instead of the Scope's costs and changes.

Qdrant Edge computes a keyword leg's IDF over the points of a filter (`SearchParams.idf`).
The Scope's own filter is always right; when the Scope holds every point its tenant has in
the collection, the tenant condition alone selects the same points, and `EdgeIndex` gives
Edge that instead (`ingest.qdrant_edge._reading`). Per question of the golden set,
on a turn-bench data dir, this runs the turn's ranking call both ways, alternated: the
tenant's corpus as the gateway now does, and the Scope's, which `EdgeIndex` uses when the
Scope does not hold all the tenant's points (the benchmark sets the shard's cached answer
to that question to get it; everything else in the call is the same). It reports both
medians and whether every leg returned the same points with the same scores.

    uv run python -m bench.keyword_corpus --data-dir /tmp/kbgate-turnbench2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.turn_latency import AGENT, DATASET, PLATFORM_KEY, _principal, _read_jsonl
from gateway.services import build_services
from gateway.telemetry import Telemetry, build_logger
from gateway.turn import legs_for, plan_turn
from ingest.index import RankResult
from ingest.qdrant_edge import EdgeIndex
from settings.config import load_config

RESULTS = Path(__file__).parent / "results"


def _points(result: RankResult) -> list[list[tuple[str, float]]]:
    return [[(point.point_id, point.score) for point in leg] for leg in result.legs]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS / "keyword_corpus.json")
    args = parser.parse_args()
    env = {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(args.data_dir / "models"),
    }
    services = await build_services(
        load_config(env, data_dir=args.data_dir), Telemetry(build_logger("WARNING"))
    )
    try:
        index = services.index
        if not isinstance(index, EdgeIndex):
            raise SystemExit("this benchmark measures the embedded Qdrant Edge index")
        plan = (await plan_turn(services, _principal(), AGENT)).plans[0]
        questions = [q["text"] for q in _read_jsonl(DATASET / "queries.jsonl")][: args.queries]
        legs = [
            legs_for(
                plan,
                services.embedder.embed_queries([question]),
                services.config.leg_limit,
                document_keywords=index.document_keywords(plan.collection),
            )
            for question in questions
        ]
        held = index._existing(plan.collection)  # for its cached corpus choice, see above
        if held is None:
            raise SystemExit(f"no collection {plan.collection!r} in {args.data_dir}")
        index.rank(plan.collection, plan.scope, legs[0])  # counts whether it is the tenant
        if not held.whole_tenant.get(plan.scope):
            raise SystemExit("the bench scope must hold all its tenant's points")
        times: dict[str, list[float]] = {"tenant": [], "scope": []}
        same = True
        for _ in range(args.rounds):
            for question_legs in legs:
                held.whole_tenant[plan.scope] = True  # as counted above
                started = time.perf_counter()
                tenant = index.rank(plan.collection, plan.scope, question_legs)
                times["tenant"].append((time.perf_counter() - started) * 1000)
                held.whole_tenant[plan.scope] = False
                started = time.perf_counter()
                scope = index.rank(plan.collection, plan.scope, question_legs)
                times["scope"].append((time.perf_counter() - started) * 1000)
                same = same and _points(tenant) == _points(scope)
        medians = {name: round(statistics.median(values), 2) for name, values in times.items()}
        result: dict[str, Any] = {
            "command": "uv run python -m bench.keyword_corpus --data-dir " + str(args.data_dir),
            "questions": len(questions),
            "rounds": args.rounds,
            "rank_median_ms": medians,
            "ratio": round(medians["tenant"] / medians["scope"], 2),
            "identical_points_and_scores": same,
            "notes": (
                "The turn's ranking call (dense, passage keyword and document keyword legs, "
                "top_k 8 depth) per question, alternated: keyword IDF over the tenant's points "
                "(the gateway's choice when the Scope holds all of them) and over the Scope's "
                "own filter."
            ),
        }
    finally:
        await services.close()
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
