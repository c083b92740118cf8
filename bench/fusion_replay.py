"""Replay fusion and floors over the leg lists `bench.fusion_study collect` stored.

Each variant turns a question's legs into a ranking of documents the way
`gateway.retrieval.fusion` does (a document counts once per leg, at its best passage; a
whole-document keyword leg ranks documents), with a choice of per-leg normalisation,
weights and leg depth; floors are applied as a turn applies them
(`gateway.retrieval.legs.answers`). Scored with the same ir-measures code as
`kbgate eval`. Passages of one document are grouped at document level here, so on a set
of multi-passage documents (SciFact) the replay is within about 0.002 of the real turn.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.tools.evaluation.metrics import score_run
from ingest.keyword_scale import BM25_K1

Leg = dict[str, Any]
Study = Mapping[str, Any]
#: (document id, its best passage's raw score), best first
DocScores = list[tuple[str, float]]


@dataclass(frozen=True, slots=True)
class Variant:
    """One way to fuse: how each leg's scores become comparable, and how much each counts."""

    name: str
    #: max (score / the leg's best) | minmax | zscore | dbsf (mean +- 3 sd, as Qdrant) | rrf
    normalise: str
    dense: float = 1.0
    keyword: float = 0.5
    document: float = 0.5
    depth: int = 300
    rrf_k: int = 60
    #: under `max`: hits past this many count as the last of them (0: all distinct)
    window: int = 0
    #: under `max`: the same, for keyword legs only
    keyword_window: int = 0
    #: under `max`, `zscore`: a document the leg missed counts as its last hit (else 0)
    absent_last: bool = True


def idf(total: int, frequency: int) -> float:
    """BM25 IDF as the engine computes it over a Scope of `total` points."""
    return math.log(1 + (total - frequency + 0.5) / (frequency + 0.5))


def attainable(row: Mapping[str, Any], counts: Mapping[str, int], kind: str) -> float:
    """The question's highest possible BM25 score on a keyword leg (`ingest.keyword_scale`)."""
    if kind == "keyword":
        total, frequencies = counts["bm25"], row["df_passages"]
    else:
        total, frequencies = counts["bm25_document"], row["df_documents"]
    return sum(
        (BM25_K1 + 1) * float(value) * idf(int(total), int(n))
        for value, n in zip(row["token_values"], frequencies, strict=True)
    )


def leg_documents(leg: Leg, depth: int) -> DocScores:
    """Documents of a leg's first `depth` hits, each at its best passage, best first."""
    seen: dict[str, float] = {}
    for _pid, doc, _index, score in leg["hits"][:depth]:
        seen.setdefault(doc, score)
    return list(seen.items())


def _normalised(docs: DocScores, variant: Variant, kind: str) -> tuple[dict[str, float], float]:
    """Each document's normalised score on the leg, and what a missed document counts."""
    method = variant.normalise
    if method == "rrf":
        return {doc: 1.0 / (variant.rrf_k + rank) for rank, (doc, _) in enumerate(docs, 1)}, 0.0
    scores = [score for _, score in docs]
    top, low = max(scores), min(scores)
    if method == "max":
        window = variant.window or (variant.keyword_window if kind != "dense" else 0)
        least = max(scores[window - 1], 0.0) if window and len(scores) > window else 0.0
        if top <= 0:
            return {}, 0.0
        values = {doc: max(score, least) / top for doc, score in docs}
        return values, max(low, least) / top if variant.absent_last else 0.0
    if method == "minmax":
        span = top - low or 1.0
        return {doc: (score - low) / span for doc, score in docs}, 0.0
    mean, spread = statistics.fmean(scores), statistics.pstdev(scores) or 1.0
    if method == "zscore":
        values = {doc: (score - mean) / spread for doc, score in docs}
        return values, (low - mean) / spread if variant.absent_last else min(values.values())
    if method == "dbsf":
        lo, hi = mean - 3 * spread, mean + 3 * spread
        return {doc: min(max((score - lo) / (hi - lo), 0.0), 1.0) for doc, score in docs}, 0.0
    raise ValueError(method)


def fused_ranking(row: Mapping[str, Any], variant: Variant, *, limit: int = 100) -> list[str]:
    """The question's documents best first under `variant`."""
    weights = {"dense": variant.dense, "keyword": variant.keyword,
               "document_keyword": variant.document}  # fmt: skip
    totals: dict[str, float] = {}
    missed: list[tuple[float, set[str]]] = []
    for leg in row["legs"]:
        weight = weights[leg["kind"]]
        docs = leg_documents(leg, variant.depth)
        if weight <= 0 or not docs:
            continue
        values, absent = _normalised(docs, variant, leg["kind"])
        if leg["kind"] != "dense" and len(leg["hits"]) < variant.depth:
            absent = 0.0  # an exhaustive keyword leg (`RankedLeg.exhaustive`)
        for doc, value in values.items():
            totals[doc] = totals.get(doc, 0.0) + weight * value
        missed.append((weight * absent, set(values)))
    for value, present in missed:
        for doc in totals:
            if value and doc not in present:
                totals[doc] += value
    return [doc for doc, _ in sorted(totals.items(), key=lambda item: -item[1])[:limit]]


def _judged(study: Study) -> list[Mapping[str, Any]]:
    return [row for row in study["questions"] if row["group"] == "q"]


def ndcg(study: Study, variant: Variant) -> float:
    """nDCG@10 of `variant` over the study's judged questions (100-document rankings)."""
    run = {row["id"]: fused_ranking(row, variant) for row in _judged(study)}
    return score_run(run, study["qrels"])["nDCG@10"]


def per_question_ndcg(study: Study, variant: Variant) -> dict[str, float]:
    """nDCG@10 of each judged question (for paired comparisons)."""
    return {
        row["id"]: score_run({row["id"]: fused_ranking(row, variant)}, study["qrels"])["nDCG@10"]
        for row in _judged(study)
    }


def paired_bootstrap(
    a: Mapping[str, float], b: Mapping[str, float], *, rounds: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of b - a over shared questions, with a 95% bootstrap interval."""
    deltas = [b[key] - a[key] for key in sorted(set(a) & set(b))]
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(deltas, k=len(deltas))) for _ in range(rounds))
    return statistics.fmean(deltas), means[int(0.025 * rounds)], means[int(0.975 * rounds)]


def floored(
    row: Mapping[str, Any], counts: Mapping[str, int], dense: float, keyword: float
) -> dict[str, Any]:
    """The question's legs as a turn keeps them with these floors: dense hits below the
    cosine `dense` dropped; keyword hits kept when a dense hit is, else only when the best
    keyword hit reaches `keyword` of its leg's attainable score (the share alone: the
    turn's words test and joint line, `gateway.retrieval.answering`, need the hits' terms
    and the probes, which the collected legs do not hold)."""
    dense_kept = [
        {"kind": "dense", "hits": [hit for hit in leg["hits"] if hit[3] >= dense]}
        for leg in row["legs"]
        if leg["kind"] == "dense"
    ]
    keyword_legs = [leg for leg in row["legs"] if leg["kind"] != "dense"]
    count = (
        keyword <= 0
        or any(leg["hits"] for leg in dense_kept)
        or any(
            leg["hits"] and leg["hits"][0][3] >= keyword * attainable(row, counts, leg["kind"])
            for leg in keyword_legs
        )
    )
    kept = [leg if count else {"kind": leg["kind"], "hits": []} for leg in keyword_legs]
    return {**row, "legs": dense_kept + kept}


def caller_figures(
    study: Study, variant: Variant, dense: float, keyword: float, *, top_k: int = 8
) -> dict[str, float]:
    """What a caller gets with these floors: nDCG@10 of the `top_k` documents a default
    turn returns (legs of 5 x top_k), and the shares of questions that abstain."""
    shallow = dataclasses.replace(variant, depth=max(20, 5 * top_k))
    run: dict[str, list[str]] = {}
    abstained = {"q": 0, "off": 0}
    totals = {"q": 0, "off": 0}
    for row in study["questions"]:
        found = fused_ranking(floored(row, study["counts"], dense, keyword), shallow, limit=top_k)
        totals[row["group"]] += 1
        abstained[row["group"]] += not found
        if row["group"] == "q":
            run[row["id"]] = found
    return {
        "nDCG@10": score_run(run, study["qrels"])["nDCG@10"],
        "answerable": round(abstained["q"] / totals["q"], 4),
        "offtopic": round(abstained["off"] / max(totals["off"], 1), 4),
    }
