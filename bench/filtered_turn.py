"""A turn's dense leg with a document-field filter at 100k passages, on Qdrant Edge.

The corpus is `bench.filtered_recall`'s (synthetic clustered vectors replayed through
kbgate's own adapter, ~1,000 Zipf-sized workspaces over 20 organizations; no embedding):
every document also carries `region`, one of 20 values drawn at random, so a filter on
one value keeps about 5 % of a workspace's passages, unrelated to where they lie in the
vector space (the hard case for a graph search). The collection declares `region` as
a KB's schema would (`ensure_field_indexes`: a keyword payload index on
`fields.keyword.region`), is indexed by `EdgeEngine.optimize` as a gateway's start does,
then each question runs what a turn's dense leg sends the engine, alternated per
question so the shared CPU weighs on each alike:

- `plain`: the adapter's `rank` (weak answers searched again exactly) in the largest
  workspace's Scope, as before filters existed;
- `unfiltered`: a turn now: the count of the Scope's dated documents
  (`ingest.metadata.dated`), then `rank` in the Scope, with validity as of now when
  that count is not 0;
- `filtered`: the same with `{"region": <one value>}` compiled as a turn compiles it.

With `--dated-share`, that share of the documents carries a `valid_until` a year ahead
(so every turn of the workspace carries the validity condition, and none is expired).
Recall@10 of `filtered` is measured against an exact search under the same Scope.

    uv run python -m bench.filtered_turn --points 100000 --out bench/results/filtered_turn.json
    uv run python -m bench.filtered_turn --points 100000 --dated-share 0.02 \
        --out bench/results/filtered_turn_dated.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
from qdrant_edge import Query, QueryRequest, SearchParams

from bench.filtered_recall import DIM, NOISE, TOP, Corpus, _payload, make_corpus
from ingest.engines.edge.engine import EdgeEngine, _scope_filter
from ingest.index import SHARED_COLLECTION, Leg, LegKind, Passage, SparseVector
from ingest.metadata import check_schema, compile_filter, dated, field_indexes, valid_at
from ingest.payload import Scope

REGIONS = 20
BATCH = 1000
NOW = "2026-12-01T00:00:00Z"
UNTIL = "2027-12-01T00:00:00Z"


def _region(position: int, seed: int) -> str:
    """A document's region: one of `REGIONS`, at random per document (8 passages)."""
    rng = np.random.default_rng(seed * 1_000_003 + position // 8)
    return f"r{int(rng.integers(0, REGIONS))}"


def _dated(position: int, seed: int, share: float) -> bool:
    rng = np.random.default_rng(seed * 7_000_003 + position // 8)
    return bool(rng.random() < share)


def _write(corpus: Corpus, engine: EdgeEngine, seed: int, dated_share: float = 0.0) -> None:
    empty = SparseVector((), ())
    schema = check_schema({"region": "string"})
    engine.ensure_field_indexes(SHARED_COLLECTION, field_indexes(schema))
    for start in range(0, len(corpus.vectors), BATCH):
        stop = min(start + BATCH, len(corpus.vectors))
        engine.upsert(
            SHARED_COLLECTION,
            [
                Passage(
                    point_id=corpus.point_id(position),
                    dense=tuple(corpus.vectors[position].tolist()),
                    sparse=empty,
                    payload=msgspec.structs.replace(
                        _payload(corpus, position),
                        metadata={"region": _region(position, seed)},
                        valid_until=UNTIL if _dated(position, seed, dated_share) else None,
                    ),
                )
                for position in range(start, stop)
            ],
        )


def _largest(corpus: Corpus) -> tuple[Scope, np.ndarray[Any, Any]]:
    tenant = 0
    count = int(corpus.kb_counts[tenant])
    scope = Scope.of(
        org_id=f"org{corpus.org_of_tenant[tenant]}",
        tenant_id=f"t{tenant}",
        kb_ids=[f"t{tenant}-kb{kb}" for kb in range(count)],
        clearance="restricted",
    )
    return scope, np.flatnonzero(corpus.tenant == tenant)


def _exact(engine: EdgeEngine, scope: Scope, vector: list[float]) -> list[str]:
    shard = engine.existing_shard(SHARED_COLLECTION)
    assert shard is not None  # noqa: S101 — written above
    found = shard.query(
        QueryRequest(
            limit=TOP,
            query=Query.Nearest(vector, using="dense"),
            filter=_scope_filter(scope),
            params=SearchParams(exact=True),
            with_payload=False,
        )
    )
    return [str(point.id) for point in found]


def _near(corpus: Corpus, positions: np.ndarray[Any, Any], seed: int) -> np.ndarray[Any, Any]:
    """A question near each of these passages: its vector plus noise, normalised (as
    `bench.filtered_recall` makes its questions)."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((len(positions), DIM)).astype(np.float32) * np.float32(NOISE)
    rows = corpus.vectors[positions] + noise
    normalised: np.ndarray[Any, Any] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


def _plain_rank(engine: EdgeEngine, scope: Scope, leg: Leg) -> list[str]:
    """The ranking as before filters: the Scope alone, no count."""
    return [point.point_id for point in engine.rank(SHARED_COLLECTION, scope, [leg]).legs[0]]


def _turn_rank(engine: EdgeEngine, scope: Scope, leg: Leg, narrowing: Any) -> list[str]:
    """A turn's engine calls for one KB's dense leg: the dated count, then the ranking
    (with validity when the Scope holds dated documents)."""
    holding = engine.count(SHARED_COLLECTION, scope.narrowed(dated()))
    searched = scope.narrowed(valid_at(NOW) if holding else None).narrowed(narrowing)
    result = engine.rank(SHARED_COLLECTION, searched, [leg])
    return [point.point_id for point in result.legs[0]]


def run(
    points: int, questions: int, seed: int, data_dir: Path, dated_share: float, *, near: bool
) -> dict[str, Any]:
    corpus = make_corpus(points, centroids=64, seed=seed)
    written = (data_dir / "qdrant-edge").exists()
    engine = EdgeEngine(data_dir, dense_dim=DIM)
    started = time.perf_counter()
    if not written:
        _write(corpus, engine, seed, dated_share)
    write_s = time.perf_counter() - started
    started = time.perf_counter()
    if not written:
        engine.optimize()
    optimize_s = time.perf_counter() - started
    scope, pool = _largest(corpus)
    schema = check_schema({"region": "string"})
    regions = [_region(int(position), seed) for position in pool]
    # Each question lies near a passage of the workspace, and (`near`) its filter keeps
    # that passage's region, or (`anywhere`) a region unrelated to it.
    anchors = np.random.default_rng(seed + 1).choice(len(pool), size=questions)
    vectors = _near(corpus, pool[anchors], seed + 2)
    timings: dict[str, list[float]] = {"plain": [], "unfiltered": [], "filtered": []}
    recalls: list[float] = []
    kept: list[int] = []
    holding = engine.count(SHARED_COLLECTION, scope.narrowed(dated()))
    filters = []
    for number in range(questions):
        region = regions[anchors[number]] if near else f"r{number % REGIONS}"
        kept.append(regions.count(region))
        filters.append(compile_filter({"region": region}, schema))
    legs = [Leg(LegKind.DENSE, dense=tuple(v.tolist()), limit=TOP) for v in vectors]
    found: dict[str, list[list[str]]] = {name: [] for name in timings}
    # Timed first, each question's three cases twice in mirrored order (so each case
    # follows each other alike); the exact reference searches come after, untimed.
    for number, leg in enumerate(legs):
        order = ["plain", "unfiltered", "filtered"]
        for rotation in (order, order[::-1]):
            for name in rotation:
                tick = time.perf_counter()
                ids = (
                    _plain_rank(engine, scope, leg)
                    if name == "plain"
                    else _turn_rank(
                        engine, scope, leg, filters[number] if name == "filtered" else None
                    )
                )
                timings[name].append((time.perf_counter() - tick) * 1000)
                if rotation is order:
                    found[name].append(ids)
    for number, vector in enumerate(vectors):
        narrowed = scope.narrowed(valid_at(NOW) if holding else None).narrowed(filters[number])
        exact = _exact(engine, narrowed, vector.tolist())
        got = set(found["filtered"][number])
        if exact:
            recalls.append(len(got & set(exact)) / len(exact))
    engine.close()
    plain = statistics.median(timings["plain"])
    return {
        "points": points,
        "questions": questions,
        "questions_near_the_filter": near,
        "workspace_passages": len(pool),
        "workspace_dated_passages": holding,
        "filter_keeps_median": statistics.median(kept),
        "filter_share": round(statistics.median(kept) / len(pool), 4),
        "write_s": round(write_s, 1),
        "optimize_s": round(optimize_s, 1),
        "median_ms": {name: round(statistics.median(v), 3) for name, v in timings.items()},
        "p95_ms": {name: round(float(np.percentile(v, 95)), 3) for name, v in timings.items()},
        "ratio_to_plain": {
            name: round(statistics.median(v) / plain, 3) for name, v in timings.items()
        },
        "filtered_recall_at_10": round(statistics.mean(recalls), 4),
        "ratio_filtered_to_unfiltered": round(
            statistics.median(timings["filtered"]) / statistics.median(timings["unfiltered"]), 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--dated-share", type=float, default=0.0)
    parser.add_argument(
        "--anywhere",
        action="store_true",
        help="filter on a region unrelated to the passage each question lies near",
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--data-dir", type=Path, help="keep the collection here (reused when it exists)"
    )
    args = parser.parse_args()
    if args.data_dir is not None:
        report = run(
            args.points,
            args.questions,
            args.seed,
            args.data_dir,
            args.dated_share,
            near=not args.anywhere,
        )
    else:
        with tempfile.TemporaryDirectory(prefix="kbgate-filtered-turn-") as data_dir:
            report = run(
                args.points,
                args.questions,
                args.seed,
                Path(data_dir),
                args.dated_share,
                near=not args.anywhere,
            )
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
