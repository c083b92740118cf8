"""The write path in one process on the SciFact corpus: DocumentWriter on Qdrant Edge vs the
raw embedder, or (`--pii-only`) the writer without and with the PII analyzer.

(Through HTTP, side by side with another code base, and turns while it ingests:
`bench.ingest_throughput`.)

Each repetition, in one process and with one loaded model, runs four stages over the same
passages, interleaved block by block (25 documents each by default) so that every stage
sees the same share of a machine whose load changes minute to minute:

1. `ingest`: every document through `DocumentWriter.put` into a fresh Edge data dir
   (chunk, embed the document's passages in one call, upsert both vectors, flush);
2. `raw_per_document`: `embed_documents` on the same passages, one call per document
   (the writer's call pattern, with no index);
3. `raw_bulk`: `embed_documents` on all the block's passages in one call (the embedder
   batches them by length: the best the model does on this hardware);
4. `index_only`: the writer again, into another fresh dir, with the embeddings of
   step 3 replayed: what chunking, scrolls, upserts and flushes cost without the model.

Reported: passages/s of each (median of the repetitions), the ratios ingest/raw, and
peak RSS (overall and per phase). Ratios measured in one run are what to compare
across machines; absolute figures move with whatever else the machine is doing
(Edge flushes every write to disk, so disk contention shows in `index_only`).

    uv run python -m bench.ingest_writer --limit 500 --runs 3
    uv run python -m bench.ingest_writer --limit 150 --runs 3 --pii-only \
        --out bench/results/ingest_throughput_pii.json

With `--pii-only` the stages are `ingest` (the writer as above, no analyzer) and
`ingest_pii` (the same writer with the gateway's PII analyzer, `Redactor`), each into a
fresh Edge dir, interleaved block by block; CPU milliseconds per passage (all threads of
the process) are reported beside passages/s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.beir_corpus import CorpusDoc, load_corpus
from ingest.chunking import ChunkingParams, chunk_text
from ingest.embedder.embedding import Embedding, FastEmbedder, build_embedder
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.index import SparseVector
from ingest.payload import Classification
from ingest.sync import Document, DocumentWriter, PassageAnalyzer, Target, embedding_input

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl"
DEFAULT_OUT = REPO_ROOT / "bench" / "results" / "ingest_writer.json"
TARGET = Target(org_id="bench", tenant_id="bench", kb_id="scifact", storage="org")


def rss_mb() -> float:
    """Current resident set size (Linux /proc), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class RssByPhase:
    """Samples RSS every 20 ms on a daemon thread; keeps the highest value per named phase."""

    def __init__(self) -> None:
        self.phase = "start"
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssByPhase:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            phase, value = self.phase, rss_mb()
            self.peaks[phase] = max(self.peaks.get(phase, 0.0), value)
            self._stop.wait(0.02)


class ReplayEmbedder:
    """Answers with embeddings computed earlier: the writer's cost without the model's."""

    def __init__(self, dense_dim: int) -> None:
        self._known: dict[str, Embedding] = {}
        self._keywords: dict[str, SparseVector] = {}
        self._dense_dim = dense_dim

    def remember(self, texts: Sequence[str], embeddings: Sequence[Embedding]) -> None:
        self._known.update(zip(texts, embeddings, strict=True))

    def remember_keywords(self, texts: Sequence[str], vectors: Sequence[SparseVector]) -> None:
        self._keywords.update(zip(texts, vectors, strict=True))

    @property
    def dense_dim(self) -> int:
        return self._dense_dim

    def embed_documents(self, texts: Sequence[str], *, lane: str = "") -> list[Embedding]:
        return [self._known[text] for text in texts]

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        return self.embed_documents(texts)  # the writer never asks; replayed all the same

    def embed_document_keywords(self, texts: Sequence[str]) -> list[SparseVector]:
        return [self._keywords[text] for text in texts]


STAGES = ("ingest", "raw_per_document", "raw_bulk", "index_only")


def _put_all(writer: DocumentWriter, docs: Sequence[CorpusDoc]) -> int:
    return sum(
        writer.put(
            TARGET, Document(doc.doc_id, doc.text, Classification.PUBLIC, title=doc.title)
        ).passages
        for doc in docs
    )


def _one_run(
    run: int,
    *,
    embedder: FastEmbedder,
    docs: Sequence[CorpusDoc],
    params: ChunkingParams,
    block: int,
    rss: RssByPhase,
) -> dict[str, float]:
    """One repetition into fresh Edge dirs, the four stages interleaved block by block, so
    each stage gets the same share of a machine whose load changes minute to minute."""
    seconds = dict.fromkeys(STAGES, 0.0)
    passages = 0
    replay = ReplayEmbedder(embedder.dense_dim)
    with (
        tempfile.TemporaryDirectory(prefix="kbgate-bench-") as live_dir,
        tempfile.TemporaryDirectory(prefix="kbgate-bench-") as replay_dir,
    ):
        live, replayed = (
            BlockingIndex(EdgeIndex(Path(live_dir))),
            BlockingIndex(EdgeIndex(Path(replay_dir))),
        )
        writer = DocumentWriter(live, embedder, chunking=params)
        replay_writer = DocumentWriter(replayed, replay, chunking=params)
        for start in range(0, len(docs), block):
            chunk = docs[start : start + block]
            groups = [
                [embedding_input(doc.title, passage) for passage in chunk_text(doc.text, params)]
                for doc in chunk
            ]
            flat = [text for group in groups for text in group]
            whole = [embedding_input(doc.title, doc.text) for doc in chunk]

            rss.phase, started = "ingest", time.perf_counter()
            passages += _put_all(writer, chunk)
            seconds["ingest"] += time.perf_counter() - started

            rss.phase, started = "raw_per_document", time.perf_counter()
            for group, document in zip(groups, whole, strict=True):
                embedder.embed_documents(group)
                embedder.embed_document_keywords([document])
            seconds["raw_per_document"] += time.perf_counter() - started

            rss.phase, started = "raw_bulk", time.perf_counter()
            replay.remember(flat, embedder.embed_documents(flat))
            replay.remember_keywords(whole, embedder.embed_document_keywords(whole))
            seconds["raw_bulk"] += time.perf_counter() - started

            rss.phase, started = "index_only", time.perf_counter()
            _put_all(replay_writer, chunk)
            seconds["index_only"] += time.perf_counter() - started
        live.close()
        replayed.close()
    row = {f"{stage}_passages_per_s": passages / seconds[stage] for stage in STAGES}
    row.update({f"{stage}_s": seconds[stage] for stage in STAGES})
    row["passages"] = passages
    row["rss_mb_after"] = rss_mb()
    row["load_avg_1m_after"] = _load()[0]
    print(
        f"run {run + 1}: ingest {row['ingest_passages_per_s']:.1f} p/s, raw per-document "
        f"{row['raw_per_document_passages_per_s']:.1f} p/s, raw bulk "
        f"{row['raw_bulk_passages_per_s']:.1f} p/s, index only "
        f"{row['index_only_passages_per_s']:.0f} p/s, RSS {row['rss_mb_after']:.0f} MB",
        flush=True,
    )
    return row


PII_STAGES = ("ingest", "ingest_pii")


def _pii_run(
    run: int,
    *,
    embedder: FastEmbedder,
    analyzer: PassageAnalyzer,
    docs: Sequence[CorpusDoc],
    block: int,
    rss: RssByPhase,
) -> dict[str, float]:
    """One repetition: the writer without and with the analyzer, each into a fresh Edge
    dir, interleaved block by block; wall and process CPU seconds of each."""
    seconds = dict.fromkeys(PII_STAGES, 0.0)
    cpu = dict.fromkeys(PII_STAGES, 0.0)
    passages = 0
    with (
        tempfile.TemporaryDirectory(prefix="kbgate-bench-") as plain_dir,
        tempfile.TemporaryDirectory(prefix="kbgate-bench-") as pii_dir,
    ):
        plain, analysed = (
            BlockingIndex(EdgeIndex(Path(plain_dir))),
            BlockingIndex(EdgeIndex(Path(pii_dir))),
        )
        writers = {
            "ingest": DocumentWriter(plain, embedder),
            "ingest_pii": DocumentWriter(analysed, embedder, analyzer=analyzer),
        }
        for start in range(0, len(docs), block):
            chunk = docs[start : start + block]
            for stage, writer in writers.items():
                rss.phase = stage
                started, cpu_started = time.perf_counter(), time.process_time()
                written = _put_all(writer, chunk)
                seconds[stage] += time.perf_counter() - started
                cpu[stage] += time.process_time() - cpu_started
            passages += written
        plain.close()
        analysed.close()
    row: dict[str, float] = {
        f"{stage}_passages_per_s": passages / seconds[stage] for stage in PII_STAGES
    }
    row.update({f"{stage}_s": seconds[stage] for stage in PII_STAGES})
    row["passages"] = passages
    row.update(
        {f"{stage}_cpu_ms_per_passage": 1000 * cpu[stage] / passages for stage in PII_STAGES}
    )
    row["ingest_pii_over_ingest"] = row["ingest_pii_passages_per_s"] / row["ingest_passages_per_s"]
    row["rss_mb_after"] = rss_mb()
    row["load_avg_1m_after"] = _load()[0]
    print(
        f"run {run + 1}: ingest {row['ingest_passages_per_s']:.2f} p/s, with PII analysis "
        f"{row['ingest_pii_passages_per_s']:.2f} p/s ({row['ingest_pii_over_ingest']:.3f})",
        flush=True,
    )
    return row


def _pii_main(args: argparse.Namespace, docs: Sequence[CorpusDoc]) -> int:
    from gateway.safety.redaction import Redactor

    with RssByPhase() as rss:
        rss_start = rss_mb()
        rss.phase = "model_load"
        embedder = build_embedder(args.model_dir, None, args.threads, args.batch_size)
        analyzer = Redactor.build()
        rss_loaded = rss_mb()
        rss.phase = "warm_up"
        _put_all(
            DocumentWriter(
                BlockingIndex(EdgeIndex(Path(tempfile.mkdtemp()))), embedder, analyzer=analyzer
            ),
            docs[:4],
        )
        runs = [
            _pii_run(
                run, embedder=embedder, analyzer=analyzer, docs=docs, block=args.block, rss=rss
            )
            for run in range(args.runs)
        ]
        rss.phase = "end"

    def median(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    figures = {
        "stages": list(PII_STAGES),
        "ner_model": getattr(analyzer, "ner_model", None),
        "median": {
            f"{stage}_passages_per_s": median(f"{stage}_passages_per_s") for stage in PII_STAGES
        },
        "ratio": {
            "ingest_pii_over_ingest": median("ingest_pii_passages_per_s")
            / median("ingest_passages_per_s")
        },
        "per_run_ingest_pii_over_ingest": [round(run["ingest_pii_over_ingest"], 3) for run in runs],
        "median_cpu_ms_per_passage": {
            stage: median(f"{stage}_cpu_ms_per_passage") for stage in PII_STAGES
        },
    }
    summary = _write_summary(args, docs, runs, figures, rss=(rss, rss_start, rss_loaded))
    ratio = summary["ratio"]["ingest_pii_over_ingest"]
    print(f"median ratio with/without PII analysis {ratio:.3f} -> {args.out}")
    return 0


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
    parser.add_argument("--block", type=int, default=25, help="documents per interleaved block")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--pii-only", action="store_true", help="the writer without and with the PII analyzer"
    )
    args = parser.parse_args(argv)

    docs = load_corpus(args.corpus, args.limit)
    if args.pii_only:
        return _pii_main(args, docs)
    params = ChunkingParams()
    sample = [
        embedding_input(doc.title, passage)
        for doc in docs[:32]
        for passage in chunk_text(doc.text, params)
    ]
    with RssByPhase() as rss:
        rss_start = rss_mb()
        rss.phase = "model_load"
        embedder = build_embedder(args.model_dir, None, args.threads, args.batch_size)
        rss_loaded = rss_mb()
        rss.phase = "warm_up"
        embedder.embed_documents(sample[:32])  # first shapes
        print(f"{len(docs)} documents; {args.runs} runs, blocks of {args.block}", flush=True)
        runs = [
            _one_run(run, embedder=embedder, docs=docs, params=params, block=args.block, rss=rss)
            for run in range(args.runs)
        ]
        rss.phase = "end"

    def median(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    figures = {
        "median": {
            "ingest_passages_per_s": median("ingest_passages_per_s"),
            "raw_per_document_passages_per_s": median("raw_per_document_passages_per_s"),
            "raw_bulk_passages_per_s": median("raw_bulk_passages_per_s"),
            "index_only_passages_per_s": median("index_only_passages_per_s"),
        },
        "ratio": {
            "ingest_over_raw_bulk": median("ingest_passages_per_s")
            / median("raw_bulk_passages_per_s"),
            "ingest_over_raw_per_document": median("ingest_passages_per_s")
            / median("raw_per_document_passages_per_s"),
        },
    }
    chunking = {"max_words": params.max_words, "overlap_words": params.overlap_words}
    summary = _write_summary(
        args, docs, runs, figures, rss=(rss, rss_start, rss_loaded), chunking=chunking
    )
    med, ratio = summary["median"], summary["ratio"]
    print(
        f"median: ingest {med['ingest_passages_per_s']:.1f} p/s; raw bulk "
        f"{med['raw_bulk_passages_per_s']:.1f} p/s (ratio {ratio['ingest_over_raw_bulk']:.2f}); "
        f"raw per-document {med['raw_per_document_passages_per_s']:.1f} p/s "
        f"(ratio {ratio['ingest_over_raw_per_document']:.2f}); peak RSS "
        f"{summary['rss_mb']['peak']:.0f} MB -> {args.out}"
    )
    return 0


def _write_summary(
    args: argparse.Namespace,
    docs: Sequence[CorpusDoc],
    runs: Sequence[dict[str, Any]],
    figures: dict[str, Any],
    *,
    rss: tuple[RssByPhase, float, float],
    chunking: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The summary of the runs (the settings, `figures`, memory, the machine), written to
    `args.out` as JSON. `rss`: the phase sampler, RSS at start and once the model loaded."""
    by_phase, rss_start, rss_loaded = rss
    summary: dict[str, Any] = {
        "corpus": str(args.corpus),
        "documents": len(docs),
        "passages": int(runs[0]["passages"]),
        "limit": args.limit,
        "runs": args.runs,
        **({"chunking": chunking} if chunking is not None else {}),
        "batch_size": args.batch_size,
        "block": args.block,
        "threads": args.threads,
        **figures,
        "rss_mb": {
            "process_start": rss_start,
            "model_loaded": rss_loaded,
            "peak": peak_rss_mb(),
            "peak_by_phase": {phase: round(value, 1) for phase, value in by_phase.peaks.items()},
        },
        "runs_detail": list(runs),
        "machine": {"python": platform.python_version(), "cpus": _cpus(), "load_avg": _load()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _cpus() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


if __name__ == "__main__":
    raise SystemExit(main())
