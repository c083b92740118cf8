"""Calibrate the grounding floor on the golden set.

Uses the SciFact store that `bench.turn_latency` builds (same data dir), and scores
three kinds of answers through the real post-check (`gateway.retrieval.postcheck`):

(a) supported: two consecutive sentences restating a passage of a stored abstract;
(b) other domain: answers about cooking, sport, travel, software, history;
(c) mixed: one supported sentence followed by one fabricated other-domain sentence.

Reports the score distribution and the flag rate of each kind at the default floor
(0.7), the floor that best separates (a) from (b)+(c) (Youden's J), sentence-mode flag
rates for (c), and the median latency of a check. Writes
`bench/results/grounding_calibration.json` and a PNG histogram.

    uv run python -m bench.grounding_calibration --data-dir /tmp/kbgate-bench [--answers 150]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from bench.turn_latency import AGENT, DATASET, KB, _prepare, _principal, _read_jsonl
from gateway.admin import knowledge
from gateway.retrieval.postcheck import grounding_check
from gateway.runtime.services import Services, build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.chunking import split_sentences
from settings.config import load_config

RESULTS = Path(__file__).parent / "results"
OTHER_DOMAIN = [
    "Preheat the oven to 200 degrees and roast the vegetables for forty minutes.",
    "The home team won the derby after a late penalty in extra time.",
    "Trains from Vienna to Budapest leave every two hours from the main station.",
    "Use a virtual environment so the project's dependencies do not clash.",
    "The Treaty of Westphalia ended the Thirty Years' War in 1648.",
    "Knead the dough for ten minutes until it is smooth and elastic.",
    "The marathon route passes the old harbour before climbing to the castle.",
    "Book the museum tickets online to skip the queue at the entrance.",
    "A linked list gives constant-time insertion at the head of the list.",
    "The Roman aqueduct carried water over forty kilometres to the city.",
    "Season the risotto with parmesan and a knob of butter before serving.",
    "The goalkeeper saved two penalties in the shoot-out to win the cup.",
    "The ferry to the island takes ninety minutes in calm weather.",
    "Rebase the feature branch onto main before opening the pull request.",
    "The printing press spread across Europe within fifty years of its invention.",
    "Whisk the egg whites until they form stiff peaks.",
    "The cyclist attacked on the final climb and won the stage alone.",
    "Hotels near the old town fill up quickly during the summer festival.",
    "The garbage collector pauses are shorter with the generational mode enabled.",
    "The Hanseatic League controlled trade in the Baltic for centuries.",
]


def _answers(corpus: list[dict[str, Any]], count: int, seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    restated: list[str] = []
    for doc in rng.sample(corpus, min(len(corpus), count * 3)):
        sentences = split_sentences(doc["text"])
        if len(sentences) >= 3:
            start = rng.randrange(1, len(sentences) - 1)
            restated.append(" ".join(sentences[start : start + 2]))
        if len(restated) == count:
            break
    other = [rng.choice(OTHER_DOMAIN) + " " + rng.choice(OTHER_DOMAIN) for _ in range(count)]
    mixed = [split_sentences(answer)[0] + " " + rng.choice(OTHER_DOMAIN) for answer in restated]
    return {"supported": restated, "other_domain": other, "mixed": mixed}


async def _score(
    services: Services, answers: list[str], *, by_sentence: bool
) -> list[dict[str, Any]]:
    results = []
    for answer in answers:
        started = time.perf_counter()
        grounding = await grounding_check(
            services.grounding, _principal(), AGENT, answer, by_sentence=by_sentence
        )
        results.append(
            {
                "status": grounding.status.value,
                "score": grounding.score,
                "ms": (time.perf_counter() - started) * 1000,
            }
        )
    return results


def _best_floor(positives: list[float], negatives: list[float]) -> tuple[float, float]:
    """The floor maximising TPR - FPR (Youden's J) over a 0.01 grid."""
    best = (0.0, -1.0)
    for step in range(30, 96):
        floor = step / 100
        tpr = sum(s >= floor for s in positives) / len(positives)
        fpr = sum(s >= floor for s in negatives) / len(negatives)
        if tpr - fpr > best[1]:
            best = (floor, tpr - fpr)
    return best


def _describe(scores: list[float]) -> dict[str, float]:
    ordered = sorted(scores)
    return {
        "min": round(ordered[0], 3),
        "p10": round(ordered[len(ordered) // 10], 3),
        "median": round(statistics.median(ordered), 3),
        "p90": round(ordered[(9 * len(ordered)) // 10], 3),
        "max": round(ordered[-1], 3),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--limit-docs", type=int, default=None)
    parser.add_argument("--answers", type=int, default=150)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    env = {"KBGATE_PLATFORM_KEY": "bench-platform-key-turn-latency"}
    config = load_config(env, data_dir=args.data_dir, model_cache_dir=args.data_dir / "models")
    services = await build_services(config, Telemetry(build_logger("WARNING")))
    try:
        await _prepare(services, args.data_dir, args.limit_docs)
        stored = set(
            await knowledge.list_documents(services.store, services.index, _principal(), KB)
        )
        corpus = [d for d in _read_jsonl(DATASET / "corpus.jsonl") if str(d["_id"]) in stored]
        answers = _answers(corpus, args.answers, args.seed)
        scored = {
            kind: await _score(services, texts, by_sentence=False)
            for kind, texts in answers.items()
        }
        mixed_sentences = await _score(services, answers["mixed"], by_sentence=True)
    finally:
        await services.close()

    floor = config.defaults.grounding_floor
    scores = {
        kind: [r["score"] for r in rows if r["score"] is not None] for kind, rows in scored.items()
    }
    best, j = _best_floor(scores["supported"], scores["other_domain"] + scores["mixed"])
    result = {
        "documents": len(stored),
        "answers_per_kind": args.answers,
        "floor": floor,
        "distribution": {kind: _describe(values) for kind, values in scores.items()},
        "flag_rate_at_floor": {
            kind: round(sum(s < floor for s in values) / len(values), 3)
            for kind, values in scores.items()
        },
        "recommended_floor": best,
        "youden_j_at_recommended": round(j, 3),
        "flag_rate_at_recommended": {
            kind: round(sum(s < best for s in values) / len(values), 3)
            for kind, values in scores.items()
        },
        "mixed_flag_rate_sentence_mode": round(
            sum(r["status"] == "flagged" for r in mixed_sentences) / len(mixed_sentences), 3
        ),
        "check_median_ms": round(
            statistics.median(r["ms"] for rows in scored.values() for r in rows), 2
        ),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "grounding_calibration.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot(scores, floor, best, RESULTS / "grounding_calibration.png")
    print(json.dumps(result, indent=2))


def _plot(scores: dict[str, list[float]], floor: float, best: float, path: Path) -> None:
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for kind, values in scores.items():
        axis.hist(values, bins=30, range=(0.0, 1.0), alpha=0.55, label=kind)
    axis.axvline(floor, color="black", linestyle="--", label=f"default floor {floor}")
    axis.axvline(best, color="red", linestyle=":", label=f"best separating floor {best}")
    axis.set_xlabel("top-3 average similarity")
    axis.set_ylabel("answers")
    axis.set_title("Grounding scores on SciFact")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    asyncio.run(main())
