"""What computing keyword IDF over the tenant's points instead of the Scope's costs and changes.

Qdrant Edge computes a keyword leg's IDF over the points of a filter (`SearchParams.idf`).
The Scope's own filter is always right; when the Scope holds every point its tenant has in
the collection, the tenant condition alone selects the same points, and `EdgeIndex` gives
Edge that instead (`ingest.qdrant_edge._reading`). Per question of the golden set,
on a turn-bench data dir, this runs the turn's ranking call both ways, alternated: the
tenant's corpus as the gateway now does, and the Scope's, which `EdgeIndex` uses when the
Scope does not hold all the tenant's points (the benchmark sets the shard's cached answer
to that question to get it; everything else in the call is the same), after one untimed
pass over the questions that fills its memory of refs. It reports both
medians and whether every leg returned the same points with the same scores.

    uv run python -m bench.keyword_corpus --data-dir /tmp/kbgate-turnbench2
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

from bench.ranking_calls import CALL_NOTE, parser, ranking_calls, write_result
from ingest.index import RankResult

RESULTS = Path(__file__).parent / "results"


def _points(result: RankResult) -> list[list[tuple[str, float]]]:
    return [[(point.point_id, point.score) for point in leg] for leg in result.legs]


async def main() -> None:
    args = parser(__doc__, RESULTS / "keyword_corpus.json").parse_args()
    async with ranking_calls(args.data_dir, args.queries) as calls:
        index, plan, legs = calls.index, calls.plan, calls.legs
        held = index._existing(plan.collection)  # for its cached corpus choice, see above
        if held is None:
            raise SystemExit(f"no collection {plan.collection!r} in {args.data_dir}")
        for question_legs in legs:  # counts whether it is the tenant; remembers the refs
            index.rank(plan.collection, plan.scope, question_legs)
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
            "questions": len(legs),
            "rounds": args.rounds,
            "rank_median_ms": medians,
            "ratio": round(medians["tenant"] / medians["scope"], 2),
            "identical_points_and_scores": same,
            "notes": (
                CALL_NOTE + "keyword IDF over the tenant's points "
                "(the gateway's choice when the Scope holds all of them) and over the Scope's "
                "own filter."
            ),
        }
    write_result(result, args.output)


if __name__ == "__main__":
    asyncio.run(main())
