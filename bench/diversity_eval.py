"""Planted copies: do copies of a relevant document under other ids fill a turn?

    uv run python -m bench.diversity_eval --dataset ../shared/datasets/scifact \\
        --data-dir /tmp/kbgate-eval/planted --limit 60 --seed 0

Builds a golden set from a seeded SciFact subset (the `kbgate eval --limit` selection)
in which every relevant document has three more copies under other ids: the same text
under another title (`copy`), the same words in other case and spacing (`reformatted`),
and an edited version (`edited`: a sentence of front matter added, about one word in
thirty dropped). The judgments stay on the originals. Both that set and the unplanted
subset go through the real ingest path into one data dir; every question then runs
through the real turn (`retrieve`, copies dropped) and through the same turn's ranking
without the copy step (plan, legs, fusion, `top_k`: what a turn returned before), with
the default settings (`top_k` 8, floors in force) and as a 100-document ranking
(floors 0).

Reported per run: the share of returned passages that repeat a document already returned
(a copy of it, or it), and nDCG@10 with a copy scored as its original and a repeat as
not relevant. Writes `bench/results/diversity.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from gateway.tools.evaluation.dataset import BeirDataset, load_beir, select
from gateway.tools.evaluation.metrics import score_run
from gateway.tools.evaluation.run import EvalOptions, PreparedRun, prepare, ranking_settings

RESULTS = Path(__file__).parent / "results"
COPY_KINDS = ("copy", "reformatted", "edited")
FRONT_MATTER = "Reprinted with the permission of the publisher for internal circulation."


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def planted_copy(kind: str, title: str, text: str, rng: random.Random) -> tuple[str, str]:
    """One copy of a document: (title, text)."""
    if kind == "copy":
        return f"{title} (mirror)", text
    if kind == "reformatted":
        words = text.split()
        return title.upper(), "  ".join(w.upper() if i % 7 == 0 else w for i, w in enumerate(words))
    words = [w for w in text.split() if rng.random() >= 1 / 30]
    return f"{title} (revised)", f"{FRONT_MATTER} {' '.join(words)}"


def build_planted(dataset: BeirDataset, folder: Path, *, limit: int, seed: int) -> dict[str, str]:
    """Write the subset with planted copies as a BEIR folder; copy id -> original id."""
    selection = select(dataset, subset="all", limit=limit, seed=seed)
    chosen = set(selection.query_ids)
    relevant = sorted(
        {doc for qid in chosen for doc, grade in dataset.qrels[qid].items() if grade > 0}
        & set(selection.document_ids)
    )
    rng = random.Random(f"planted:{seed}")
    copies: dict[str, str] = {}
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as corpus:
        for doc in selection.document_ids:
            original = dataset.corpus[doc]
            row = {"_id": doc, "title": original.title, "text": original.text}
            corpus.write(json.dumps(row) + "\n")
        for doc in relevant:
            original = dataset.corpus[doc]
            for kind in COPY_KINDS:
                title, text = planted_copy(kind, original.title, original.text, rng)
                copies[f"{doc}-{kind}"] = doc
                corpus.write(json.dumps({"_id": f"{doc}-{kind}", "title": title, "text": text}))
                corpus.write("\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as queries:
        for qid in selection.query_ids:
            queries.write(json.dumps({"_id": qid, "text": dataset.queries[qid]}) + "\n")
    rows = [
        f"{qid}\t{doc}\t{grade}\n"
        for qid in selection.query_ids
        for doc, grade in dataset.qrels[qid].items()
    ]
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(rows))
    return copies


def group_scored(
    rankings: Mapping[str, Sequence[str]], copies: Mapping[str, str]
) -> tuple[dict[str, list[str]], float]:
    """Rankings with each copy read as its original and each repeat of a document already
    listed as a placeholder (not relevant); and the share of places repeats took."""
    scored: dict[str, list[str]] = {}
    repeats = places = 0
    for qid, documents in rankings.items():
        seen: set[str] = set()
        ranking: list[str] = []
        for position, doc in enumerate(documents):
            original = copies.get(doc, doc)
            places += 1
            if original in seen:
                repeats += 1
                ranking.append(f"__repeat_{position}")
            else:
                seen.add(original)
                ranking.append(original)
        scored[qid] = ranking
    return scored, repeats / places if places else 0.0


async def _rankings(run: PreparedRun, settings: dict[str, Any], *, drop_copies: bool) -> Any:
    """Each question's returned documents, in order: the real turn, or its ranking steps
    without the copy step."""
    from gateway.admin.knowledge import put_knowledge_base
    from gateway.retrieval.legs import embed_queries, search_plans
    from gateway.retrieval.plan import plan_turn
    from gateway.retrieval.turn import fused_and_capped, retrieve

    session = run.session
    principal, retrieval = session.principal, session.retrieval
    await put_knowledge_base(session.knowledge, principal, session.kb_id, name=session.kb_id,
                             storage="org", settings=settings)  # fmt: skip
    found: dict[str, list[str]] = {}
    for qid, question in run.questions().items():
        if drop_copies:
            result = await retrieve(retrieval, principal, "eval-agent", question, [])
            documents = [c.hit.payload.document_id for c in result.candidates]
        else:
            context = await plan_turn(session.planning, principal, "eval-agent")
            config = retrieval.config
            embeddings = await embed_queries(
                retrieval.questions, config.embed_timeout_s, principal.tenant_id, [question]
            )
            legs = await search_plans(
                retrieval.search, context.plans, embeddings, leg_limit=config.leg_limit
            )
            _, kept = fused_and_capped(config, context.plans, legs)
            documents = [c.hit.ref.document_id for c in kept]
        found[qid] = [session.beir_ids.get(doc, doc) for doc in dict.fromkeys(documents)]
    return found


async def measure(folder: Path, data_dir: Path, copies: Mapping[str, str]) -> dict[str, Any]:
    """Both ways of returning passages, at the default settings and as a deep ranking."""
    figures: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        run = await prepare(EvalOptions(dataset=folder, data_dir=data_dir), stack,
                            environ=os.environ, progress=_stderr)  # fmt: skip
        for label, settings in (("default", {}), ("ranking", ranking_settings({}, "hybrid"))):
            for drop in (False, True):
                rankings = await _rankings(run, settings, drop_copies=drop)
                scored, repeats = group_scored(rankings, copies)
                figures[f"{label}/{'copies dropped' if drop else 'before'}"] = {
                    "nDCG@10": score_run(scored, run.dataset.qrels)["nDCG@10"],
                    "repeated places": round(repeats, 4),
                    "passages per turn": round(sum(map(len, rankings.values())) / len(rankings), 2),
                }
                _stderr(f"{label} {'dropped' if drop else 'before'}: {figures}")
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "diversity.json")
    args = parser.parse_args(argv)
    dataset = load_beir(args.dataset)
    planted_folder = args.data_dir / "planted"
    copies = build_planted(dataset, planted_folder, limit=args.limit, seed=args.seed)
    plain_folder = args.data_dir / "plain"
    build_planted(
        BeirDataset(dataset.name, dataset.corpus, dataset.queries, dataset.qrels, ""),
        plain_folder, limit=args.limit, seed=args.seed,
    )  # fmt: skip
    _strip_copies(plain_folder)
    result = {
        "dataset": str(args.dataset),
        "limit": args.limit,
        "seed": args.seed,
        "copies": len(copies),
        "planted": asyncio.run(measure(planted_folder, args.data_dir / "store", copies)),
        "plain": asyncio.run(measure(plain_folder, args.data_dir / "store", {})),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


def _strip_copies(folder: Path) -> None:
    """The subset without its planted copies."""
    corpus = folder / "corpus.jsonl"
    suffixes = tuple(f"-{kind}" for kind in COPY_KINDS)
    rows = [
        row
        for row in corpus.read_text("utf-8").splitlines()
        if not json.loads(row)["_id"].endswith(suffixes)
    ]
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
