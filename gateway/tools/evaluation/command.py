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
    from ingest.embedding import Embedder

_MISSING_EXTRA = (
    "kbgate eval needs the ir-measures package, in the `tools` extra: "
    "pip install 'kbgate[tools]' (or `uv sync --extra tools`)"
)


_EPILOG = """\
Channels: dense-only, keyword-only and hybrid, set through the KB's fusion weights.
Ranking runs ask for 100 documents with both floors at 0; abstention is measured with
the floors in force (platform defaults unless --kb-settings sets them).

exit status: 0 done (and the gate passed), 1 the gate failed, 2 bad arguments or setup.

examples:
  kbgate eval --dataset ../shared/datasets/scifact --limit 50 --seed 0 \\
      --offtopic bench/data/offtopic_questions.jsonl --baseline bench/baseline-scifact.json
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
        "--dataset", required=True, type=Path, metavar="DIR",
        help="a BEIR folder: corpus.jsonl, queries.jsonl, qrels.tsv",
    )  # fmt: skip
    parser.add_argument(
        "--kb-settings", metavar="JSON_OR_FILE", default=None,
        help="KB settings of the run under test (a JSON object, or a file holding one), "
        'e.g. \'{"fusion": {"dense": 1, "keyword": 0.5}}\'',
    )  # fmt: skip
    parser.add_argument("--baseline", type=Path, metavar="FILE", help="gate on this baseline")
    parser.add_argument(
        "--write-baseline", type=Path, metavar="FILE",
        help="record this run's figures in FILE under its subset key",
    )  # fmt: skip
    parser.add_argument("--limit", type=int, metavar="N", help="a seeded subset of N questions")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="seed of --limit")
    parser.add_argument(
        "--queries-subset", choices=("all", "tune", "heldout"), default="all",
        help="a fixed half of the judged questions (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--data-dir", type=Path, metavar="DIR",
        help="keep the store here and reuse it (unchanged documents are not re-embedded); "
        "default: a temporary directory",
    )  # fmt: skip
    parser.add_argument(
        "--offtopic", type=Path, metavar="FILE",
        help="JSON lines of off-topic questions ({\"text\": ...}) for the abstention rate",
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
    try:
        import ir_measures  # noqa: F401 — only whether it is installed, before the long run
    except ImportError:
        _stderr(f"kbgate eval: {_MISSING_EXTRA}")
        return 2
    from gateway.tools.evaluation.dataset import EvalError
    from gateway.tools.evaluation.metrics import check_gate, updated_baseline
    from gateway.tools.evaluation.run import EvalOptions, evaluate
    from settings.config import ConfigError

    try:
        options = EvalOptions(
            dataset=args.dataset,
            kb_settings=_parse_kb_settings(args.kb_settings),
            subset=args.queries_subset,
            limit=args.limit,
            seed=args.seed,
            data_dir=args.data_dir,
            offtopic=args.offtopic,
        )
        baseline = _read_json(args.baseline) if args.baseline else None
        report = asyncio.run(
            evaluate(
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
    status = 0
    if baseline is not None:
        gate = check_gate(report, baseline)
        report["gate"] = {
            "baseline": str(args.baseline),
            "key": gate.key,
            "tolerance": gate.tolerance,
            "checked": gate.checked,
            "failures": gate.failures,
            "passed": gate.passed,
        }
        for line in gate.checked:
            _stderr(f"gate: {line}")
        for line in gate.failures:
            _stderr(f"gate FAILED: {line}")
        status = 0 if gate.passed else 1
    if args.write_baseline:
        existing = _read_json(args.write_baseline) if args.write_baseline.is_file() else None
        _write_json(args.write_baseline, updated_baseline(existing, report))
        _stderr(f"kbgate eval: recorded {report['selection']['key']} in {args.write_baseline}")
    text = json.dumps(report, indent=2)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)  # noqa: T201 — the command's output is the report
    _stderr(_summary(report))
    return status


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
        f"keyword_floor {abstention['keyword_floor']}; hybrid nDCG@10 with these floors and "
        f"top_k {abstention['top_k']}: {abstention['nDCG@10']:.4f})"
    )
    lines.append(f"  {report['seconds']:.0f} s")
    return "\n".join(lines)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)  # noqa: T201 — progress goes to stderr


if __name__ == "__main__":
    raise SystemExit(main())
