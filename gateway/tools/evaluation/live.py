"""`kbgate eval --url URL --kb KB_ID`: evaluate a live KB's golden set through the HTTP API.

With `--golden-set FILE` (JSON lines or CSV) the file is stored as the KB's golden set
first; otherwise the one the KB has is used. The evaluation runs in the gateway
(`POST .../evaluations`), polled until it is done with its progress on stderr; its
figures and recommendation go to stdout (the API's JSON with `--json`). `--apply` then
applies the recommendation. The key (`--key` or KBGATE_KEY) needs the admin role.

Exit status: 0 done, 1 the gateway refused or the evaluation failed, 2 bad arguments or no
gateway to talk to. Standard library only (no ir-measures: the gateway computes).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.calibration.golden_file import GoldenFileError, golden_set_body

_TIMEOUT_S = 60.0
_POLL_S = 1.0


class Refused(Exception):
    """The gateway answered with an error status; `body` is its problem details."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class Unreachable(Exception):
    """No gateway answered at the URL."""


class Api:
    """JSON calls to one gateway with one key."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url.rstrip("/")
        self.key = key

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Authorization": f"Bearer {self.key}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(  # noqa: S310 — the scheme is checked in `run_live`
            self.url + path, data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as answer:  # noqa: S310 — as above
                found: dict[str, Any] = json.loads(answer.read() or b"{}")
                return found
        except urllib.error.HTTPError as error:
            try:
                problem = json.loads(error.read() or b"{}")
            except ValueError:
                problem = {}
            raise Refused(error.code, problem if isinstance(problem, dict) else {}) from None
        except (urllib.error.URLError, OSError) as error:
            raise Unreachable(f"no gateway at {self.url}: {error}") from None


def run_live(args: argparse.Namespace, say: Callable[[str], None]) -> int:
    """The live evaluation of `args.kb` on the gateway at `args.url`; the exit status."""
    url = args.url or os.environ.get("KBGATE_URL")
    key = args.key or os.environ.get("KBGATE_KEY")
    if not url or not key:
        say("kbgate eval: give --url and --key (or set KBGATE_URL and KBGATE_KEY) with --kb")
        return 2
    if urllib.parse.urlsplit(url).scheme not in {"http", "https"}:
        say(f"kbgate eval: not an http(s) URL: {url}")
        return 2
    api = Api(url, key)
    kb = "/v1/knowledge-bases/" + urllib.parse.quote(args.kb, safe="")
    try:
        if args.golden_set is not None:
            _upload(api, kb, args.golden_set, say)
        evaluation = _run(api, kb, say, timeout_s=args.timeout)
        if args.apply and evaluation["status"] == "done":
            evaluation["applied"] = api.call("POST", f"{_path(kb, evaluation)}/apply")
    except GoldenFileError as error:
        say(f"kbgate eval: {args.golden_set}: {error}")
        return 2
    except Refused as refused:
        detail = refused.body.get("detail") or refused.body.get("title") or ""
        field = refused.body.get("field")
        say(f"kbgate eval: refused, {refused.status}: {detail}" + (f" ({field})" if field else ""))
        return 1
    except (Unreachable, TimeoutError) as error:
        say(f"kbgate eval: {error}")
        return 2
    print(json.dumps(evaluation, indent=2) if args.json else summary(evaluation))  # noqa: T201 — the command's output
    return 0 if evaluation["status"] == "done" else 1


def _upload(api: Api, kb: str, path: Path, say: Callable[[str], None]) -> None:
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise GoldenFileError(f"cannot read it ({error})") from None
    stored = api.call("PUT", f"{kb}/golden-set", golden_set_body(text))
    say(
        f"kbgate eval: stored the golden set: {len(stored['questions'])} questions, "
        f"{len(stored['off_topic'])} off-topic"
    )


def _path(kb: str, evaluation: dict[str, Any]) -> str:
    return f"{kb}/evaluations/{urllib.parse.quote(evaluation['evaluation_id'], safe='')}"


def _run(api: Api, kb: str, say: Callable[[str], None], *, timeout_s: float) -> dict[str, Any]:
    """Start the evaluation and poll it until it is no longer running."""
    evaluation = api.call("POST", f"{kb}/evaluations")
    say(f"kbgate eval: started {evaluation['evaluation_id']}")
    deadline = time.monotonic() + timeout_s
    shown = None
    while evaluation["status"] == "running":
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{evaluation['evaluation_id']} still running after {timeout_s:.0f} s; "
                "poll GET .../evaluations/{id} for it"
            )
        time.sleep(_POLL_S)
        evaluation = api.call("GET", _path(kb, evaluation))
        progress = evaluation["progress"]
        line = f"{progress['stage']} {progress['done']}/{progress['total']}"
        if line != shown:
            say(f"kbgate eval: {line}")
            shown = line
    if evaluation["status"] != "done":
        say(f"kbgate eval: {evaluation['status']}: {evaluation.get('error') or ''}")
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
