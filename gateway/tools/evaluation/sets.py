"""Several golden sets in one `kbgate eval`: where each keeps its store, which baseline
gates it, where its baseline is recorded, and the one table that reports them all.

A path may hold `{dataset}`, replaced by each set's name (its folder's name): `--baseline
'bench/baseline-{dataset}.json'` gates every set on its own file. Without it, a set is
gated by the baseline whose entry for its subset key names that set (a single set with a
single baseline: that one, as it always was).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gateway.tools.evaluation.dataset import EvalError

PLACEHOLDER = "{dataset}"
#: The table's nDCG@10 columns, in order.
TABLE_CHANNELS = ("dense", "keyword", "rrf", "hybrid")


def for_set(path: Path, name: str) -> Path:
    """`path` with `{dataset}` replaced by the set's name."""
    return Path(str(path).replace(PLACEHOLDER, name))


def data_dir_for(base: Path | None, dataset: Path, *, several: bool) -> Path | None:
    """Each set's store: `base` itself for one set, else `base/<set name>` (or `base` with
    `{dataset}` replaced)."""
    if base is None:
        return None
    name = dataset.resolve().name
    if PLACEHOLDER in str(base):
        return for_set(base, name)
    return base / name if several else base


def limits_for(limits: Sequence[int] | None, datasets: Sequence[Path]) -> list[int | None]:
    """Each set's `--limit`: one for all, or one per set in the order of `--dataset`."""
    if not limits:
        return [None] * len(datasets)
    if len(limits) == 1:
        return [limits[0]] * len(datasets)
    if len(limits) != len(datasets):
        raise EvalError(f"--limit: give one for every set or one per --dataset "
                        f"({len(limits)} for {len(datasets)} sets)")  # fmt: skip
    return list(limits)


def check_write_baseline(path: Path | None, *, several: bool) -> None:
    """Several sets record their baselines apart: the path must hold `{dataset}`."""
    if path is not None and several and PLACEHOLDER not in str(path):
        raise EvalError(f"--write-baseline: with several --dataset, name each set's file with "
                        f"{PLACEHOLDER}, e.g. bench/baseline-{PLACEHOLDER}.json")  # fmt: skip


def baseline_for(
    report: Mapping[str, Any], baselines: Sequence[tuple[Path, Mapping[str, Any]]], *, single: bool
) -> tuple[Path, Mapping[str, Any]] | None:
    """The baseline that gates this set's report (None: none does)."""
    name = str(report["dataset"]["name"])
    key = str(report["selection"]["key"])
    for path, document in baselines:
        entry = document.get("runs", {}).get(key)
        if isinstance(entry, Mapping) and entry.get("dataset") == name:
            return path, document
    if single and len(baselines) == 1:
        return baselines[0]
    return None


def table(reports: Sequence[Mapping[str, Any]]) -> str:
    """One line per set: nDCG@10 per channel, hybrid recall@100, and the shares of
    answerable and off-topic questions that abstain with the floors in force."""
    header = (
        f"{'set':<20} {'questions':>9}  "
        + "  ".join(f"{c:>7}" for c in TABLE_CHANNELS)
        + f"  {'R@100':>6}  {'abstained: answerable':>21}  {'off-topic':>9}"
    )
    lines = ["kbgate eval: nDCG@10 per channel; abstention with the floors in force", header]
    for report in reports:
        channels = report["channels"]
        abstention = report["abstention"]
        off = abstention.get("offtopic")
        cells = "  ".join(
            f"{channels[c]['nDCG@10']:>7.4f}" if c in channels else f"{'-':>7}"
            for c in TABLE_CHANNELS
        )
        lines.append(
            f"{report['dataset']['name']:<20} {report['selection']['queries']:>9}  {cells}"
            f"  {channels['hybrid']['R@100']:>6.3f}  {abstention['answerable']:>21.1%}"
            f"  {(f'{off:.1%}' if off is not None else '-'):>9}"
        )
    return "\n".join(lines)
