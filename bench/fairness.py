"""Another workspace's calls while one workspace floods each expensive endpoint.

A real `kbgate serve` (default configuration) on a temporary data dir; two workspaces, A
and B, each with a KB of a few dozen short passages and an agent. B's grounding check (two
sentences, sentences mode), redaction (`POST /v1/redact`, a short text), single-document
PUT and retrieve (`POST /v1/retrieve`, a new question each call) are timed one after the
other, `--calls` of each spread over `--window-s`, in these phases:

- idle_0 … idle_3: nothing else runs; one idle window before and after each flood, and
  each flood is held against the mean of its two neighbours;
- redact_flood: A's callers send `/v1/redact` with a JSON value of 2,000 distinct short
  strings (the most the bound allows);
- grounding_flood: A's callers loop the heaviest check the budget allows: sentences mode,
  200 sentences in 19,999 characters;
- bulk_flood: A's callers send bulk writes of 32 documents of 30 sentences each (new
  text every time, so each is embedded and analysed).

A's `--flood-callers` callers run in a process of their own (so their client work does not
hold the measuring process's GIL), one keep-alive connection each, from `--flood-lead-s`
before B's first call until after its last. A caller answered 429 waits its Retry-After,
as a client following the protocol does; any other answer is followed by the next
request at once. A's answers are counted by status. The gateway, the flood and B's
client share this machine's cores. Writes the figures as JSON and prints the matrix:
per flood and B's call, idle median, flooded median, max and the ratio of the medians.

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
#: How long one of A's requests may take (queued behind A's own on a loaded machine).
FLOOD_TIMEOUT_S = 900.0
PLATFORM_KEY = "bench-platform-key-fairness"
ORG, KB, AGENT = "bench", "kb", "bot"
#: The biggest JSON value the bound allows: 2,000 distinct short strings.
BIG_VALUE = [f"row {n}: shipped to Jane Doe in Leeds" for n in range(2000)]
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

    def __init__(self, url: str, headers: dict[str, str], timeout_s: float = 120.0) -> None:
        parts = urlsplit(url)
        self._connection = http.client.HTTPConnection(
            parts.hostname or "", parts.port, timeout=timeout_s
        )
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

    def request_raw(
        self, method: str, path: str, payload: bytes, content_type: str
    ) -> tuple[int, dict[str, str], bytes]:
        headers = {**self._headers, "Content-Type": content_type}
        self._connection.request(method, path, body=payload, headers=headers)
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


def _b_calls(n: int, phase: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    """B's calls of round `n`: (name, method, path, body)."""
    name, what = _TOPICS[n % len(_TOPICS)]
    return [
        (
            "grounding",
            "POST",
            "/v1/grounding/check",
            {
                "agent_id": AGENT,
                "answer": f"{name.capitalize()} is made of {what}. It keeps {n} weeks.",
                "mode": "sentences",
            },
        ),
        (
            "redact",
            "POST",
            "/v1/redact",
            {"agent_id": AGENT, "text": f"Ask Jane Doe ({phase} {n}) at jane{n}@example.com."},
        ),
        (
            "put",
            "PUT",
            f"/v1/knowledge-bases/{KB}/documents/{phase}-{n}",
            {
                "text": f"Kitchen note {n} ({phase}): {name} is made of {what}.",
                "classification": "internal",
            },
        ),
        (
            "retrieve",
            "POST",
            "/v1/retrieve",
            {"agent_id": AGENT, "question": f"{phase} {n}: what is {name} made of?"},
        ),
    ]


B_CALLS = ("grounding", "redact", "put", "retrieve")


def _measure_b(
    url: str, headers: dict[str, str], calls: int, phase: str, *, window_s: float = 0.0
) -> dict[str, Any]:
    """B's grounding check, redaction, document PUT and retrieve in turn, `calls` of each,
    their starts spread evenly over `window_s`; every answer must be 200."""
    caller = _Caller(url, headers)
    timings: dict[str, list[float]] = {name: [] for name in B_CALLS}
    began = time.perf_counter()
    try:
        for n in range(calls):
            time.sleep(max(0.0, began + n * window_s / calls - time.perf_counter()))
            for name, method, path, body in _b_calls(n, phase):
                started = time.perf_counter()
                status, _, answer = caller.request(method, path, body)
                timings[name].append((time.perf_counter() - started) * 1000)
                if status != 200:
                    raise RuntimeError(f"B's {method} {path} answered {status}: {answer[:300]!r}")
    finally:
        caller.close()
    return {name: _summary(times) for name, times in timings.items()}


@dataclass(frozen=True)
class Flood:
    """Which endpoint A's callers flood."""

    url: str
    headers: dict[str, str]
    endpoint: str
    callers: int


def _flood_request(flood: Flood, caller: int, n: int) -> tuple[str, str, Any]:
    """A's request number `n` of caller `caller`: (method, path, body)."""
    if flood.endpoint == "redact":
        return "POST", "/v1/redact", {"agent_id": AGENT, "value": BIG_VALUE}
    if flood.endpoint == "grounding":
        return (
            "POST",
            "/v1/grounding/check",
            {"agent_id": AGENT, "answer": BUDGET_ANSWER, "mode": "sentences"},
        )
    lines = [
        {
            "document_id": f"flood-{caller}-{d}",
            "text": " ".join(
                f"Batch {n} of caller {caller}, document {d}, line {m}: the kettle was "
                "warmed and the leaves steeped."
                for m in range(30)
            ),
            "classification": "internal",
        }
        for d in range(32)
    ]
    return "POST", f"/v1/knowledge-bases/{KB}/documents", lines


def _flood_caller(flood: Flood, caller_number: int, stop: Event) -> dict[str, Any]:
    """One of A's callers: its endpoint again and again until `stop`. A bulk write queued
    behind the workspace's own may take minutes on a loaded machine: no client timeout
    short of that; a failed request is counted, and the connection made anew."""
    caller = _Caller(flood.url, flood.headers, timeout_s=FLOOD_TIMEOUT_S)
    counts: Counter[str] = Counter()
    n = 0
    try:
        while not stop.is_set():
            method, path, body = _flood_request(flood, caller_number, n)
            n += 1
            try:
                if isinstance(body, list):
                    status, response_headers, _ = caller.request_raw(
                        method,
                        path,
                        b"".join(json.dumps(line).encode() + b"\n" for line in body),
                        "application/x-ndjson",
                    )
                else:
                    status, response_headers, _ = caller.request(method, path, body)
            except (OSError, http.client.HTTPException) as error:
                counts[type(error).__name__] += 1
                caller.close()
                caller = _Caller(flood.url, flood.headers, timeout_s=FLOOD_TIMEOUT_S)
                continue
            counts[str(status)] += 1
            if status == 429:
                stop.wait(float(response_headers.get("retry-after", "1")))
    finally:
        caller.close()
    return {"counts": counts}


def _flood(flood: Flood, stop: Event, out: Queue[Any]) -> None:
    """A's callers, each on a thread of this (separate) process, until `stop`; their
    tallies into `out`."""
    with ThreadPoolExecutor(flood.callers) as pool:
        runs = list(pool.map(lambda n: _flood_caller(flood, n, stop), range(flood.callers)))
    counts: Counter[str] = Counter()
    for run in runs:
        counts.update(run["counts"])
    out.put({"answers": dict(sorted(counts.items()))})


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
        tally = out.get(timeout=FLOOD_TIMEOUT_S + 60)
        process.join(timeout=30)
    return {**b, "flood": {**tally, "window_s": round(window + args.flood_lead_s, 1)}}


def _matrix(phases: dict[str, Any]) -> list[dict[str, Any]]:
    """Per flood and B's call: the idle median beside it (the mean of the idle windows
    just before and just after the flood, so a drift of the machine's load affects both
    alike), the flooded median and max, and the ratio of the medians."""
    names = list(phases)
    rows = []
    for position, phase in enumerate(names):
        if phase.startswith("idle"):
            continue
        before, after = phases[names[position - 1]], phases[names[position + 1]]
        for call in B_CALLS:
            idle = round((before[call]["median_ms"] + after[call]["median_ms"]) / 2, 1)
            figures = phases[phase][call]
            rows.append(
                {
                    "flood": phase,
                    "call": call,
                    "idle_median_ms": idle,
                    "median_ms": figures["median_ms"],
                    "p95_ms": figures["p95_ms"],
                    "max_ms": figures["max_ms"],
                    "ratio": round(figures["median_ms"] / idle, 2),
                }
            )
    return rows


def _table(result: dict[str, Any]) -> str:
    """The matrix, then A's answers per flood."""
    lines = [
        f"{'A floods':<17}{'B calls':<11}{'idle median':>12}{'median':>9}{'p95':>9}"
        f"{'max':>9}{'ratio':>7}",
    ]
    for row in result["matrix"]:
        lines.append(
            f"{row['flood']:<17}{row['call']:<11}{row['idle_median_ms']:>12}"
            f"{row['median_ms']:>9}{row['p95_ms']:>9}{row['max_ms']:>9}{row['ratio']:>7}"
        )
    for phase, figures in result["phases"].items():
        if "flood" in figures:
            answers = ", ".join(f"{k}: {v}" for k, v in figures["flood"]["answers"].items())
            lines.append(f"A's answers, {phase}: {answers}")
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
            phases: dict[str, Any] = {}
            for number, endpoint in enumerate(("redact", "grounding", "bulk")):
                print(f"  idle_{number}", file=sys.stderr)
                phases[f"idle_{number}"] = _measure_b(
                    gateway.url, b, args.calls, f"idle{number}", window_s=args.window_s
                )
                phase = f"{endpoint}_flood"
                print(f"  {phase}", file=sys.stderr)
                flood = Flood(gateway.url, a, endpoint, args.flood_callers)
                phases[phase] = _phase_under_flood(flood, b, args, phase)
            print("  idle_3", file=sys.stderr)
            phases["idle_3"] = _measure_b(
                gateway.url, b, args.calls, "idle3", window_s=args.window_s
            )
        finally:
            gateway.stop()
    result = {
        "command": "uv run python -m bench.fairness " + " ".join(sys.argv[1:]),
        "cpu_count": os.cpu_count(),
        "configuration": "gateway defaults (2 expensive requests per workspace, run slots "
        "one per core shared by least slot time; grounding budget 20,000 characters and "
        "200 sentences; /v1/redact at most 2,000 strings)",
        "passages_per_workspace": len(_passages()),
        "flood_callers": args.flood_callers,
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "matrix": _matrix(phases),
        "phases": phases,
        "notes": (
            "B's calls are sequential, grounding check (two sentences, sentences mode), "
            "redaction of a short text, a one-sentence document PUT and a retrieve (a new "
            "question each) in turn, their starts spread evenly over window_s. A's callers "
            "run in a separate process, one keep-alive connection each, from flood_lead_s "
            "before B's first call to after its last; a 429 is followed by its Retry-After "
            "wait, any other answer by the next request at once. answers: A's answers by "
            "status. ratio: flooded median / idle median. Gateway, flood and B's client "
            "share the machine's cores."
        ),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(_table(result))


if __name__ == "__main__":
    main()
