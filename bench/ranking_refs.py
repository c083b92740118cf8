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

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from bench.ranking_calls import CALL_NOTE, parser, ranking_calls, write_result
from ingest.index import Leg, RankedPoint, RankResult
from ingest.payload import Scope
from ingest.qdrant_edge import EdgeIndex, _ranked_points, _Search, _Shard

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
    args = parser(__doc__, RESULTS / "ranking_refs.json").parse_args()
    async with ranking_calls(args.data_dir, args.queries) as calls:
        index, plan, legs = calls.index, calls.plan, calls.legs
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
            "questions": len(legs),
            "rounds": args.rounds,
            "points_per_call_mean": round(points / (args.rounds * len(legs)), 1),
            "rank_median_ms": medians,
            "ratio_remembered_to_with_points": round(
                medians["remembered"] / medians["with_points"], 2
            ),
            "identical_points_scores_and_refs": same,
            "notes": (
                CALL_NOTE + "refs from the shard's memory (the "
                "first round reads the new points' refs and fills it) and refs read with the "
                "points (as while a write holds the shard)."
            ),
        }
    write_result(result, args.output)


if __name__ == "__main__":
    asyncio.run(main())
