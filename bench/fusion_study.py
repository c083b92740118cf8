"""Study fusion, leg depth and floors on cached leg results, over several golden sets.

    uv run python -m bench.fusion_study collect --dataset ../shared/datasets/scifact \\
        --data-dir /tmp/kbgate-eval/scifact --out /tmp/kbgate-eval/legs/scifact.json
    uv run python -m bench.fusion_study replay /tmp/kbgate-eval/legs/*.json

`collect` opens a data dir `kbgate eval` filled (same KB, unchanged documents are not
re-embedded), then runs the real turn's legs (`gateway.retrieval.legs.search_plans`) once
per judged and off-topic question, with no floors and 300 passages per leg, and stores
each leg's ranked hits with the keyword statistics of the question's terms (document
frequencies over the KB's passages and whole documents, read from the stored vectors).
`replay` (`bench.fusion_replay`) then scores fusion methods, normalisations, weights and
floors on those lists in seconds, and writes `bench/results/fusion_study.json`. Final
figures come from `kbgate eval`, never from the replay.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from gateway.retrieval.legs import embed_queries, search_plans
from gateway.retrieval.plan import plan_turn
from gateway.tools.evaluation.run import (
    EVAL_LEG_LIMIT,
    EvalOptions,
    PreparedRun,
    _offtopic_questions,
    prepare,
    ranking_settings,
)
from ingest.index import DENSE_VECTOR, DOCUMENT_SPARSE_VECTOR, SPARSE_VECTOR

OFFTOPIC = Path(__file__).parent / "data" / "offtopic_questions.jsonl"
RESULTS = Path(__file__).parent / "results"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def keyword_statistics(run: PreparedRun) -> dict[str, Any]:
    """Document frequency of every token over the KB's passages (`bm25`) and over whole
    documents (`bm25_document`), read from the stored vectors; and the points of each."""
    from qdrant_edge import ScrollRequest

    index: Any = run.session.index
    collection = "kb_org_eval"
    held = index.engine.existing_shard(collection)
    passages: Counter[int] = Counter()
    documents: Counter[int] = Counter()
    counts = {"points": 0, "bm25": 0, "bm25_document": 0}
    offset = None
    kb = run.session.kb_id
    while True:
        records, offset = held.scroll(
            ScrollRequest(
                offset=offset,
                limit=1000,
                with_payload=["knowledgeBaseId"],
                with_vector=[SPARSE_VECTOR, DOCUMENT_SPARSE_VECTOR],
            )
        )
        for record in records:
            if (record.payload or {}).get("knowledgeBaseId") != kb:
                continue
            counts["points"] += 1
            vectors = record.vector or {}
            for name, table in ((SPARSE_VECTOR, passages), (DOCUMENT_SPARSE_VECTOR, documents)):
                vector = vectors.get(name)
                if vector is None:
                    continue
                counts[name] += 1
                table.update(set(vector.indices))
        if offset is None:
            break
    return {"counts": counts, "passages": passages, "documents": documents}


async def _verify_idf(run: PreparedRun, stats: dict[str, Any], questions: dict[Any, str]) -> None:
    """Recompute a few engine BM25 scores from stored vectors and the statistics, so the
    replay's IDF is the engine's: ln(1 + (N - n + 0.5) / (n + 0.5))."""
    import math

    from qdrant_edge import HasIdCondition, ScrollRequest

    from ingest.engines.edge.engine import _scope_filter

    session = run.session
    index: Any = session.index
    held = index.engine.existing_shard("kb_org_eval")
    for text in list(questions.values())[:3]:
        embedded = await session.retrieval.questions.embed(session.principal.tenant_id, [text])
        sparse = embedded[0].sparse
        for kind, name, table in (
            ("keyword", SPARSE_VECTOR, stats["passages"]),
            ("document_keyword", DOCUMENT_SPARSE_VECTOR, stats["documents"]),
        ):
            from ingest.index import Leg, LegKind

            plan_scope = _eval_scope(run)
            leg = Leg(kind=LegKind(kind), sparse=sparse, limit=3)
            result = index.engine.rank("kb_org_eval", plan_scope, [leg])
            for hit in result.legs[0]:
                records, _ = held.scroll(
                    ScrollRequest(
                        limit=1,
                        filter=_scope_filter(plan_scope, HasIdCondition({hit.point_id})),
                        with_vector=[name],
                    )
                )
                vector = records[0].vector[name]
                values = dict(zip(vector.indices, vector.values, strict=True))
                for label, total in (
                    ("points", stats["counts"]["points"]),
                    ("with vector", stats["counts"][name]),
                ):
                    score = sum(
                        q
                        * values.get(t, 0.0)
                        * math.log(1 + (total - table[t] + 0.5) / (table[t] + 0.5))
                        for t, q in zip(sparse.indices, sparse.values, strict=True)
                    )
                    _stderr(f"verify {kind}: engine {hit.score:.4f}, N={label}: {score:.4f}")


def _save_dense_vectors(run: PreparedRun, path: Path) -> None:
    """Every passage's dense vector and text with its point id and document (for replayed
    dense searches and near-copy similarities)."""
    import numpy as np
    from qdrant_edge import ScrollRequest

    index: Any = run.session.index
    held = index.engine.existing_shard("kb_org_eval")
    beir = run.session.beir_ids
    ids, documents, vectors, texts = [], [], [], []
    offset = None
    while True:
        records, offset = held.scroll(
            ScrollRequest(
                offset=offset,
                limit=1000,
                with_payload=["knowledgeBaseId", "documentId", "passageIndex", "text"],
                with_vector=[DENSE_VECTOR],
            )
        )
        for record in records:
            payload = record.payload or {}
            if payload.get("knowledgeBaseId") != run.session.kb_id:
                continue
            ids.append(str(record.id))
            documents.append(beir.get(payload["documentId"], payload["documentId"]))
            vectors.append(record.vector[DENSE_VECTOR])
            texts.append(payload.get("text", ""))
        if offset is None:
            break
    np.savez(path, ids=np.array(ids), documents=np.array(documents), texts=np.array(texts),
             vectors=np.array(vectors, dtype=np.float32))  # fmt: skip


def _eval_scope(run: PreparedRun) -> Any:
    from ingest.payload import Scope

    principal = run.session.principal
    return Scope.of(
        org_id=principal.org_id,
        tenant_id=principal.tenant_id,
        kb_ids=[run.session.kb_id],
        clearance=principal.clearance,
        strict=True,
    )


async def collect(dataset: Path, data_dir: Path, out: Path, offtopic: Path) -> dict[str, Any]:
    from gateway.admin.knowledge import put_knowledge_base

    async with AsyncExitStack() as stack:
        run = await prepare(
            EvalOptions(dataset=dataset, data_dir=data_dir),
            stack,
            environ=os.environ,
            progress=_stderr,
        )
        session = run.session
        principal, retrieval = session.principal, session.retrieval
        await put_knowledge_base(
            session.knowledge, principal, session.kb_id, name=session.kb_id, storage="org",
            settings=ranking_settings({}, "hybrid"),
        )  # fmt: skip
        stats = keyword_statistics(run)
        _stderr(f"statistics: {stats['counts']}")
        questions = {("q", qid): text for qid, text in run.questions().items()}
        questions.update(
            {("off", qid): text for qid, text in _offtopic_questions(offtopic).items()}
        )
        await _verify_idf(run, stats, questions)
        rows = []
        for number, ((group, qid), text) in enumerate(questions.items(), start=1):
            context = await plan_turn(session.planning, principal, "eval-agent")
            embeddings = await embed_queries(
                retrieval.questions, retrieval.config.embed_timeout_s, principal.tenant_id, [text]
            )
            legs = await search_plans(
                retrieval.search, context.plans, embeddings, leg_limit=EVAL_LEG_LIMIT
            )
            tokens = list(embeddings[0].sparse.indices)
            rows.append(
                {
                    "group": group,
                    "id": qid,
                    "dense": [round(x, 6) for x in embeddings[0].dense],
                    "tokens": tokens,
                    "token_values": list(embeddings[0].sparse.values),
                    "df_passages": [stats["passages"].get(t, 0) for t in tokens],
                    "df_documents": [stats["documents"].get(t, 0) for t in tokens],
                    "legs": [
                        {
                            "kind": str(leg.kind),
                            "hits": [
                                [
                                    hit.point_id,
                                    session.beir_ids.get(hit.ref.document_id, hit.ref.document_id),
                                    hit.ref.passage_index,
                                    round(hit.score, 6),
                                ]
                                for hit in leg.hits
                            ],
                        }
                        for leg in legs
                    ],
                }
            )
            if number % 50 == 0:
                _stderr(f"collect: {number}/{len(questions)}")
        document = {
            "dataset": run.dataset.name,
            "kb_id": session.kb_id,
            "counts": stats["counts"],
            "qrels": {qid: run.dataset.qrels[qid] for qid in run.selection.query_ids},
            "questions": rows,
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        _save_dense_vectors(run, out.with_suffix(".dense.npz"))
    return document


def _variants() -> dict[str, Any]:
    from bench.fusion_replay import Variant

    chosen = Variant("chosen", "max", 1.0, 0.1, 0.3, window=60)
    table = {
        "dense": Variant("dense", "max", 1.0, 0.0, 0.0),
        "keyword": Variant("keyword", "max", 0.0, 0.5, 0.5),
        "rrf k=60, 1:1": Variant("rrf", "rrf", 1.0, 0.5, 0.5),
        "score 1:1 (before)": Variant("before", "max", 1.0, 0.5, 0.5, keyword_window=40),
        "score 1:0.4, document 0.75, 60 distinct (chosen)": chosen,
    }
    for weight in (0.3, 0.5, 0.7, 1.0):
        name = f"score 1:{weight}, document 0.75, 60 distinct"
        table[name] = dataclasses.replace(chosen, keyword=weight / 4, document=weight * 3 / 4)
    table["score 1:0.4, document 0.5, 60 distinct"] = dataclasses.replace(
        chosen, keyword=0.2, document=0.2
    )
    table["score 1:0.4, document 0.75, all distinct"] = dataclasses.replace(chosen, window=0)
    for method in ("rrf", "minmax", "zscore", "dbsf"):
        table[f"{method} 1:0.4, document 0.75"] = dataclasses.replace(
            chosen, normalise=method, window=0, absent_last=method == "zscore"
        )
    return table


def replay(paths: Sequence[Path], out: Path) -> None:
    """Fusion variants and floors over the collected sets; figures to `out`."""
    from bench.fusion_replay import caller_figures, ndcg

    studies = {path.stem: json.loads(path.read_text("utf-8")) for path in paths}
    variants = _variants()
    fusion = {
        name: {set_name: ndcg(study, variant) for set_name, study in studies.items()}
        for name, variant in variants.items()
    }
    chosen = variants["score 1:0.4, document 0.75, 60 distinct (chosen)"]
    floors = {
        f"score_threshold {dense}, keyword_floor {keyword}": {
            set_name: caller_figures(study, chosen, dense, keyword)
            for set_name, study in studies.items()
        }
        for dense in (0.35, 0.40, 0.42, 0.44, 0.45, 0.46, 0.50)
        for keyword in (0.3, 0.4, 0.5, 0.6)
    }
    result = {"sets": list(studies), "fusion nDCG@10": fusion, "floors (chosen fusion)": floors}
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for name, figures in fusion.items():
        _stderr(f"{name:<52} " + "  ".join(f"{value:.4f}" for value in figures.values()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("collect")
    one.add_argument("--dataset", type=Path, required=True)
    one.add_argument("--data-dir", type=Path, required=True)
    one.add_argument("--out", type=Path, required=True)
    one.add_argument("--offtopic", type=Path, default=OFFTOPIC)
    again = sub.add_parser("replay")
    again.add_argument("studies", type=Path, nargs="+")
    again.add_argument("--out", type=Path, default=RESULTS / "fusion_study.json")
    args = parser.parse_args(argv)
    if args.command == "collect":
        document = asyncio.run(collect(args.dataset, args.data_dir, args.out, args.offtopic))
        args.out.write_text(json.dumps(document), encoding="utf-8")
        _stderr(f"wrote {args.out}")
    else:
        replay(args.studies, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
