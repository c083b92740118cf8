"""Tune the per-KB fusion weights on one half of the golden set's questions; report the other.

    uv run python -m bench.tune_fusion --dataset ../shared/datasets/scifact \\
        --data-dir /tmp/scifact-eval --keyword-weights 0.5 0.7 0.85 1 1.2 1.5 2

Same path as `kbgate eval` (real ingest into the data dir, where unchanged documents are not
re-embedded; every question through the real turn), in one process. Each keyword weight
(dense weight 1) is scored on the `tune` half; the best by nDCG@10 and the 1:1 default are
then scored on the `heldout` half, which the choice never saw. A gain that holds on the
held-out half is not overfitting to the questions tuned on. Writes
`bench/results/fusion_tuning.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from gateway.tools.evaluation.dataset import split_queries
from gateway.tools.evaluation.metrics import score_run
from gateway.tools.evaluation.run import (
    EvalOptions,
    PreparedRun,
    prepare,
    ranking_settings,
    run_questions,
)

RESULTS = Path(__file__).parent / "results"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _score(run: PreparedRun, weight: float, query_ids: Sequence[str]) -> dict[str, float]:
    settings = ranking_settings({"fusion": {"dense": 1.0, "keyword": weight}}, "hybrid")
    questions = {qid: run.dataset.queries[qid] for qid in query_ids}
    answers = await run_questions(run.session, settings, questions, f"keyword weight {weight}")
    return score_run(answers.ranking, run.dataset.qrels)


async def tune(dataset: Path, data_dir: Path, weights: Sequence[float]) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        run = await prepare(
            EvalOptions(dataset=dataset, data_dir=data_dir),
            stack,
            environ=os.environ,
            progress=_stderr,
        )
        judged = run.selection.query_ids
        tune_ids, heldout_ids = split_queries(judged, "tune"), split_queries(judged, "heldout")
        on_tune = {weight: await _score(run, weight, tune_ids) for weight in weights}
        for weight, figures in on_tune.items():
            _stderr(f"tune   keyword {weight:<5} {figures}")
        best = max(weights, key=lambda weight: (on_tune[weight]["nDCG@10"], -abs(weight - 1)))
        on_heldout = {weight: await _score(run, weight, heldout_ids) for weight in {1.0, best}}
        for weight, figures in on_heldout.items():
            _stderr(f"heldout keyword {weight:<5} {figures}")
    return {
        "dataset": str(dataset),
        "tune_questions": len(tune_ids),
        "heldout_questions": len(heldout_ids),
        "dense_weight": 1.0,
        "tune": {str(weight): figures for weight, figures in on_tune.items()},
        "best_keyword_weight": best,
        "heldout": {str(weight): figures for weight, figures in on_heldout.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument(
        "--keyword-weights", type=float, nargs="+", default=[0.5, 0.7, 0.85, 1.0, 1.2, 1.5, 2.0]
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "fusion_tuning.json")
    args = parser.parse_args(argv)
    result = asyncio.run(tune(args.dataset, args.data_dir, args.keyword_weights))
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
