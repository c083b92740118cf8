"""Choose passage sizes on the golden set: document nDCG@10 on SciFact per chunking setting.

For each (max_words, overlap_words) setting, the corpus (or a seeded subset: every
document judged for the test queries plus random others) is ingested through
`DocumentWriter` into a fresh Qdrant Edge data dir. Each query is embedded with
`embed_queries` and searched through the Index with a Scope, one leg (limit 100
passages) at a time; a document's score is its best passage's score. Scored with
ir_measures: nDCG@10, R@100 and MRR@10 for the dense leg, and the same for the
keyword (BM25) leg, which chunking moves too. Also reported: passages, words per
passage, and the share of passages (with their title) the model truncates at 256
word-pieces.

    uv run python -m bench.chunking_eval --docs 1500
    uv run python -m bench.chunking_eval --docs 0          # the whole corpus
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ir_measures
from ir_measures import RR, R, nDCG
from tokenizers import Tokenizer

from bench.beir_corpus import CorpusDoc, load_corpus
from bench.ingest_throughput import peak_rss_mb
from ingest.chunking import ChunkingParams, chunk_text
from ingest.embedder.embedding import MAX_TOKENS, FastEmbedder, assemble_minilm, build_embedder
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.index import Leg, LegKind
from ingest.payload import Classification, Scope
from ingest.sync import Document, DocumentWriter, Target, embedding_input

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPO_ROOT.parent / "shared" / "datasets" / "scifact"
DEFAULT_OUT = REPO_ROOT / "bench" / "results" / "chunking_eval.json"
TARGET = Target(org_id="bench", tenant_id="bench", kb_id="scifact", storage="org")
WHOLE_DOCUMENT = ChunkingParams(max_words=100_000, overlap_words=0)
SETTINGS: tuple[tuple[str, ChunkingParams], ...] = (
    ("80/20", ChunkingParams(80, 20)),
    ("100/25", ChunkingParams(100, 25)),
    ("120/30", ChunkingParams(120, 30)),
    ("160/40", ChunkingParams(160, 40)),
    ("220/50", ChunkingParams(220, 50)),
    ("whole", WHOLE_DOCUMENT),
)
MEASURES = [nDCG @ 10, R @ 100, RR @ 10]
LEG_LIMIT = 100


def load_queries(dataset: Path) -> tuple[dict[str, str], list[ir_measures.Qrel]]:
    """Queries that have judgements, and the judgements (BEIR qrels.tsv)."""
    qrels: list[ir_measures.Qrel] = []
    with (dataset / "qrels.tsv").open(encoding="utf-8") as lines:
        next(lines)
        for line in lines:
            query_id, doc_id, score = line.rstrip("\n").split("\t")
            qrels.append(ir_measures.Qrel(query_id, doc_id, int(score)))
    judged = {qrel.query_id for qrel in qrels}
    queries: dict[str, str] = {}
    with (dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if str(row["_id"]) in judged:
                queries[str(row["_id"])] = row["text"]
    return queries, qrels


def choose_docs(
    corpus: list[CorpusDoc], qrels: Sequence[ir_measures.Qrel], size: int, seed: int
) -> list[CorpusDoc]:
    """Every judged document plus seeded random others, `size` in all (0: the whole corpus)."""
    if size <= 0 or size >= len(corpus):
        return corpus
    relevant = {qrel.doc_id for qrel in qrels}
    chosen = [doc for doc in corpus if doc.doc_id in relevant]
    others = [doc for doc in corpus if doc.doc_id not in relevant]
    chosen += random.Random(seed).sample(others, max(0, size - len(chosen)))
    return sorted(chosen, key=lambda doc: doc.doc_id)


def evaluate(
    name: str,
    params: ChunkingParams,
    *,
    docs: Sequence[CorpusDoc],
    queries: dict[str, str],
    qrels: Sequence[ir_measures.Qrel],
    embedder: FastEmbedder,
    tokenizer: Tokenizer,
) -> dict[str, Any]:
    inputs = [
        embedding_input(doc.title, passage)
        for doc in docs
        for passage in chunk_text(doc.text, params)
    ]
    words = [len(text.split()) for text in inputs]
    tokens = [len(encoding.ids) for encoding in tokenizer.encode_batch(inputs)]
    row: dict[str, Any] = {
        "setting": name,
        "max_words": params.max_words if params is not WHOLE_DOCUMENT else None,
        "overlap_words": params.overlap_words if params is not WHOLE_DOCUMENT else None,
        "passages": len(inputs),
        "passages_per_doc": len(inputs) / len(docs),
        "words_per_passage_mean": statistics.fmean(words),
        "tokens_per_passage_median": statistics.median(tokens),
        "truncated_share": sum(count > MAX_TOKENS for count in tokens) / len(tokens),
    }
    query_ids = sorted(queries)
    embedded = embedder.embed_queries([queries[q] for q in query_ids])
    scope = Scope.of(
        org_id=TARGET.org_id,
        tenant_id=TARGET.tenant_id,
        kb_ids=[TARGET.kb_id],
        clearance=Classification.RESTRICTED,
    )
    with tempfile.TemporaryDirectory(prefix="kbgate-chunking-") as tmp:
        index = BlockingIndex(EdgeIndex(Path(tmp)))
        writer = DocumentWriter(index, embedder, chunking=params)
        started = time.perf_counter()
        for doc in docs:
            writer.put(
                TARGET, Document(doc.doc_id, doc.text, Classification.PUBLIC, title=doc.title)
            )
        row["ingest_s"] = time.perf_counter() - started
        runs: dict[str, list[ir_measures.ScoredDoc]] = {"dense": [], "keyword": []}
        for query_id, query in zip(query_ids, embedded, strict=True):
            legs = [
                Leg(LegKind.DENSE, dense=query.dense, limit=LEG_LIMIT),
                Leg(LegKind.KEYWORD, sparse=query.sparse, limit=LEG_LIMIT),
            ]
            result = index.query(TARGET.collection, scope, legs)
            for leg_name, hits in zip(("dense", "keyword"), result.legs, strict=True):
                best: dict[str, float] = defaultdict(lambda: float("-inf"))
                for hit in hits:
                    doc_id = hit.payload.document_id
                    best[doc_id] = max(best[doc_id], hit.score)
                runs[leg_name].extend(
                    ir_measures.ScoredDoc(query_id, doc_id, score) for doc_id, score in best.items()
                )
        index.close()
    for leg_name, run in runs.items():
        scores = ir_measures.calc_aggregate(MEASURES, list(qrels), run)
        row[leg_name] = {str(measure): round(float(value), 4) for measure, value in scores.items()}
    per_query = dict.fromkeys(query_ids, 0.0)  # no hit at all scores 0
    for metric in ir_measures.iter_calc([nDCG @ 10], list(qrels), runs["dense"]):
        per_query[metric.query_id] = float(metric.value)
    row["dense_ndcg10_per_query"] = per_query
    return row


def paired_p_value(left: dict[str, float], right: dict[str, float], seed: int) -> float:
    """Two-sided paired randomisation (sign-flip) test on per-query differences."""
    diffs = [left[query] - right[query] for query in sorted(left)]
    observed = abs(sum(diffs))
    rng = random.Random(seed)
    rounds, extreme = 10_000, 0
    for _ in range(rounds):
        flipped = sum(diff if rng.random() < 0.5 else -diff for diff in diffs)
        extreme += abs(flipped) >= observed - 1e-12
    return (extreme + 1) / (rounds + 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--docs", type=int, default=1500, help="subset size (0: whole corpus)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--settings",
        default="80/20,120/30,160/40,220/50,whole",
        help="comma-separated names from: " + ", ".join(name for name, _ in SETTINGS),
    )
    parser.add_argument(
        "--model-dir", type=Path, default=Path(tempfile.gettempdir()) / "kbgate-models"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    queries, qrels = load_queries(args.dataset)
    qrels = [qrel for qrel in qrels if qrel.query_id in queries]
    corpus = load_corpus(args.dataset / "corpus.jsonl", None)
    docs = choose_docs(corpus, qrels, args.docs, args.seed)
    wanted = set(args.settings.split(","))
    unknown = wanted - {name for name, _ in SETTINGS}
    if unknown:
        parser.error(f"unknown settings: {sorted(unknown)}")
    embedder = build_embedder(args.model_dir, None, None, 16)
    tokenizer = Tokenizer.from_file(str(assemble_minilm(args.model_dir) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    print(f"{len(docs)} documents, {len(queries)} queries, {len(qrels)} judgements", flush=True)

    rows = []
    for name, params in SETTINGS:
        if name not in wanted:
            continue
        row = evaluate(
            name,
            params,
            docs=docs,
            queries=queries,
            qrels=qrels,
            embedder=embedder,
            tokenizer=tokenizer,
        )
        rows.append(row)
        print(_line(row), flush=True)
        _write(args, docs, queries, rows)
    print()
    print(_table(rows))
    return 0


def _write(
    args: argparse.Namespace,
    docs: Sequence[CorpusDoc],
    queries: dict[str, str],
    rows: list[dict[str, Any]],
) -> None:
    best = max(rows, key=lambda row: row["dense"]["nDCG@10"])
    for row in rows:
        row["dense_ndcg10_vs_best"] = {
            "best": best["setting"],
            "delta": round(row["dense"]["nDCG@10"] - best["dense"]["nDCG@10"], 4),
            "p_value": None
            if row is best
            else round(
                paired_p_value(
                    row["dense_ndcg10_per_query"], best["dense_ndcg10_per_query"], args.seed
                ),
                4,
            ),
        }
    result = {
        "dataset": str(args.dataset),
        "documents": len(docs),
        "subset": args.docs > 0 and len(docs) < 5183,
        "seed": args.seed,
        "queries": len(queries),
        "leg_limit": LEG_LIMIT,
        "document_score": "best passage score per document",
        "best_dense_ndcg10": best["setting"],
        "rows": rows,
        "peak_rss_mb": peak_rss_mb(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['setting']:>7}: dense nDCG@10 {row['dense']['nDCG@10']:.4f} "
        f"R@100 {row['dense']['R@100']:.4f} | keyword nDCG@10 {row['keyword']['nDCG@10']:.4f} | "
        f"{row['passages']} passages, {row['words_per_passage_mean']:.0f} words, "
        f"{row['truncated_share']:.1%} truncated, ingest {row['ingest_s']:.0f} s"
    )


def _table(rows: list[dict[str, Any]]) -> str:
    header = (
        "| setting | passages | words/passage | truncated | dense nDCG@10 | p vs best | "
        "dense R@100 | dense MRR@10 | keyword nDCG@10 | keyword R@100 |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [
        f"| {r['setting']} | {r['passages']} | {r['words_per_passage_mean']:.0f} | "
        f"{r['truncated_share']:.1%} | {r['dense']['nDCG@10']:.4f} | "
        f"{_p(r['dense_ndcg10_vs_best']['p_value'])} | {r['dense']['R@100']:.4f} | "
        f"{r['dense']['RR@10']:.4f} | {r['keyword']['nDCG@10']:.4f} | {r['keyword']['R@100']:.4f} |"
        for r in rows
    ]
    return "\n".join([header, *lines])


def _p(value: float | None) -> str:
    return "best" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
