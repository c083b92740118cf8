"""Two vector sets for one KB on Qdrant Edge: a second named vector in the org's shard
against a second shard holding a copy of the KB's points (the "new collection behind an
alias" layout, the alias kept by kbgate since Edge has none).

One org shard holds `--passages` SciFact passages (dense 384-d random unit vectors, real
BM25-sized sparse vectors and payloads), split over `--kbs` KBs; one KB migrates. Each
layout is built from a copy of the same shard, alternated `--rounds` times in one run:

- named: `add_dense_vector` on the org shard, then `set_dense_vectors` page by page for the
  migrating KB's points (the job's own calls);
- copy: a new shard of the same config, the migrating KB's points read page by page
  (payload, sparse vectors) and written there with their new vector.

Reported per layout: the write time of the second set (engine calls only: the model's
time is the same for both), the disk added (allocated bytes of the shard directories,
after flush), and the process's RSS added. The model's part is measured in the gateway
(`bench.migration_turns`).

    uv run python -m bench.vector_sets --out bench/results/vector_sets.json
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ingest.engines.edge.disk import allocated_bytes
from ingest.engines.edge.engine import EDGE_DIR, EdgeEngine
from ingest.index import Passage, SparseVector, dense_vector_name
from ingest.payload import Classification, PassagePayload, Scope, text_checksum

RESULTS = Path(__file__).parent / "results"
CORPUS = Path("/work/shared/datasets/scifact/corpus.jsonl")
ORG = "bench"
COLLECTION = f"kb_org_{ORG}"
VECTOR = dense_vector_name("target_model")
DIM = 384
PAGE = 32


def _unit(rng: random.Random) -> tuple[float, ...]:
    values = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = math.sqrt(sum(v * v for v in values))
    return tuple(v / norm for v in values)


def _passages(count: int, kbs: int) -> list[Passage]:
    rng = random.Random(7)
    rows = [json.loads(line) for line in CORPUS.read_text().splitlines()[:count]]
    found = []
    for position, row in enumerate(rows):
        text = row["text"][:1500] or row["title"]
        terms = sorted({rng.randrange(30_000) for _ in range(60)})
        found.append(
            Passage(
                point_id=f"00000000-0000-4000-8000-{position:012d}",
                dense=_unit(rng),
                sparse=SparseVector(tuple(terms), tuple(1.0 for _ in terms)),
                payload=PassagePayload(
                    tenant_id="ws",
                    knowledge_base_id=f"kb{position % kbs}",
                    org_id=ORG,
                    document_id=f"doc{position}",
                    document_version="v1",
                    passage_index=0,
                    classification=Classification.INTERNAL,
                    text=text,
                    title=row["title"],
                    source="scifact",
                    checksum=text_checksum(text),
                    indexed_at="2026-12-06T00:00:00Z",
                ),
            )
        )
    return found


def _scope() -> Scope:
    return Scope.of(
        org_id=ORG,
        tenant_id="ws",
        kb_ids=["kb0"],
        clearance=Classification.RESTRICTED,
        strict=False,
    )


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) / 1024


def _named(root: Path) -> dict[str, float]:
    engine = EdgeEngine(root, DIM)
    scope, rng = _scope(), random.Random(11)
    shard_dir = root / EDGE_DIR
    engine.count(COLLECTION, scope)  # open it
    before, rss = allocated_bytes(shard_dir), _rss_mb()
    started = time.perf_counter()
    engine.add_dense_vector(COLLECTION, VECTOR, DIM)
    written = 0
    while True:
        page, _ = engine.missing_vector_page(COLLECTION, scope, VECTOR, None, PAGE)
        if not page:
            break
        written += engine.set_dense_vectors(
            COLLECTION, scope, VECTOR, {p.point_id: _unit(rng) for p in page}
        )
    seconds = time.perf_counter() - started
    rss_added = _rss_mb() - rss
    engine.close()
    return {
        "seconds": seconds,
        "passages": written,
        "disk_added_mb": (allocated_bytes(shard_dir) - before) / 2**20,
        "rss_added_mb": rss_added,
    }


def _copy(root: Path) -> dict[str, float]:
    engine = EdgeEngine(root, DIM)
    scope, rng = _scope(), random.Random(11)
    shard_dir = root / EDGE_DIR
    engine.count(COLLECTION, scope)
    before, rss = allocated_bytes(shard_dir), _rss_mb()
    started = time.perf_counter()
    copy = f"{COLLECTION}_v2"
    engine.ensure_collection(copy)
    offset, written = None, 0
    while True:
        page, offset = engine.passages_page(COLLECTION, scope, offset, PAGE)
        engine.upsert(copy, [_with_new(p, _unit(rng)) for p in page])
        written += len(page)
        if offset is None:
            break
    seconds = time.perf_counter() - started
    rss_added = _rss_mb() - rss
    engine.close()
    return {
        "seconds": seconds,
        "passages": written,
        "disk_added_mb": (allocated_bytes(shard_dir) - before) / 2**20,
        "rss_added_mb": rss_added,
    }


def _with_new(passage: Passage, vector: tuple[float, ...]) -> Passage:
    """The KB's point in the copy: its payload and sparse vectors, the new model's vector
    as the copy's `dense`."""
    return Passage(
        point_id=passage.point_id,
        dense=vector,
        sparse=passage.sparse,
        payload=passage.payload,
        document_sparse=passage.document_sparse,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=5000)
    parser.add_argument("--kbs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "vector_sets.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kbgate-vector-sets-"))
    try:
        base = work / "base"
        engine = EdgeEngine(base, DIM)
        passages = _passages(args.passages, args.kbs)
        for start in range(0, len(passages), 256):
            engine.upsert(COLLECTION, passages[start : start + 256])
        engine.optimize()
        engine.close()
        base_mb = allocated_bytes(base / EDGE_DIR) / 2**20
        runs: dict[str, list[dict[str, float]]] = {"named": [], "copy": []}
        for round_ in range(args.rounds):
            order = ["named", "copy"] if round_ % 2 == 0 else ["copy", "named"]
            for layout in order:
                root = work / f"{layout}-{round_}"
                shutil.copytree(base, root)
                gc.collect()
                runs[layout].append(_named(root) if layout == "named" else _copy(root))
                shutil.rmtree(root)
        summary: dict[str, Any] = {
            "passages": args.passages,
            "kbs": args.kbs,
            "migrating_passages": runs["named"][0]["passages"],
            "org_shard_mb": round(base_mb, 1),
            "layouts": {
                layout: {
                    key: round(statistics.median(r[key] for r in found), 3)
                    for key in ("seconds", "disk_added_mb", "rss_added_mb")
                }
                for layout, found in runs.items()
            },
            "runs": runs,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
        print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
