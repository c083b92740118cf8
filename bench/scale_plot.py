"""The growth curves of `bench.scale`: turn latency, recall, memory and disk, index builds
against the store's size, with the targets drawn in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def figure(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [row["size"] for row in rows]
    figure, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    turns: list[dict[str, Any]] = [row["turns"] for row in rows if "turns" in row]
    if len(turns) == len(rows):
        axis = axes[0][0]
        for calls, style in (("one_caller", "-"), ("eight_callers", "--")):
            for stat, marker in (("median_ms", "o"), ("p99_ms", "x")):
                axis.plot(
                    sizes,
                    [t[calls][stat] for t in turns],
                    style,
                    marker=marker,
                    label=f"{calls.replace('_', ' ')}: {stat.removesuffix('_ms')}",
                )
        axis.plot(
            sizes,
            [t["one_caller"]["per_scope"]["largest"]["median_ms"] for t in turns],
            ":",
            marker="o",
            label="one caller: median, largest workspace",
        )
        axis.axhline(
            2 * turns[0]["one_caller"]["median_ms"],
            color="grey",
            linestyle=":",
            label="target: 2x the smallest store's one-caller median",
        )
        axis.set_yscale("log")
        axis.set_ylabel("turn latency (ms)")
        axis.set_title("Turn over HTTP (tiny, median, largest workspace)")
        axis.legend(fontsize=7)
    axis = axes[0][1]
    for leg in ("dense", "keyword", "document_keyword"):
        worst = [
            min(
                (
                    r["legs"][leg]["recall_at_10"]
                    for r in row.get("recall", [])
                    if r["legs"][leg]["recall_at_10"] is not None
                ),
                default=np.nan,
            )
            for row in rows
        ]
        axis.plot(sizes, worst, marker="o", label=f"{leg}: worst scope's mean")
    axis.axhline(0.98, color="grey", linestyle=":", label="target 0.98")
    axis.set_ylabel("recall@10 against exact")
    axis.set_title("Recall under full Scopes")
    axis.legend(fontsize=7)
    axis = axes[1][0]
    if len(turns) == len(rows):
        axis.plot(
            sizes,
            [t["rss_mib_after_turns"]["VmHWM"] for t in turns],
            marker="o",
            label="gateway peak RSS",
        )
        axis.plot(
            sizes,
            [t["rss_mib_after_turns"]["RssAnon"] for t in turns],
            marker="x",
            label="gateway anonymous RSS",
        )
    axis.plot(sizes, [row["disk_mib"] for row in rows], marker="s", label="disk (qdrant-edge)")
    axis.axhline(4096, color="grey", linestyle=":", label="target: gateway RSS 4 GiB")
    axis.set_ylabel("MiB")
    axis.set_title("Memory and disk")
    axis.legend(fontsize=7)
    _index_builds(axes[1][1], rows, sizes)
    for axis in axes.flat:
        axis.set_xscale("log")
        axis.set_xlim(min(sizes) / 1.5, max(sizes) * 1.5)  # also when a panel has no data
        axis.set_xlabel("passages")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def _index_builds(axis: Any, rows: list[dict[str, Any]], sizes: list[int]) -> None:
    axis.plot(
        sizes,
        [row["build"]["index_build_s"] or np.nan for row in rows],
        marker="o",
        label="index build after bulk write",
    )
    if all("maintenance" in row for row in rows):
        maintenance = [row["maintenance"] for row in rows]
        axis.plot(
            sizes,
            [m["at_start"]["start_to_live_s"] for m in maintenance],
            marker="x",
            label="gateway start after a burst of writes (builds first)",
        )
        axis.plot(
            sizes,
            [m["while_serving"]["worst_call_during_writes_ms"] / 1000 for m in maintenance],
            marker="s",
            label="worst ranking call while a burst is written",
        )
    if all("turns" in row for row in rows):
        axis.plot(
            sizes,
            [row["turns"]["start_to_live_s"] for row in rows],
            marker="^",
            label="gateway start, nothing to build",
        )
    axis.axhline(0.5, color="grey", linestyle=":", label="target: worst turn 500 ms")
    axis.set_yscale("log")
    axis.set_ylabel("seconds")
    axis.set_title("Index build")
    axis.legend(fontsize=7)
