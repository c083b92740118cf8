"""What remembering ranked points' refs saves the turn's ranking call, and that it changes nothing.

Fusion needs each ranked point's ref (KB, document, version, passage index, indexing
time). Qdrant Edge reads payloads slowly next to its search, so `EdgeIndex.rank` searches
without payloads and takes refs from what the shard remembers of points it ranked before
(`ingest.qdrant_edge._Shard.refs`), reading only new points' refs; while a write holds the
shard, it reads every ref with the points, as it always did before. Per question of the
golden set, on a turn-bench data dir, this runs the turn's ranking call both ways,
alternated (the first round fills the memory: reported on its own), and reports the
medians and whether both gave the same points, scores and refs.

    uv run python -m bench.ranking_refs --data-dir /tmp/kbgate-turnbench2
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
from ingest.index import Leg, RankedPoint, RankResult
from ingest.payload import Scope
from ingest.qdrant_edge import EdgeIndex, _ranked_points, _Search, _Shard
from settings.config import load_config

RESULTS = Path(__file__).parent / "results"


def _with_points(
    held: _Shard, scope: Scope, search: _Search, exclusive: bool
) -> list[list[RankedPoint]]:
    """`rank`'s reading as while a write holds the shard: refs read with the points."""
    return _ranked_points(held, scope, search, False)


def _read_with_points(
    index: EdgeIndex, collection: str, scope: Scope, legs: list[Leg]
) -> RankResult:
    return RankResult(
        legs=tuple(map(tuple, index._query_batch(collection, scope, legs, _with_points)))
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS / "ranking_refs.json")
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
        times: dict[str, list[float]] = {"first_round": [], "remembered": [], "with_points": []}
        same = True
        points = 0
        for round_ in range(args.rounds):
            for question_legs in legs:
                started = time.perf_counter()
                remembered = index.rank(plan.collection, plan.scope, question_legs)
                elapsed = (time.perf_counter() - started) * 1000
                times["first_round" if round_ == 0 else "remembered"].append(elapsed)
                started = time.perf_counter()
                read = _read_with_points(index, plan.collection, plan.scope, question_legs)
                times["with_points"].append((time.perf_counter() - started) * 1000)
                same = same and remembered == read
                points += sum(len(leg) for leg in read.legs)
        medians = {name: round(statistics.median(values), 2) for name, values in times.items()}
        result: dict[str, Any] = {
            "command": "uv run python -m bench.ranking_refs --data-dir " + str(args.data_dir),
            "questions": len(questions),
            "rounds": args.rounds,
            "points_per_call_mean": round(points / (args.rounds * len(questions)), 1),
            "rank_median_ms": medians,
            "ratio_remembered_to_with_points": round(
                medians["remembered"] / medians["with_points"], 2
            ),
            "identical_points_scores_and_refs": same,
            "notes": (
                "The turn's ranking call (dense, passage keyword and document keyword legs, "
                "top_k 8 depth) per question, alternated: refs from the shard's memory (the "
                "first round reads the new points' refs and fills it) and refs read with the "
                "points (as while a write holds the shard)."
            ),
        }
    finally:
        await services.close()
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
