"""Main's retrieval against this branch's on BEIR sets, in an offline replica of the turn.

`kbgate eval` ingests every set through the gateway (PII analysis, the engine, the
writer): on this machine the two Debian sets take over an hour each, SciFact as long.
This replica measures the same figures in minutes once the passages' dense vectors are
cached (a SQLite file keyed by the text the model reads, `--cache`): passages chunked as
each variant chunks them, BM25 vectors from fastembed's `Bm25` (the token ids the
embedder writes) with the engine's IDF over every point, legs searched exactly (brute
force), fusion, copies and floors by the gateway's own functions
(`gateway.retrieval.fusion.fuse`, `gateway.retrieval.diversity.without_copies`,
`gateway.retrieval.off_topic_line.lines_from_best`), the answering rules re-stated on
arrays. On main's variant it reproduces `kbgate eval`'s figures on the five sets
(docs/benchmarks.md gives both).

Variants: `main` (prose windows, plain BM25, questions' words at weight 1, no exhaustive
legs, main's answering rules) and `branch` (passages along the document's structure, the
technical keyword analysis, question weights, exhaustive keyword legs, the unknown-words
rule, fusion by the KB's reach); with `--ablate`, the branch with each of its changes
switched off in turn.

    uv run python -m bench.technical_replica --dataset ../shared/datasets/debian-changelogs \
        --cache /tmp/kbgate-tech/dense.sqlite --model-dir /tmp/kbgate-tech/models --ablate \
        --out bench/results/technical_replica.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sqlite3
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gateway.retrieval.answering import JOINT_KEYWORD_WEIGHT, WORDS_HELD
from gateway.retrieval.diversity import without_copies
from gateway.retrieval.fusion import RankedLeg, fuse
from gateway.retrieval.kb_plan import IDENTIFIER_SHARE, LOW_REACH
from gateway.retrieval.off_topic_line import _nearest_counted, lines_from_best, load_probes
from gateway.retrieval.plan import LOW_REACH_DOCUMENT_SHARE, LOW_REACH_KEYWORD_WEIGHT
from gateway.tools.evaluation.metrics import score_run
from ingest.chunking import chunk_document, chunk_text
from ingest.index import LegKind
from ingest.keyword_scale import BM25_K1
from ingest.keyword_terms import identifier_share, question_weights, term_weights
from ingest.payload import PassageRef
from settings.config import FusionMethod

Vector = npt.NDArray[np.float32]
OFFTOPIC = Path(__file__).parent / "data" / "offtopic_questions.jsonl"
#: a ranking run's depth and legs (`kbgate eval`), a default turn's (top_k 8)
RANKING_DEPTH, RANKING_LEG, TURN_TOP_K, TURN_LEG = 100, 300, 8, 40
PLATFORM_LINE, KEYWORD_FLOOR = 0.44, 0.3
UNKNOWN_WORDS_MARGIN, UNKNOWN_WORDS_SHARE = 0.1, 0.25


def log(*parts: object) -> None:
    print(*parts, file=sys.stderr, flush=True)


class DenseCache:
    """Dense passage vectors by the text the model reads (whitespace-normalised)."""

    def __init__(self, path: Path, model_dir: Path) -> None:
        self.db = sqlite3.connect(path)
        self.db.execute("create table if not exists v (k text primary key, b blob)")
        self.model_dir = model_dir
        self._embedder: Any = None

    def embedder(self) -> Any:
        if self._embedder is None:
            from ingest.embedder.embedding import build_embedder

            self._embedder = build_embedder(self.model_dir, None, None, workers=2)
        return self._embedder

    def get(self, texts: Sequence[str]) -> Vector:
        keys = [hashlib.sha1(" ".join(t.split()).encode()).hexdigest() for t in texts]  # noqa: S324 — a cache key
        found: dict[str, Vector] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(f"select k, b from v where k in ({marks})", chunk)  # noqa: S608 — placeholders only
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.float32)
        todo = list({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        if todo:
            log(f"embedding {len(todo)} passages")
        for start in range(0, len(todo), 64):
            batch = todo[start : start + 64]
            vectors = self.embedder().embed_documents([text for _, text in batch])
            rows_in = []
            for (key, _), vector in zip(batch, vectors, strict=True):
                found[key] = np.asarray(vector.dense, dtype=np.float32)
                rows_in.append((key, found[key].tobytes()))
            self.db.executemany("insert or replace into v values (?, ?)", rows_in)
            self.db.commit()
        return np.stack([found[key] for key in keys])

    def query(self, texts: Sequence[str]) -> Vector:
        return np.asarray(self.embedder().query_dense(list(texts)), dtype=np.float32)


@dataclass
class Sparse:
    """Postings (term -> point numbers, weights) over `n` points; IDF as the engine's."""

    postings: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]
    n: int
    terms: list[set[int]]

    @classmethod
    def build(cls, vectors: Sequence[tuple[Sequence[int], Sequence[float]]]) -> Sparse:
        points: dict[int, list[int]] = defaultdict(list)
        weights: dict[int, list[float]] = defaultdict(list)
        for number, (indices, values) in enumerate(vectors):
            for term, value in zip(indices, values, strict=True):
                points[term].append(number)
                weights[term].append(value)
        postings = {
            term: (np.array(points[term], dtype=np.int64), np.array(weights[term], np.float32))
            for term in points
        }
        return cls(postings, len(vectors), [set(indices) for indices, _ in vectors])

    def idf(self, term: int) -> float:
        held = len(self.postings[term][0]) if term in self.postings else 0
        return math.log(1 + (self.n - held + 0.5) / (held + 0.5))

    def search(
        self, terms: Sequence[int], limit: int, weights: Mapping[int, float]
    ) -> list[tuple[int, float]]:
        scores = np.zeros(self.n, dtype=np.float64)
        touched = []
        for term in terms:
            if term in self.postings:
                ids, values = self.postings[term]
                scores[ids] += weights.get(term, 1.0) * self.idf(term) * values
                touched.append(ids)
        if not touched:
            return []
        ids = np.unique(np.concatenate(touched))
        order = np.argsort(-scores[ids], kind="stable")[:limit]
        return [(int(ids[i]), float(scores[ids[i]])) for i in order]


@dataclass
class Store:
    docs: list[str]
    texts: list[str]
    dense: Vector
    sparse: Sparse
    doc_sparse: Sparse
    doc_first: list[int]
    refs: list[PassageRef]


@dataclass
class Query:
    text: str
    dense: Vector
    terms: list[int]
    #: the terms the keyword analysis added (weight below 1); absent: the question's own
    weights: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Hit:
    point_id: str
    score: float
    ref: PassageRef


@dataclass
class Legs:
    dense: list[tuple[int, float]]
    keyword: list[tuple[int, float]]
    document: list[tuple[int, float]]
    depth: int


@dataclass(frozen=True)
class Variant:
    """What a variant does: chunking, keyword analysis, question weights, fusion, rules."""

    structure: bool = True
    keywords: bool = True
    question_weights: bool = True
    exhaustive: bool = True
    unknown_words: bool = True
    reach: bool = True


MAIN = Variant(False, False, False, False, False, False)
BRANCH = Variant()
ABLATIONS = {
    "no structure": replace(BRANCH, structure=False),
    "no keyword analysis": replace(BRANCH, keywords=False, question_weights=False),
    "question words all at 1": replace(BRANCH, question_weights=False),
    "no exhaustive legs": replace(BRANCH, exhaustive=False),
    "no unknown-words rule": replace(BRANCH, unknown_words=False),
    "no reach fusion": replace(BRANCH, reach=False),
}


@dataclass(frozen=True)
class Fusion:
    dense: float = 1.0
    keyword: float = 0.4
    document_share: float = 0.75
    method: FusionMethod = FusionMethod.SCORE
    exhaustive: bool = False


def load_set(folder: Path, limit: int | None = None, seed: int = 0) -> dict[str, Any]:
    """A BEIR folder, or the `kbgate eval --limit N --seed S` subset of it."""
    corpus = {}
    for line in (folder / "corpus.jsonl").open():
        row = json.loads(line)
        corpus[row["_id"]] = (row.get("title", ""), row.get("text", ""))
    texts = {row["_id"]: row["text"] for row in map(json.loads, (folder / "queries.jsonl").open())}
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for number, line in enumerate((folder / "qrels.tsv").open()):
        if number:
            query, doc, grade = line.rstrip("\n").split("\t")
            qrels[query][doc] = int(grade)
    own = folder / "offtopic.jsonl"
    offtopic_file = own if own.exists() else OFFTOPIC
    offtopic = {
        str(n): json.loads(line)["text"]
        for n, line in enumerate(offtopic_file.open())
        if line.strip()
    }
    queries = {q: t for q, t in texts.items() if q in qrels}
    if limit is not None:
        from gateway.tools.evaluation.dataset import load_beir, select

        chosen = select(load_beir(folder), subset="all", limit=limit, seed=seed)
        queries = {q: queries[q] for q in chosen.query_ids}
        corpus = {d: corpus[d] for d in chosen.document_ids}
        qrels = defaultdict(dict, {q: qrels[q] for q in queries})
    return {"corpus": corpus, "queries": queries, "qrels": dict(qrels), "offtopic": offtopic}


def _bm25(avg_len: float) -> Any:
    from ingest.embedder.embedding import _load_bm25

    return _load_bm25(k=1.2, b=0.75, avg_len=avg_len).model


def _sparse(model: Any, texts: Sequence[str], keywords: bool) -> Sparse:
    from fastembed.common.utils import remove_non_alphanumeric

    vectors: list[tuple[Sequence[int], Sequence[float]]] = []
    for text in texts:
        if keywords:
            vector = term_weights(model, text)
            vectors.append((vector.indices, vector.values))
            continue
        words = model._stem(model.tokenizer.tokenize(remove_non_alphanumeric(text)))
        counts: dict[str, int] = defaultdict(int)
        for word in words:
            counts[word] += 1
        length = model.k * (1 - model.b + model.b * len(words) / model.avg_len)
        pairs = {
            model.compute_token_id(w): c * (model.k + 1) / (c + length) for w, c in counts.items()
        }
        vectors.append((list(pairs), list(pairs.values())))
    return Sparse.build(vectors)


def build_store(data: Mapping[str, Any], variant: Variant, cache: DenseCache) -> Store:
    from ingest.embedder.embedding import BM25_AVG_LEN, BM25_DOCUMENT_AVG_LEN

    chunk: Callable[[str], list[str]] = chunk_document if variant.structure else chunk_text
    docs: list[str] = []
    inputs: list[str] = []
    texts: list[str] = []
    whole: list[str] = []
    doc_first: list[int] = []
    refs: list[PassageRef] = []
    for doc_id, (title, text) in data["corpus"].items():
        body = text if text.strip() else title
        doc_first.append(len(texts))
        whole.append(f"{title}\n{body}" if title else body)
        for index, passage in enumerate(chunk(body) or [body]):
            docs.append(doc_id)
            texts.append(passage)
            inputs.append(f"{title}\n{passage}" if title else passage)
            refs.append(
                PassageRef(
                    knowledge_base_id="kb",
                    document_id=doc_id,
                    document_version="v",
                    passage_index=index,
                    indexed_at="t",
                )
            )
    return Store(
        docs,
        texts,
        cache.get(inputs),
        _sparse(_bm25(BM25_AVG_LEN), inputs, variant.keywords),
        _sparse(_bm25(BM25_DOCUMENT_AVG_LEN), whole, variant.keywords),
        doc_first,
        refs,
    )


def make_queries(texts: Mapping[str, str], variant: Variant, cache: DenseCache) -> dict[str, Query]:
    model = _bm25(BM25_AVG_LEN_QUESTIONS)
    keys = list(texts)
    dense = cache.query([texts[key] for key in keys])
    out = {}
    for key, vector in zip(keys, dense, strict=True):
        sparse = question_weights(model, texts[key])
        pairs = list(zip(sparse.indices, sparse.values, strict=True))
        if not variant.question_weights:
            pairs = [(term, 1.0) for term, weight in pairs if weight == 1.0 or variant.keywords]
        out[key] = Query(
            texts[key],
            vector,
            [term for term, _ in pairs],
            {term: weight for term, weight in pairs if weight != 1.0},
        )
    return out


BM25_AVG_LEN_QUESTIONS = 80.0


def search(store: Store, query: Query, depth: int, dense_floor: float = 0.0) -> Legs:
    cosines = store.dense @ query.dense
    order = np.argsort(-cosines)[:depth]
    dense = [(int(i), float(cosines[i])) for i in order if cosines[i] >= dense_floor]
    return Legs(
        dense,
        store.sparse.search(query.terms, depth, query.weights),
        store.doc_sparse.search(query.terms, depth, query.weights),
        depth,
    )


def ranking(store: Store, legs: Legs, fusion: Fusion, limit: int) -> list[str]:
    def hit(number: int, score: float) -> Hit:
        return Hit(str(number), score, store.refs[number])

    ranked: list[RankedLeg[Hit]] = []
    if fusion.dense > 0 and legs.dense:
        ranked.append(RankedLeg("kb", LegKind.DENSE, fusion.dense, [hit(*h) for h in legs.dense]))
    share = fusion.document_share
    if fusion.keyword > 0 and legs.keyword:
        exhaustive = fusion.exhaustive and len(legs.keyword) < legs.depth
        weight = fusion.keyword * (1 - share)
        hits = [hit(*h) for h in legs.keyword]
        ranked.append(RankedLeg("kb", LegKind.KEYWORD, weight, hits, exhaustive=exhaustive))
    if fusion.keyword > 0 and legs.document and share > 0:
        exhaustive = fusion.exhaustive and len(legs.document) < legs.depth
        hits = [hit(store.doc_first[d], s) for d, s in legs.document]
        ranked.append(
            RankedLeg(
                "kb", LegKind.DOCUMENT_KEYWORD, fusion.keyword * share, hits, exhaustive=exhaustive
            )
        )
    candidates = fuse(ranked, method=fusion.method)[: 3 * limit]
    kept, _ = without_copies(candidates, lambda c: store.texts[int(c.point_id)])
    return list(dict.fromkeys(store.docs[int(c.point_id)] for c in kept))[:limit]


def _share(sparse: Sparse, query: Query, score: float) -> float:
    top = (BM25_K1 + 1) * sum(query.weights.get(t, 1.0) * sparse.idf(t) for t in query.terms)
    return score / top if top > 0 else 0.0


def _held(sparse: Sparse, query: Query, held: set[int]) -> float:
    own = [t for t in query.terms if t not in query.weights]
    idf = [sparse.idf(t) for t in own]
    total = sum(idf)
    return sum(w for t, w in zip(own, idf, strict=True) if t in held) / total if total else 0.0


def _unknown(store: Store, query: Query) -> float:
    unheld = store.sparse.idf(-1)
    idf = [store.sparse.idf(t) for t in query.terms if t not in query.weights]
    total = sum(idf)
    return sum(w for w in idf if w >= unheld) / total if total else 0.0


def answers(
    store: Store,
    query: Query,
    legs: Legs,
    lines: tuple[float, float],
    variant: Variant,
    *,
    low_reach: bool,
) -> bool:
    """`gateway.retrieval.answering.answers` on the replica's legs (measured lines)."""
    line, joint = lines
    cosine = max((s for _, s in legs.dense), default=0.0)
    use_joint = True
    if legs.dense and cosine >= line:
        rule = variant.unknown_words and low_reach
        if not rule or cosine >= line + UNKNOWN_WORDS_MARGIN:
            return True
        if _unknown(store, query) < UNKNOWN_WORDS_SHARE:
            return True
        use_joint = False
    bests = []
    if legs.keyword:
        number, score = legs.keyword[0]
        bests.append((_share(store.sparse, query, score), store.sparse, store.sparse.terms[number]))
    if legs.document:
        number, score = legs.document[0]
        doc = store.doc_sparse
        bests.append((_share(doc, query, score), doc, doc.terms[number]))
    if not bests:
        return False
    best = max(share for share, _, _ in bests)
    if use_joint and cosine + JOINT_KEYWORD_WEIGHT * best >= joint:
        return True
    return any(
        share >= KEYWORD_FLOOR and _held(sparse, query, held) >= WORDS_HELD
        for share, sparse, held in bests
    )


def measure(data: Mapping[str, Any], variant: Variant, cache: DenseCache) -> dict[str, Any]:
    """One variant's channels, default turn and abstention on one set."""
    store = build_store(data, variant, cache)
    questions = make_queries(data["queries"], variant, cache)
    offtopic = make_queries(data["offtopic"], variant, cache)
    probes = load_probes()
    probe_queries = make_queries({str(n): p.text for n, p in enumerate(probes)}, variant, cache)
    best = []
    for number, probe in enumerate(probes):
        legs = search(store, probe_queries[str(number)], 1)
        cosine = legs.dense[0][1] if legs.dense else 0.0
        shares = [_share(store.sparse, probe_queries[str(number)], s) for _, s in legs.keyword]
        shares += [
            _share(store.doc_sparse, probe_queries[str(number)], s) for _, s in legs.document
        ]
        best.append((probe.topic, cosine, max(shares, default=0.0)))
    measured = lines_from_best(best)
    lines = (measured.dense, measured.joint)
    reach = _nearest_counted((topic, cosine) for topic, cosine, _ in best)
    sample = sorted(store.texts, key=lambda text: hashlib.sha256(text.encode()).digest())
    identifiers = identifier_share(sample[:200])
    low_reach = reach < LOW_REACH and identifiers >= IDENTIFIER_SHARE
    fusion = Fusion(exhaustive=variant.exhaustive)
    if variant.reach and low_reach:
        fusion = replace(
            fusion, keyword=LOW_REACH_KEYWORD_WEIGHT, document_share=LOW_REACH_DOCUMENT_SHARE
        )
    channels = {
        "dense": Fusion(1, 0),
        "keyword": Fusion(0, 1, exhaustive=variant.exhaustive),
        "rrf": Fusion(1, 1, method=FusionMethod.RRF, exhaustive=variant.exhaustive),
        "hybrid": fusion,
    }
    found = {key: search(store, q, RANKING_LEG) for key, q in questions.items()}
    out: dict[str, Any] = {
        "passages": len(store.texts),
        "reach": round(reach, 4),
        "identifiers": round(identifiers, 4),
    }
    for name, channel in channels.items():
        run = {key: ranking(store, found[key], channel, RANKING_DEPTH) for key in questions}
        out[name] = round(score_run(run, data["qrels"])["nDCG@10"], 4)
    cut = min(lines[0], PLATFORM_LINE)

    def turn(query: Query) -> list[str] | None:
        legs = search(store, query, TURN_LEG, dense_floor=cut)
        if not answers(store, query, legs, lines, variant, low_reach=low_reach):
            return None
        return ranking(store, legs, fusion, TURN_TOP_K)

    turns = {key: turn(q) for key, q in questions.items()}
    out["default"] = round(
        score_run({k: v or [] for k, v in turns.items()}, data["qrels"])["nDCG@10"], 4
    )
    out["answerable_abstain"] = round(sum(v is None for v in turns.values()) / len(turns), 4)
    out["offtopic_abstain"] = round(
        sum(turn(q) is None for q in offtopic.values()) / len(offtopic), 4
    )
    out["lines"] = [round(lines[0], 4), round(lines[1], 4)]
    out["fusion"] = [fusion.dense, fusion.keyword, fusion.document_share]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, action="append", required=True)
    parser.add_argument("--cache", type=Path, required=True, help="the dense vectors' SQLite")
    parser.add_argument("--model-dir", type=Path, required=True, help="the models' folder")
    parser.add_argument("--ablate", action="store_true", help="also each change switched off")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--limit", type=int, help="the `kbgate eval --limit` subset")
    parser.add_argument("--seed", type=int, default=0, help="its seed")
    args = parser.parse_args()
    cache = DenseCache(args.cache, args.model_dir)
    variants = {"main": MAIN, "branch": BRANCH, **(ABLATIONS if args.ablate else {})}
    results: dict[str, Any] = (
        json.loads(args.out.read_text()) if args.out and args.out.exists() else {}
    )
    for folder in args.dataset:
        data = load_set(folder, args.limit, args.seed)
        for name, variant in variants.items():
            figures = measure(data, variant, cache)
            results.setdefault(folder.name, {})[name] = figures
            print(folder.name, name, json.dumps(figures), flush=True)
            if args.out:
                args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
