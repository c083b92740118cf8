"""Does a Qdrant Edge query let other Python threads run? Measured, on synthetic passages.

The gateway runs each engine call in a worker thread (`asyncio.to_thread`) so the event
loop keeps serving HTTP meanwhile. That only helps if the engine releases the GIL while
it searches. Three figures, side by side in one run:

- hybrid queries per second from 1, 2 and 4 threads (parallel if the GIL is released);
- the same for the embedding model's question session (onnxruntime releases the GIL),
  as the reference of what parallel threads look like on this machine;
- the speed of a pure-Python loop while another thread searches, as a share of its
  speed alone (about 100% if the GIL is released, at most ~50% if it is not).

    uv run python -m bench.edge_gil [--size 13000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from bench.engines import COLLECTION, _passages, _sparse, _unit
from ingest.embedder.embedding import build_embedder
from ingest.engines.edge.engine import EdgeEngine
from ingest.index import Leg, LegKind
from ingest.payload import Scope

RESULTS = Path(__file__).parent / "results" / "edge_gil.json"
QUESTION = "Does vitamin D supplementation reduce the risk of fractures in older adults?"


def _rate(work: Callable[[int], None], calls: int, threads: int) -> float:
    with ThreadPoolExecutor(threads) as pool:
        started = time.perf_counter()
        list(pool.map(work, range(calls)))
        return round(calls / (time.perf_counter() - started), 1)


def _spin(n: int = 3_000_000) -> float:
    started = time.perf_counter()
    total = 0
    for i in range(n):
        total += i
    return time.perf_counter() - started


def _python_share_while(busy: Callable[[int], None]) -> float:
    """A pure-Python loop's speed while `busy` runs in a loop on another thread, in %."""
    alone = min(_spin() for _ in range(3))
    stop = threading.Event()

    def keep_busy() -> None:
        while not stop.is_set():
            busy(0)

    other = threading.Thread(target=keep_busy)
    other.start()
    try:
        time.sleep(0.1)
        shared = min(_spin() for _ in range(3))
    finally:
        stop.set()
        other.join()
    return round(100 * alone / shared, 1)


def measure(size: int, calls: int, model_dir: Path) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    scope = Scope(org_id="bench", tenant_id="t0", kb_ids=frozenset({"kb0"}))
    queries = [(_unit(rng), _sparse(rng, 8)) for _ in range(64)]
    with tempfile.TemporaryDirectory() as scratch:
        index = EdgeEngine(Path(scratch))
        index.ensure_collection(COLLECTION)
        passages = _passages(size, seed=size)
        for start in range(0, len(passages), 512):
            index.upsert(COLLECTION, passages[start : start + 512])

        def search(call: int) -> None:
            dense, sparse = queries[call % len(queries)]
            legs = [
                Leg(kind=LegKind.DENSE, dense=dense, limit=100),
                Leg(kind=LegKind.KEYWORD, sparse=sparse, limit=100),
            ]
            index.query(COLLECTION, scope, legs)

        search_rates = {threads: _rate(search, calls, threads) for threads in (1, 2, 4)}
        search_share = _python_share_while(search)
        index.close()
    embedder = build_embedder(model_dir, None, threads=None)
    session = embedder._query_dense  # the question session on its own

    def embed(_: int) -> None:
        list(session.query_embed([QUESTION]))

    embed_rates = {threads: _rate(embed, calls // 2, threads) for threads in (1, 2)}
    embed_share = _python_share_while(embed)
    embedder.close()
    return {
        "passages": size,
        "edge_hybrid_queries_per_s_by_threads": search_rates,
        "question_embeddings_per_s_by_threads": embed_rates,
        "python_speed_while_edge_searches_pct": search_share,
        "python_speed_while_model_embeds_pct": embed_share,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=13_000)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--model-dir", type=Path, default=Path("kbgate-data/models"))
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = measure(args.size, args.calls, args.model_dir)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
