"""`kbgate eval` on the command line: its arguments, the report it prints and the gate's
exit status. Light to import: the run and the metrics library load when the command runs."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.safety.redaction import Redactor
    from ingest.embedder.embedding import Embedder

_MISSING_EXTRA = (
    "kbgate eval needs the ir-measures package, in the `tools` extra: "
    "pip install 'kbgate[tools]' (or `uv sync --extra tools`)"
)


_EPILOG = """\
Channels: dense-only, keyword-only and hybrid, set through the KB's fusion weights, and
rrf (both channels, plain Reciprocal Rank Fusion, k = 60) for reference. Ranking runs ask
for 100 documents with both floors at 0; abstention is measured with the floors in force
(platform defaults unless --kb-settings sets them). Repeat --dataset for several sets.

exit status: 0 done (and the gate passed), 1 the gate failed, 2 bad arguments or setup.

With --kb, the key's workspace KB is evaluated by the gateway at --url on its golden set
(figures and a recommendation of its floors, fusion weights and grounding floor); no
ir-measures needed.

examples:
  kbgate eval --url http://localhost:8080 --kb handbook --golden-set golden.jsonl --json
  kbgate eval --dataset ../shared/datasets/scifact --limit 50 --seed 0 \\
      --offtopic bench/data/offtopic_questions.jsonl --baseline bench/baseline-scifact.json
  kbgate eval --dataset ../shared/datasets/scifact --limit 50 \\
      --dataset ../shared/datasets/trec-dl19-5k --limit 5 --seed 0 \\
      --data-dir /tmp/kbgate-eval --baseline 'bench/baseline-{dataset}.json'
  kbgate eval --dataset ../shared/datasets/scifact --data-dir /tmp/scifact-eval \\
      --queries-subset heldout --output scifact-heldout.json
"""


def add_eval_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `eval` on the `kbgate` command's subparsers (it sets `run`)."""
    parser = subparsers.add_parser(
        "eval",
        help="score retrieval on a BEIR golden set per channel; gate on a baseline",
        description="Score retrieval on a BEIR golden set, per channel, and gate releases on it.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    parser.set_defaults(run=run_command)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset", type=Path, metavar="DIR", action="append",
        help="a BEIR folder: corpus.jsonl, queries.jsonl, qrels.tsv; repeat it to evaluate "
        "several sets in one run and one table",
    )  # fmt: skip
    live = parser.add_argument_group(
        "a live KB (--kb): its golden set evaluated by a running gateway"
    )
    live.add_argument("--kb", metavar="KB_ID", help="evaluate this KB of the key's workspace")
    live.add_argument("--url", help="the gateway's base URL (KBGATE_URL)")
    live.add_argument("--key", help="an admin key of the workspace (KBGATE_KEY)")
    live.add_argument(
        "--golden-set", type=Path, metavar="FILE",
        help="store this golden set (JSON lines or CSV) first; default: the KB's own",
    )  # fmt: skip
    live.add_argument("--json", action="store_true", help="print the evaluation's JSON")
    live.add_argument("--apply", action="store_true", help="apply the recommendation")
    live.add_argument(
        "--timeout", type=float, default=3600.0, metavar="S",
        help="stop polling after this many seconds (default 3600)",
    )  # fmt: skip
    parser.add_argument(
        "--kb-settings", metavar="JSON_OR_FILE", default=None,
        help="KB settings of the run under test (a JSON object, or a file holding one), "
        'e.g. \'{"fusion": {"dense": 1, "keyword": 0.5}}\'',
    )  # fmt: skip
    parser.add_argument(
        "--baseline", type=Path, metavar="FILE", action="append",
        help="gate on this baseline (repeatable; {dataset} in the path: each set's own file)",
    )  # fmt: skip
    parser.add_argument(
        "--write-baseline", type=Path, metavar="FILE",
        help="record this run's figures in FILE under its subset key ({dataset} in the path "
        "is each set's name; needed with several sets)",
    )  # fmt: skip
    parser.add_argument(
        "--limit", type=int, metavar="N", action="append",
        help="a seeded subset of N questions (repeat it after each --dataset for a limit "
        "per set, in their order)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="seed of --limit")
    parser.add_argument(
        "--queries-subset", choices=("all", "tune", "heldout"), default="all",
        help="a fixed half of the judged questions (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--data-dir", type=Path, metavar="DIR",
        help="keep the store here and reuse it (unchanged documents are not re-embedded; "
        "several sets: DIR/<set name>); default: a temporary directory",
    )  # fmt: skip
    parser.add_argument(
        "--offtopic", type=Path, metavar="FILE",
        help="JSON lines of off-topic questions ({\"text\": ...}) for the abstention rate "
        "of each set without its own (an offtopic.jsonl beside its corpus)",
    )  # fmt: skip
    parser.add_argument("--output", type=Path, metavar="FILE", help="write the JSON report here")


def main(
    argv: Sequence[str] | None = None,
    *,
    embedder: Embedder | None = None,
    redactor: Redactor | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """`kbgate eval` as a function (tests pass a loaded model and redactor)."""
    parser = argparse.ArgumentParser(prog="kbgate eval", epilog=_EPILOG)
    _add_arguments(parser)
    args = parser.parse_args(argv)
    return run_command(args, embedder=embedder, redactor=redactor, environ=environ)


def run_command(
    args: argparse.Namespace,
    *,
    embedder: Embedder | None = None,
    redactor: Redactor | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run, report, and gate; the exit status."""
    if args.kb is not None:
        from gateway.tools.evaluation.live import run_live

        return run_live(args, _stderr)
    if args.dataset is None:
        _stderr("kbgate eval: give --dataset DIR, or --kb KB_ID with --url and --key")
        return 2
    try:
        import ir_measures  # noqa: F401 — only whether it is installed, before the long run
    except ImportError:
        _stderr(f"kbgate eval: {_MISSING_EXTRA}")
        return 2
    from gateway.tools.evaluation.dataset import EvalError
    from gateway.tools.evaluation.run import EvalOptions, evaluate_all
    from gateway.tools.evaluation.sets import (
        check_write_baseline,
        data_dir_for,
        limits_for,
        table,
    )
    from settings.config import ConfigError

    datasets: list[Path] = args.dataset
    several = len(datasets) > 1
    try:
        check_write_baseline(args.write_baseline, several=several)
        kb_settings = _parse_kb_settings(args.kb_settings)
        baselines = _baselines(args.baseline or [], datasets)
        options = [
            EvalOptions(
                dataset=dataset,
                kb_settings=kb_settings,
                subset=args.queries_subset,
                limit=limit,
                seed=args.seed,
                data_dir=data_dir_for(args.data_dir, dataset, several=several),
                offtopic=args.offtopic,
            )
            for dataset, limit in zip(datasets, limits_for(args.limit, datasets), strict=True)
        ]
        reports = asyncio.run(
            evaluate_all(
                options,
                environ=os.environ if environ is None else environ,
                embedder=embedder,
                redactor=redactor,
                progress=_stderr,
            )
        )
    except (EvalError, ConfigError) as error:
        _stderr(f"kbgate eval: {error}")
        return 2
    outcomes = [_gate(report, baselines, single=not several) for report in reports]
    if args.write_baseline:
        _record_baselines(args.write_baseline, reports)
    output = reports[0] if not several else {"sets": reports}
    text = json.dumps(output, indent=2)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)  # noqa: T201 — the command's output is the report
    for report in reports:
        _stderr(_summary(report))
    if several:
        _stderr(table(reports))
    return 0 if all(outcomes) else 1


def _baselines(paths: Sequence[Path], datasets: Sequence[Path]) -> list[tuple[Path, Any]]:
    """The baseline files, read; a path holding {dataset} stands for one file per set."""
    from gateway.tools.evaluation.sets import PLACEHOLDER, for_set

    files: list[Path] = []
    for path in paths:
        if PLACEHOLDER in str(path):
            files.extend(for_set(path, dataset.resolve().name) for dataset in datasets)
        else:
            files.append(path)
    return [(path, _read_json(path)) for path in files]


def _gate(report: dict[str, Any], baselines: Sequence[tuple[Path, Any]], *, single: bool) -> bool:
    """Gate one set's report on its baseline (none given: passes); the outcome goes into
    the report and to stderr."""
    from gateway.tools.evaluation.metrics import GateResult, check_gate
    from gateway.tools.evaluation.sets import baseline_for

    if not baselines:
        return True
    name = report["dataset"]["name"]
    found = baseline_for(report, baselines, single=single)
    if found is None:
        key = report["selection"]["key"]
        gate = GateResult(key, 0.0, [f"no baseline names {name} under {key}"], [])
        path = None
    else:
        path, baseline = found
        gate = check_gate(report, baseline)
    report["gate"] = {
        "baseline": None if path is None else str(path),
        "key": gate.key,
        "tolerance": gate.tolerance,
        "checked": gate.checked,
        "failures": gate.failures,
        "passed": gate.passed,
    }
    for line in gate.checked:
        _stderr(f"gate {name}: {line}")
    for line in gate.failures:
        _stderr(f"gate FAILED {name}: {line}")
    return gate.passed


def _record_baselines(template: Path, reports: Sequence[dict[str, Any]]) -> None:
    from gateway.tools.evaluation.metrics import updated_baseline
    from gateway.tools.evaluation.sets import for_set

    for report in reports:
        path = for_set(template, report["dataset"]["name"])
        existing = _read_json(path) if path.is_file() else None
        _write_json(path, updated_baseline(existing, report))
        _stderr(f"kbgate eval: recorded {report['selection']['key']} in {path}")


def _parse_kb_settings(raw: str | None) -> dict[str, Any]:
    from gateway.tools.evaluation.dataset import EvalError

    if raw is None:
        return {}
    text = raw
    if not raw.lstrip().startswith("{"):
        path = Path(raw)
        if not path.is_file():
            raise EvalError(f"--kb-settings: neither a JSON object nor a file: {raw!r}")
        text = path.read_text("utf-8")
    try:
        value = json.loads(text)
    except ValueError as error:
        raise EvalError(f"--kb-settings: not JSON ({error})") from None
    if not isinstance(value, dict):
        raise EvalError("--kb-settings: expected a JSON object")
    return value


def _read_json(path: Path) -> dict[str, Any]:
    from gateway.tools.evaluation.dataset import EvalError

    try:
        value = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as error:
        raise EvalError(f"cannot read {path}: {error}") from None
    if not isinstance(value, dict):
        raise EvalError(f"{path}: expected a JSON object")
    return value


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _summary(report: Mapping[str, Any]) -> str:
    from gateway.tools.evaluation.metrics import MEASURES

    lines = [f"kbgate eval: {report['dataset']['name']} {report['selection']['key']}"]
    for channel, figures in report["channels"].items():
        cells = "  ".join(f"{m} {figures[m]:.4f}" for m in MEASURES)
        lines.append(f"  {channel:<8} {cells}")
    abstention = report["abstention"]
    off = abstention.get("offtopic")
    lines.append(
        f"  abstained: answerable {abstention['answerable']:.1%}"
        + (f", off-topic {off:.1%}" if off is not None else "")
        + f" (score_threshold {abstention['score_threshold']}, "
        + (
            f"joint_line {abstention['joint_line']}, "
            if abstention.get("joint_line") is not None
            else ""
        )
        + f"keyword_floor {abstention['keyword_floor']}; hybrid nDCG@10 with these floors and "
        f"top_k {abstention['top_k']}: {abstention['nDCG@10']:.4f})"
    )
    lines.append(f"  {report['seconds']:.0f} s")
    return "\n".join(lines)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)  # noqa: T201 — progress goes to stderr


if __name__ == "__main__":
    raise SystemExit(main())
