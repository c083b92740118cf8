"""The figures of a run (ir-measures, imported when a run is scored) and the release gate
against a baseline file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.tools.evaluation.dataset import EvalError

#: ir-measures names, reported under these keys.
MEASURES = ("nDCG@10", "R@10", "R@100", "RR@10")
DEFAULT_TOLERANCE = 0.01
GATED = ("hybrid/nDCG@10", "hybrid/R@100")
#: What the hybrid must not fall below: each single channel, and plain rank fusion.
REFERENCES = ("dense", "keyword", "rrf")
_EMPTY_RUN_DOC = "__no_document__"


def score_run(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float]:
    """Mean of each measure over every question of `run` (an empty answer scores 0)."""
    ir_measures = ir_measures_library()
    measures = [ir_measures.parse_measure(name) for name in MEASURES]
    judged = {qid: dict(qrels[qid]) for qid in run}
    ranked: dict[str, dict[str, float]] = {}
    for qid, documents in run.items():
        # Scores from rank, strictly decreasing: trec_eval would reorder ties by id.
        scores = {doc: float(len(documents) - rank) for rank, doc in enumerate(documents)}
        ranked[qid] = scores or {_EMPTY_RUN_DOC: 0.0}
    totals = ir_measures.calc_aggregate(measures, judged, ranked)
    return {str(measure): round(float(totals[measure]), 4) for measure in measures}


def ir_measures_library() -> Any:
    """The metrics library, imported when a run starts (not at import time)."""
    try:
        import ir_measures
    except ImportError:
        raise EvalError(
            "kbgate eval needs the ir-measures package, in the `tools` extra: "
            "pip install 'kbgate[tools]'"
        ) from None
    return ir_measures


@dataclass(frozen=True, slots=True)
class GateResult:
    key: str
    tolerance: float
    failures: list[str]
    checked: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures


def check_gate(report: Mapping[str, Any], baseline: Mapping[str, Any]) -> GateResult:
    """Compare a report with the baseline entry under the same subset key."""
    key = str(report["selection"]["key"])
    tolerance = float(baseline.get("tolerance", DEFAULT_TOLERANCE))
    gated = [str(name) for name in baseline.get("gated", GATED)]
    channels = report["channels"]
    failures: list[str] = []
    checked: list[str] = []
    entry = baseline.get("runs", {}).get(key)
    if entry is None:
        failures.append(f"the baseline has no entry for {key}: record one with --write-baseline")
        return GateResult(key, tolerance, failures, checked)
    if entry.get("fingerprint") != report["dataset"]["fingerprint"]:
        failures.append(
            f"the dataset differs from the baseline's ({report['dataset']['fingerprint']} vs "
            f"{entry.get('fingerprint')}): re-record the baseline"
        )
    for name in gated:
        channel, _, measure = name.partition("/")
        got = float(channels[channel][measure])
        want = float(entry["channels"][channel][measure])
        checked.append(f"{name}: {got:.4f} vs baseline {want:.4f}")
        if got < want - tolerance:
            failures.append(f"{name} dropped to {got:.4f} from {want:.4f} (tolerance {tolerance})")
    hybrid = float(channels["hybrid"]["nDCG@10"])
    references = [c for c in REFERENCES if c in channels]
    best_channel = max(references, key=lambda c: float(channels[c]["nDCG@10"]))
    best = float(channels[best_channel]["nDCG@10"])
    checked.append(f"hybrid nDCG@10 {hybrid:.4f} vs best reference ({best_channel}) {best:.4f}")
    if hybrid < best - tolerance:
        failures.append(
            f"hybrid nDCG@10 {hybrid:.4f} is below {best_channel} {best:.4f} "
            f"(tolerance {tolerance})"
        )
    return GateResult(key, tolerance, failures, checked)


def updated_baseline(
    baseline: Mapping[str, Any] | None, report: Mapping[str, Any]
) -> dict[str, Any]:
    """The baseline with this report's figures recorded under its subset key."""
    document: dict[str, Any] = dict(baseline or {})
    document.setdefault(
        "about",
        "kbgate eval release gate: a run fails when a gated figure drops by more than "
        "`tolerance` (absolute) below the entry of its subset key, or when hybrid nDCG@10 "
        "falls more than `tolerance` below a single channel or plain rank fusion (rrf).",
    )
    document.setdefault("tolerance", DEFAULT_TOLERANCE)
    document.setdefault("gated", list(GATED))
    runs = dict(document.get("runs", {}))
    runs[report["selection"]["key"]] = {
        "dataset": report["dataset"]["name"],
        "fingerprint": report["dataset"]["fingerprint"],
        "queries": report["selection"]["queries"],
        "documents": report["selection"]["documents"],
        "channels": {
            channel: {measure: figures[measure] for measure in MEASURES}
            for channel, figures in report["channels"].items()
        },
        "abstention": report["abstention"],
        "settings": report["settings"],
    }
    document["runs"] = dict(sorted(runs.items()))
    return document
