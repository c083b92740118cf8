"""`kbgate eval --url URL --kb KB_ID`: evaluate a live KB's golden set through the HTTP API.

With `--golden-set FILE` (JSON lines or CSV) the file is stored as the KB's golden set
first; otherwise the one the KB has is used. The evaluation runs in the gateway
(`POST .../evaluations`), polled until it is done with its progress on stderr; its
figures and recommendation go to stdout (the API's JSON with `--json`). `--apply` then
applies the recommendation. The key (`--key` or KBGATE_KEY) needs the admin role.

Exit status: 0 done, 1 the gateway refused or the evaluation failed, 2 bad arguments or no
gateway to talk to. Over kbgate_client (no ir-measures: the gateway computes).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gateway.calibration.golden_file import GoldenFileError, golden_set_body

if TYPE_CHECKING:
    from kbgate_client import Client
    from kbgate_client.models import EvaluationOut

_TIMEOUT_S = 60.0
_POLL_S = 1.0


def run_live(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    """The live evaluation of `args.kb` on the gateway at `args.url`; the exit status."""
    from kbgate_client import Client, ProblemError, TransportError

    url = args.url or os.environ.get("KBGATE_URL")
    key = args.key or os.environ.get("KBGATE_KEY")
    if not url or not key:
        say("kbgate eval: give --url and --key (or set KBGATE_URL and KBGATE_KEY) with --kb")
        return 2
    if urllib.parse.urlsplit(url).scheme not in {"http", "https"}:
        say(f"kbgate eval: not an http(s) URL: {url}")
        return 2
    try:
        with Client(url, key, timeout_s=_TIMEOUT_S) as client:
            if args.golden_set is not None:
                _upload(client, args.kb, args.golden_set, say)
            done = _run(client, args.kb, say, timeout_s=args.timeout)
            evaluation: dict[str, Any] = msgspec.to_builtins(done)
            if args.apply and done.status == "done":
                applied = client.apply_evaluation(args.kb, done.evaluation_id)
                evaluation["applied"] = msgspec.to_builtins(applied)
    except GoldenFileError as error:
        say(f"kbgate eval: {args.golden_set}: {error}")
        return 2
    except ProblemError as refused:
        problem = refused.problem
        where = f" ({problem.field})" if problem.field else ""
        say(f"kbgate eval: refused, {problem.status}: {problem.detail or problem.title}{where}")
        return 1
    except (TransportError, TimeoutError) as error:
        say(f"kbgate eval: {error}")
        return 2
    print(json.dumps(evaluation, indent=2) if args.json else summary(evaluation))  # noqa: T201 — the command's output
    return 0 if evaluation["status"] == "done" else 1


def _upload(client: Client, kb_id: str, path: Path, say: Callable[[str], None]) -> None:
    from kbgate_client.models import PutGoldenSet

    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise GoldenFileError(f"cannot read it ({error})") from None
    try:
        body = msgspec.convert(golden_set_body(text), type=PutGoldenSet)
    except msgspec.ValidationError as error:
        raise GoldenFileError(str(error)) from None
    stored = client.put_golden_set(kb_id, body)
    say(
        f"kbgate eval: stored the golden set: {len(stored.questions)} questions, "
        f"{len(stored.off_topic)} off-topic"
    )


def _run(
    client: Client, kb_id: str, say: Callable[[str], None], *, timeout_s: float
) -> EvaluationOut:
    """Start the evaluation and poll it until it is no longer running."""
    evaluation = client.start_evaluation(kb_id)
    say(f"kbgate eval: started {evaluation.evaluation_id}")
    deadline = time.monotonic() + timeout_s
    shown = None
    while evaluation.status == "running":
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{evaluation.evaluation_id} still running after {timeout_s:.0f} s; "
                "poll GET .../evaluations/{id} for it"
            )
        time.sleep(_POLL_S)
        evaluation = client.get_evaluation(kb_id, evaluation.evaluation_id)
        progress = evaluation.progress
        line = f"{progress.stage} {progress.done}/{progress.total}"
        if line != shown:
            say(f"kbgate eval: {line}")
            shown = line
    if evaluation.status != "done":
        say(f"kbgate eval: {evaluation.status}: {evaluation.error or ''}")
    return evaluation


def summary(evaluation: dict[str, Any]) -> str:
    """The figures and the recommendation, for reading."""
    report = evaluation.get("report")
    if not report:
        return f"{evaluation['evaluation_id']}: {evaluation['status']}"
    counts = report["counts"]
    lines = [
        f"{evaluation['evaluation_id']} on {evaluation['kb_id']}: {counts['questions']} "
        f"questions, {counts['off_topic']} off-topic ({counts['off_topic_source']}), "
        f"{counts['missing_documents']} expected documents missing",
        "  channel   nDCG@10  R@10    R@100",
    ]
    for name, figures in report["channels"].items():
        lines.append(
            f"  {name:<9} {figures['ndcg_10']:.4f}   {figures['recall_10']:.4f}  "
            f"{figures['recall_100']:.4f}"
        )
    for label, outcome in (
        ("current", report["current"]),
        ("recommended", report["recommendation"]),
    ):
        settings, measured = outcome["settings"], outcome["measured"]
        lines.append(
            f"  {label:<11} score_threshold {settings['score_threshold']}, keyword_floor "
            f"{settings['keyword_floor']}, fusion {settings['fusion']['dense']}:"
            f"{settings['fusion']['keyword']}, grounding_floor {settings['grounding_floor']}: "
            f"abstains on {measured['answerable']:.1%} answerable, "
            f"{measured['off_topic']:.1%} off-topic; nDCG@10 {outcome['ndcg_10']:.4f}; "
            f"flags {outcome['grounding']['supported']:.1%} supported, "
            f"{outcome['grounding']['other_domain']:.1%} other-domain answers"
        )
    recommendation = report["recommendation"]
    lines.append(
        f"  changes: {json.dumps(recommendation['changes'])}; meets the target: "
        f"{'yes' if recommendation['meets_target'] else 'no'}"
        + ("; applied" if evaluation.get("applied") else "")
    )
    lines += [f"  caution: {caution}" for caution in recommendation.get("cautions", [])]
    return "\n".join(lines)
