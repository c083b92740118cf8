"""Quality per channel on golden sets, as a PNG, from `kbgate eval --output` reports.

    uv run python -m bench.quality_plot bench/results/eval_three_sets.json \\
        --out bench/results/quality_three_sets.png

One group of bars per set of a report (a report of several sets gives one each), one bar
per channel for nDCG@10 and R@100; on SciFact alone, beside the untuned Qdrant hybrid recipe
with the same model (whole documents, RRF k=60 over top-100 legs).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
CHANNELS = ("dense", "keyword", "rrf", "hybrid")
#: nDCG@10 of the untuned Qdrant hybrid recipe with this model on SciFact.
RECIPE = {"dense": 0.656, "keyword": 0.686, "hybrid": 0.717}


def _label(report: dict[str, Any]) -> str:
    selection = report["selection"]
    fusion = report["settings"].get("fusion_method", "rrf")  # older reports: RRF
    return f"{report['dataset']['name']} {selection['key']} ({selection['queries']} q), {fusion}"


def plot(reports: Sequence[dict[str, Any]], path: Path) -> None:
    """Grouped bars: nDCG@10 and R@100 per channel for each report."""
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(CHANNELS)
    for axis, measure in zip(axes, ("nDCG@10", "R@100"), strict=True):
        for offset, channel in enumerate(CHANNELS):
            values = [
                float(report["channels"].get(channel, {}).get(measure, 0.0)) for report in reports
            ]
            positions = [index + offset * width for index in range(len(reports))]
            bars = axis.bar(positions, values, width, label=channel)
            axis.bar_label(bars, fmt="%.3f", fontsize=7)
        if measure == "nDCG@10" and all(r["dataset"]["name"] == "scifact" for r in reports):
            for channel, value in RECIPE.items():
                axis.axhline(value, linestyle=":", linewidth=1, color="grey")
                axis.annotate(f"recipe {channel} {value}", (len(reports) - 0.5, value), fontsize=7)
        axis.set_xticks([index + width for index in range(len(reports))])
        axis.set_xticklabels(
            [_label(report) for report in reports], fontsize=7, rotation=12, ha="right"
        )
        axis.set_ylim(0.3, 1.0)
        axis.set_title(measure)
        axis.legend(loc="lower right", fontsize=8)
    figure.suptitle("kbgate eval: retrieval quality per channel (real ingest, real turn)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("reports", nargs="+", type=Path, help="kbgate eval --output files")
    parser.add_argument("--out", type=Path, default=RESULTS / "quality_scifact.png")
    args = parser.parse_args(argv)
    reports = []
    for path in args.reports:
        report = json.loads(path.read_text("utf-8"))
        reports.extend(report.get("sets", [report]))
    plot(reports, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
