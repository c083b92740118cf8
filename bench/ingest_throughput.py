"""Ingest throughput on the SciFact corpus: DocumentWriter on Qdrant Edge vs the raw embedder.

Each repetition, in one process and with one loaded model:

1. `ingest`: every document through `DocumentWriter.put` into a fresh Edge data dir
   (chunk, embed the document's passages in one call, upsert both vectors, flush);
2. `raw_per_document`: `embed_documents` on the same passages, one call per document
   (the writer's call pattern, with no index);
3. `raw_bulk`: `embed_documents` on all the same passages in one call (the embedder
   batches them by length: the best the model does on this hardware).

Reported: passages/s of each (median of the repetitions), the ratios ingest/raw, and
peak RSS. Ratios measured in one run are what to compare across machines.

    uv run python -m bench.ingest_throughput --limit 500 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingest.chunking import ChunkingParams, chunk_text
from ingest.embedding import FastEmbedder, build_embedder
from ingest.payload import Classification
from ingest.qdrant_edge import EdgeIndex
from ingest.sync import Document, DocumentWriter, Target, embedding_input

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl"
DEFAULT_OUT = REPO_ROOT / "bench" / "results" / "ingest_throughput.json"
TARGET = Target(org_id="bench", tenant_id="bench", kb_id="scifact", storage="org")


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    doc_id: str
    title: str
    text: str


def load_corpus(path: Path, limit: int | None) -> list[CorpusDoc]:
    """The first `limit` documents of a BEIR corpus.jsonl (all when None)."""
    docs: list[CorpusDoc] = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if limit is not None and len(docs) >= limit:
                break
            row = json.loads(line)
            if str(row.get("text", "")).strip():
                docs.append(CorpusDoc(str(row["_id"]), str(row.get("title", "")), row["text"]))
    return docs


def rss_mb() -> float:
    """Current resident set size (Linux /proc), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ingest_once(
    embedder: FastEmbedder, docs: Sequence[CorpusDoc], params: ChunkingParams
) -> tuple[int, float]:
    """Passages written and seconds taken, into a fresh Edge data dir."""
    with tempfile.TemporaryDirectory(prefix="kbgate-bench-") as tmp:
        index = EdgeIndex(Path(tmp))
        writer = DocumentWriter(index, embedder, chunking=params)
        passages = 0
        started = time.perf_counter()
        for doc in docs:
            outcome = writer.put(
                TARGET, Document(doc.doc_id, doc.text, Classification.PUBLIC, title=doc.title)
            )
            passages += outcome.passages
        elapsed = time.perf_counter() - started
        index.close()
    return passages, elapsed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=None, help="first N documents (all: None)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--model-dir", type=Path, default=Path(tempfile.gettempdir()) / "kbgate-models"
    )
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    docs = load_corpus(args.corpus, args.limit)
    params = ChunkingParams()
    per_doc_inputs = [
        [embedding_input(doc.title, passage) for passage in chunk_text(doc.text, params)]
        for doc in docs
    ]
    inputs = [text for group in per_doc_inputs for text in group]
    rss_start = rss_mb()
    embedder = build_embedder(args.model_dir, None, args.threads, args.batch_size)
    embedder.embed_documents(inputs[:32])  # warm-up: load, first shapes
    rss_loaded = rss_mb()
    print(f"{len(docs)} documents, {len(inputs)} passages; {args.runs} runs")

    runs: list[dict[str, float]] = []
    for run in range(args.runs):
        passages, ingest_s = ingest_once(embedder, docs, params)
        if passages != len(inputs):
            raise RuntimeError(f"wrote {passages} passages, expected {len(inputs)}")
        started = time.perf_counter()
        for group in per_doc_inputs:
            embedder.embed_documents(group)
        per_doc_s = time.perf_counter() - started
        started = time.perf_counter()
        embedder.embed_documents(inputs)
        bulk_s = time.perf_counter() - started
        row = {
            "ingest_passages_per_s": passages / ingest_s,
            "raw_per_document_passages_per_s": passages / per_doc_s,
            "raw_bulk_passages_per_s": passages / bulk_s,
            "ingest_s": ingest_s,
            "raw_per_document_s": per_doc_s,
            "raw_bulk_s": bulk_s,
            "rss_mb_after": rss_mb(),
            "load_avg_1m_after": _load()[0],
        }
        runs.append(row)
        print(
            f"run {run + 1}: ingest {row['ingest_passages_per_s']:.1f} p/s, raw per-document "
            f"{row['raw_per_document_passages_per_s']:.1f} p/s, raw bulk "
            f"{row['raw_bulk_passages_per_s']:.1f} p/s, RSS {row['rss_mb_after']:.0f} MB",
            flush=True,
        )

    def median(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    summary: dict[str, Any] = {
        "corpus": str(args.corpus),
        "documents": len(docs),
        "passages": len(inputs),
        "limit": args.limit,
        "runs": args.runs,
        "chunking": {"max_words": params.max_words, "overlap_words": params.overlap_words},
        "batch_size": args.batch_size,
        "threads": args.threads,
        "median": {
            "ingest_passages_per_s": median("ingest_passages_per_s"),
            "raw_per_document_passages_per_s": median("raw_per_document_passages_per_s"),
            "raw_bulk_passages_per_s": median("raw_bulk_passages_per_s"),
        },
        "ratio": {
            "ingest_over_raw_bulk": median("ingest_passages_per_s")
            / median("raw_bulk_passages_per_s"),
            "ingest_over_raw_per_document": median("ingest_passages_per_s")
            / median("raw_per_document_passages_per_s"),
        },
        "rss_mb": {
            "process_start": rss_start,
            "model_loaded": rss_loaded,
            "peak": peak_rss_mb(),
        },
        "runs_detail": runs,
        "machine": {"python": platform.python_version(), "cpus": _cpus(), "load_avg": _load()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    med, ratio = summary["median"], summary["ratio"]
    print(
        f"median: ingest {med['ingest_passages_per_s']:.1f} p/s; raw bulk "
        f"{med['raw_bulk_passages_per_s']:.1f} p/s (ratio {ratio['ingest_over_raw_bulk']:.2f}); "
        f"raw per-document {med['raw_per_document_passages_per_s']:.1f} p/s "
        f"(ratio {ratio['ingest_over_raw_per_document']:.2f}); peak RSS "
        f"{summary['rss_mb']['peak']:.0f} MB -> {args.out}"
    )
    return 0


def _cpus() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


if __name__ == "__main__":
    raise SystemExit(main())
