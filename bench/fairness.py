"""Another workspace's cheap calls while one workspace floods the gateway with grounding checks.

A real `kbgate serve` (default configuration) on a temporary data dir; two workspaces, A
and B, each with a KB of a few dozen short passages and an agent. B's settings read
(`GET /v1/workspace/settings`), retrieve (`POST /v1/retrieve`, a new question each
call) and a two-sentence grounding check of its own are timed one after the other,
`--calls` of each spread over `--window-s`, in these phases:

- idle: nothing else runs;
- audit_flood: A's callers send the audit's check again and again: sentences mode,
  19,599 characters in 2,800 sentences (over the sentence budget: 422);
- budget_flood: A's callers loop the heaviest check the budget allows: sentences mode,
  200 sentences in 19,999 characters;
- budget_flood_no_backoff: the same, from callers that ignore Retry-After.

A's `--flood-callers` callers run in a process of their own (so their client work does not
hold the measuring process's GIL), one keep-alive connection each, from `--flood-lead-s`
before B's first call until after its last. A caller answered 429 waits its Retry-After,
as a client following the protocol does (except in budget_flood_no_backoff); any other
answer is followed by the next request at once. A's answers are counted by status (429s
by cause: the per-workspace limit on expensive calls, or the request rate limit). The
gateway, the flood and B's client share this machine's cores. Writes the figures as JSON
and prints a table.

    uv run python -m bench.fairness --out bench/results/fairness.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.support.gateway_process import GatewayProcess
from tests.support.workspace_http import workspace_headers

RESULTS = Path(__file__).parent / "results"
PLATFORM_KEY = "bench-platform-key-fairness"
ORG, KB, AGENT = "bench", "kb", "bot"
#: The audit's flood: 2,800 sentences in 19,599 characters.
AUDIT_ANSWER = " ".join(["Go on."] * 2800)
#: The heaviest check the default budget allows: 200 sentences of 99 characters (19,999).
BUDGET_ANSWER = " ".join(
    f"Green tea sample {n:03d} holds a moderate amount of caffeine, some catechins "
    "and a little theanine too."
    for n in range(200)
)
_TOPICS = (
    ("green tea", "catechins and a moderate amount of caffeine"),
    ("espresso", "a small volume of strongly extracted coffee"),
    ("sourdough", "a starter of wild yeast and lactic acid bacteria"),
    ("kimchi", "fermented cabbage, radish, chilli and garlic"),
    ("miso", "soybeans fermented with koji mould and salt"),
    ("olive oil", "oleic acid and polyphenols pressed from olives"),
    ("dark chocolate", "cocoa solids, cocoa butter and a little sugar"),
    ("oat milk", "oats soaked, blended and strained with water"),
    ("kombucha", "sweet tea fermented by a culture of yeast and bacteria"),
    ("rye bread", "rye flour, often with caraway, baked dense"),
    ("yoghurt", "milk fermented by Lactobacillus bulgaricus"),
    ("honey", "nectar concentrated by bees, mostly fructose and glucose"),
)


def _passages() -> dict[str, str]:
    """A few dozen short passages: three per topic."""
    return {
        f"{name.replace(' ', '-')}-{n}": (
            f"Note {n} on {name}: it is made of {what}. "
            f"Kitchen record {n} says {name} keeps for {n + 2} weeks when stored cool."
        )
        for name, what in _TOPICS
        for n in range(3)
    }


class _Caller:
    """One keep-alive HTTP/1.1 connection (stdlib: little client CPU per request)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self._connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=120)
        self._headers = {**headers, "Content-Type": "application/json"}

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        payload = json.dumps(body).encode() if body is not None else None
        self._connection.request(method, path, body=payload, headers=self._headers)
        response = self._connection.getresponse()
        return (
            response.status,
            {name.lower(): value for name, value in response.getheaders()},
            response.read(),
        )

    def close(self) -> None:
        self._connection.close()


def _setup(url: str, tenant_id: str) -> dict[str, str]:
    """Workspace, KB of short passages and agent over HTTP; the workspace key's header."""
    import httpx

    with httpx.Client(base_url=url, timeout=120) as client:
        headers = workspace_headers(client, PLATFORM_KEY, ORG, tenant_id)
        for path, body in (
            (f"/v1/knowledge-bases/{KB}", {"score_threshold": 0.0}),
            (f"/v1/agents/{AGENT}", {"knowledge_base_ids": [KB]}),
        ):
            client.put(path, json=body, headers=headers).raise_for_status()
        for doc_id, text in _passages().items():
            client.put(
                f"/v1/knowledge-bases/{KB}/documents/{doc_id}",
                json={"text": text, "classification": "internal"},
                headers=headers,
            ).raise_for_status()
    return headers


def _summary(latencies_ms: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies_ms)
    return {
        "median_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
        "max_ms": round(ordered[-1], 1),
        "n": len(ordered),
    }


def _measure_b(
    url: str, headers: dict[str, str], calls: int, phase: str, *, window_s: float = 0.0
) -> dict[str, Any]:
    """B's settings read, retrieve and a two-sentence grounding check in turn, `calls` of
    each, their starts spread evenly over `window_s`; every answer must be 200."""
    caller = _Caller(url, headers)
    reads: list[float] = []
    retrieves: list[float] = []
    checks: list[float] = []
    began = time.perf_counter()
    try:
        for n in range(calls):
            time.sleep(max(0.0, began + n * window_s / calls - time.perf_counter()))
            name, what = _TOPICS[n % len(_TOPICS)]
            for timings, method, path, body in (
                (reads, "GET", "/v1/workspace/settings", None),
                (
                    retrieves,
                    "POST",
                    "/v1/retrieve",
                    {"agent_id": AGENT, "question": f"{phase} {n}: what is {name} made of?"},
                ),
                (
                    checks,
                    "POST",
                    "/v1/grounding/check",
                    {
                        "agent_id": AGENT,
                        "answer": f"{name.capitalize()} is made of {what}. It keeps {n} weeks.",
                        "mode": "sentences",
                    },
                ),
            ):
                started = time.perf_counter()
                status, _, answer = caller.request(method, path, body)
                timings.append((time.perf_counter() - started) * 1000)
                if status != 200:
                    raise RuntimeError(f"B's {method} {path} answered {status}: {answer[:300]!r}")
    finally:
        caller.close()
    return {
        "settings_read": _summary(reads),
        "retrieve": _summary(retrieves),
        "grounding_check": _summary(checks),
    }


@dataclass(frozen=True)
class Flood:
    """What A's callers send, and how they take a 429."""

    url: str
    headers: dict[str, str]
    answer: str
    callers: int
    honour_retry_after: bool


def _flood_caller(flood: Flood, stop: Event) -> dict[str, Any]:
    """One of A's callers: the same check again and again until `stop`."""
    caller = _Caller(flood.url, flood.headers)
    counts: Counter[str] = Counter()
    answered_ms: dict[str, list[float]] = {}
    body = {"agent_id": AGENT, "answer": flood.answer, "mode": "sentences"}
    try:
        while not stop.is_set():
            started = time.perf_counter()
            status, response_headers, raw = caller.request("POST", "/v1/grounding/check", body)
            elapsed = (time.perf_counter() - started) * 1000
            outcome = str(status)
            if status == 429:
                limit = b"limit of expensive requests" in raw
                outcome = "429_expensive_limit" if limit else "429_rate_limit"
            elif status == 200:
                outcome = f"200_{json.loads(raw)['status']}"
            counts[outcome] += 1
            answered_ms.setdefault(outcome, []).append(elapsed)
            if status == 429 and flood.honour_retry_after:
                stop.wait(float(response_headers.get("retry-after", "1")))
    finally:
        caller.close()
    return {"counts": counts, "answered_ms": answered_ms}


def _flood(flood: Flood, stop: Event, out: Queue[Any]) -> None:
    """A's callers, each on a thread of this (separate) process, until `stop`; their
    tallies into `out`."""
    with ThreadPoolExecutor(flood.callers) as pool:
        runs = list(pool.map(lambda _: _flood_caller(flood, stop), range(flood.callers)))
    counts: Counter[str] = Counter()
    answered: dict[str, list[float]] = {}
    for run in runs:
        counts.update(run["counts"])
        for outcome, times in run["answered_ms"].items():
            answered.setdefault(outcome, []).extend(times)
    out.put(
        {
            "answers": dict(sorted(counts.items())),
            "answer_median_ms": {
                outcome: round(statistics.median(times), 1)
                for outcome, times in sorted(answered.items())
            },
        }
    )


def _phase_under_flood(
    flood: Flood, measured: dict[str, str], args: argparse.Namespace, phase: str
) -> dict[str, Any]:
    """B (`measured`: its headers) timed while A's flood runs from `flood_lead_s` before
    B's first call until after its last."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    out: Queue[Any] = context.Queue()
    process = context.Process(target=_flood, args=(flood, stop, out))
    process.start()
    try:
        time.sleep(args.flood_lead_s)  # the flood is up: A's pool slots are taken
        started = time.perf_counter()
        b = _measure_b(flood.url, measured, args.calls, phase, window_s=args.window_s)
        window = time.perf_counter() - started
    finally:
        stop.set()
        tally = out.get(timeout=120)
        process.join(timeout=30)
    return {**b, "flood": {**tally, "window_s": round(window + args.flood_lead_s, 1)}}


def _single_check_ms(url: str, headers: dict[str, str], answer: str) -> float:
    """One check alone: how long A's budget-size check takes on an idle gateway."""
    caller = _Caller(url, headers)
    try:
        started = time.perf_counter()
        status, _, raw = caller.request(
            "POST",
            "/v1/grounding/check",
            {"agent_id": AGENT, "answer": answer, "mode": "sentences"},
        )
        if status != 200:
            raise RuntimeError(f"the lone check answered {status}: {raw[:300]!r}")
        return round((time.perf_counter() - started) * 1000, 1)
    finally:
        caller.close()


def _table(result: dict[str, Any]) -> str:
    """B's medians and p95s per phase (ms), then A's answers."""
    calls = ("settings_read", "retrieve", "grounding_check")
    lines = [
        f"{'phase':<25}" + "".join(f"{'B ' + call:>22}" for call in calls) + "   A's answers",
        f"{'':<25}" + "".join(f"{'median / p95 ms':>22}" for _ in calls),
    ]
    for phase, figures in result["phases"].items():
        pairs = [f"{figures[call]['median_ms']} / {figures[call]['p95_ms']}" for call in calls]
        cells = "".join(f"{pair:>22}" for pair in pairs)
        answers = ", ".join(
            f"{k}: {v}" for k, v in figures.get("flood", {}).get("answers", {}).items()
        )
        lines.append(f"{phase:<25}{cells}   {answers or '-'}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=RESULTS / "fairness.json")
    parser.add_argument("--calls", type=int, default=30, help="B's calls of each kind per phase")
    parser.add_argument("--flood-callers", type=int, default=8)
    parser.add_argument("--flood-lead-s", type=float, default=2.0)
    parser.add_argument(
        "--window-s", type=float, default=20.0, help="B's calls spread over this long"
    )
    parser.add_argument(
        "--model-dir", type=Path, default=Path(tempfile.gettempdir()) / "kbgate-bench-models"
    )
    args = parser.parse_args()
    env = {"KBGATE_PLATFORM_KEY": PLATFORM_KEY, "KBGATE_MODEL_CACHE_DIR": str(args.model_dir)}
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kbgate-fairness-") as scratch:
        gateway = GatewayProcess(Path(scratch) / "data", env)
        gateway.start()
        try:
            a, b = _setup(gateway.url, "a"), _setup(gateway.url, "b")
            _measure_b(gateway.url, b, 5, "warm-up")
            lone_check_ms = _single_check_ms(gateway.url, a, BUDGET_ANSWER)
            print("  idle", file=sys.stderr)
            phases = {
                "idle": _measure_b(gateway.url, b, args.calls, "idle", window_s=args.window_s)
            }
            for phase, answer, honour in (
                ("audit_flood", AUDIT_ANSWER, True),
                ("budget_flood", BUDGET_ANSWER, True),
                ("budget_flood_no_backoff", BUDGET_ANSWER, False),
            ):
                print(f"  {phase}", file=sys.stderr)
                flood = Flood(gateway.url, a, answer, args.flood_callers, honour)
                phases[phase] = _phase_under_flood(flood, b, args, phase)
        finally:
            gateway.stop()
    result = {
        "command": "uv run python -m bench.fairness " + " ".join(sys.argv[1:]),
        "cpu_count": os.cpu_count(),
        "configuration": "gateway defaults (2 expensive requests per workspace, budget "
        "20,000 characters and 200 sentences, expensive pool one thread per core)",
        "passages_per_workspace": len(_passages()),
        "audit_answer": {"characters": len(AUDIT_ANSWER), "sentences": 2800},
        "budget_answer": {"characters": len(BUDGET_ANSWER), "sentences": 200},
        "lone_budget_check_ms": lone_check_ms,
        "flood_callers": args.flood_callers,
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "phases": phases,
        "notes": (
            "B's calls are sequential, settings read, retrieve and a two-sentence grounding "
            "check in turn, their starts spread evenly over window_s, each retrieve a new "
            "question. A's callers run in a "
            "separate process, one keep-alive connection each, from flood_lead_s before B's "
            "first call to after its last; a 429 is followed by its Retry-After wait "
            "(budget_flood_no_backoff: by the next request at once, as a client ignoring "
            "Retry-After), any other answer by the next request at once. answers: A's "
            "answers by status (200_<grounding status>; 429 by cause). Gateway, flood and "
            "B's client share the machine's cores."
        ),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(_table(result))


if __name__ == "__main__":
    main()
