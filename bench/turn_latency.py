"""The retrieval turn over HTTP against its in-process floor (embed + search), in one run.

1. Ingests the SciFact corpus once into `--data-dir` through the real ingest path
   (provisioning and document writes of the gateway core); later runs find every
   document unchanged and embed nothing.
2. Floor: in-process, per question, the engine work a turn cannot avoid — embedding the
   question (dense + BM25), the ranking call of its KB (dense and keyword legs) and the
   read of `top_k` passages' payloads — sequentially, with the gateway's own config.
   Measured before and after the HTTP passes; the floor is all of both. The parallel
   floor does the same work from as many threads as there are callers (concurrency > 1):
   what the cores give without HTTP, framework and turn logic.
3. HTTP: a real `kbgate serve` on the same data dir; `POST /v1/retrieve` with redaction
   on (the default) and off, at each concurrency. Every (redaction, concurrency) pair gets
   a freshly started gateway, so its caches start empty, and two passes:
   - distinct: each question once — every question embedding and almost every passage's
     redaction is computed (cold caches); this is the figure to compare with the floor;
   - repeat: the same questions again on that gateway — question embeddings and
     redactions now come from the caches, while settings, search, fusion, fencing,
     the turn record and HTTP still run: what a caller repeating questions sees.
4. With `--alternate`, instead: one gateway per concurrency serving two agents on the
   same KB, one with redaction on and one with it off (the workspace gate off), every
   caller asking each question of both in turn (which first alternates), so the two
   arms share every second of the machine's load. Reported per arm: median and p99
   latency, and turns per second estimated as callers / mean latency (Little's law:
   what that arm alone would serve); `redaction_on_to_off` holds their ratios.
Reports median and p99 latency, turns per second, their ratios to the floor (and turns
per second to the parallel floor at the same concurrency), the mean
server-side stage times per turn (from /metrics) and the load average around each
pass; writes `bench/results/turn_latency.json` and a PNG plot.

    uv run python -m bench.turn_latency --data-dir /tmp/kbgate-turnbench [--concurrency 1 8 32]
    uv run python -m bench.turn_latency --data-dir /tmp/kbgate-small --limit 300 --queries 60
    uv run python -m bench.turn_latency --data-dir /tmp/kbgate-turnbench-pii --concurrency 1 8 \
        --alternate
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from gateway.access.auth import Principal
from gateway.admin import knowledge, provisioning
from gateway.errors import ConflictError
from gateway.retrieval.kb_plan import KbPlan
from gateway.retrieval.legs import legs_for
from gateway.retrieval.plan import plan_turn
from gateway.runtime.services import Services, build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.engines.edge.engine import EdgeEngine
from ingest.engines.edge.index import EdgeIndex
from ingest.payload import Classification
from settings.config import load_config
from settings.records import Role
from tests.support.gateway_process import GatewayProcess

DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
RESULTS = Path(__file__).parent / "results"
PLATFORM_KEY = "bench-platform-key-turn-latency"
ORG, TENANT, KB, AGENT = "bench", "scifact", "scifact", "bench-agent"
AGENT_REDACTING = "bench-agent-redacting"
#: The bench's callers are never rate limited, per key or per workspace.
_UNLIMITED = {
    "KBGATE_RATE_LIMIT_PER_S": "100000",
    "KBGATE_RATE_LIMIT_BURST": "100000",
    "KBGATE_RATE_LIMIT_WORKSPACE_PER_S": "100000",
    "KBGATE_RATE_LIMIT_WORKSPACE_BURST": "100000",
}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


async def _prepare(services: Services, data_dir: Path, limit: int | None) -> str:
    """Provision once, ingest (skipping unchanged documents), return a retrieve key."""
    key_file = data_dir / "bench-key.txt"
    try:
        await provisioning.create_org(services.store, services.index, ORG)
        await provisioning.create_workspace(services.store, ORG, TENANT, None)
        secret, _ = await provisioning.create_key(
            services.store,
            org_id=ORG,
            tenant_id=TENANT,
            roles=["admin", "ingest", "retrieve"],
            clearance=None,
        )
        key_file.write_text(secret)
    except ConflictError:
        secret = key_file.read_text().strip()
    principal = _principal()
    await knowledge.put_knowledge_base(
        services.knowledge, principal, KB, name="SciFact", storage="org", settings={}
    )
    await knowledge.put_agent(services.knowledge, principal, AGENT, [KB], {})
    corpus = _read_jsonl(DATASET / "corpus.jsonl")[:limit]
    started = time.perf_counter()
    for position, doc in enumerate(corpus, start=1):
        await knowledge.put_document(
            services.documents,
            principal,
            KB,
            str(doc["_id"]),
            text=doc["text"],
            classification="public",
            title=doc.get("title", ""),
            source="scifact",
        )
        if position % 500 == 0:
            rate = position / (time.perf_counter() - started)
            print(f"  ingested {position}/{len(corpus)} ({rate:.1f} docs/s)", file=sys.stderr)
    # As a gateway started on this data dir would, before the floor is measured.
    await services.index.optimize()
    return secret


def _principal() -> Principal:
    return Principal(
        key_id="bench",
        roles=frozenset({Role.ADMIN, Role.INGEST, Role.RETRIEVE}),
        org_id=ORG,
        tenant_id=TENANT,
        clearance=Classification.RESTRICTED,  # as the bench's key (admin keys are restricted)
    )


def _floor_step(services: Services, plan: KbPlan, question: str) -> None:
    """The engine work of one turn: embed the question, rank its KB, read `top_k` payloads
    (here the dense leg's first)."""
    engine = _engine(services)
    embeddings = services.embedder.embed_queries([question])
    legs = legs_for(
        plan,
        embeddings,
        services.config.leg_limit,
        document_keywords=engine.document_keywords(plan.collection),
    )
    ranked = engine.rank(plan.collection, plan.scope, legs)
    chosen = [point.point_id for point in ranked.legs[0][: plan.top_k.value]]
    engine.fetch(plan.collection, plan.scope, chosen)


def _engine(services: Services) -> EdgeEngine:
    """The embedded engine the floor calls directly (no worker thread, no deadline)."""
    index = services.index
    if not isinstance(index, EdgeIndex):
        raise SystemExit("the turn benchmark measures the embedded engine (Qdrant Edge)")
    return index.engine


async def _floor(services: Services, questions: list[str]) -> tuple[list[float], float]:
    """Per question, in-process and sequential, the engine work a turn cannot avoid.
    Latencies (ms) and the CPU time of this process (all threads) per question (ms)."""
    context = await plan_turn(services.planning, _principal(), AGENT)
    plan = context.plans[0]
    latencies = []
    cpu = time.process_time()
    for question in questions:
        started = time.perf_counter()
        _floor_step(services, plan, question)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies, (time.process_time() - cpu) * 1000 / max(1, len(questions))


async def _parallel_floor(
    services: Services, questions: list[str], concurrency: int
) -> tuple[float, float]:
    """The same engine work from `concurrency` threads at once, each question once: what
    this machine's cores give with no HTTP, framework or turn logic. Questions per second
    and CPU time per question (ms)."""
    context = await plan_turn(services.planning, _principal(), AGENT)
    plan = context.plans[0]
    cpu = time.process_time()
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda question: _floor_step(services, plan, question), questions))
    elapsed = time.perf_counter() - started
    turns = max(1, len(questions))
    return turns / elapsed, (time.process_time() - cpu) * 1000 / turns


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Caller:
    """One caller's keep-alive HTTP/1.1 connection (stdlib `http.client`).

    The load runs on the gateway's two cores, so the client must cost little: this one
    takes about 0.3 ms of CPU per request, where httpx took 1.8 ms (and 2.5 ms of round
    trip for `GET /health/live`, against 1.1 ms), which the turn's latency then carried.
    """

    def __init__(self, url: str, key: str) -> None:
        parts = urlsplit(url)
        self._connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
        self._connection.connect()
        self._headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> tuple[int, bytes]:
        payload = json.dumps(body).encode() if body is not None else None
        try:
            return self._send(method, path, payload)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closes a keep-alive connection left idle past its timeout
            # (uvicorn: 5 s); the request never reached it: send it on a new connection.
            self._connection.close()
            self._connection.connect()
            return self._send(method, path, payload)

    def _send(self, method: str, path: str, payload: bytes | None) -> tuple[int, bytes]:
        self._connection.request(method, path, body=payload, headers=self._headers)
        response = self._connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self._connection.close()


def _http(
    url: str,
    key: str,
    questions: list[str],
    concurrency: int,
    server_pid: int,
    *,
    beside: Callable[[str], None] | None = None,
    arms: dict[str, list[float]] | None = None,
) -> dict[str, Any]:
    """Every question once through `POST /v1/retrieve`, `concurrency` callers at a time:
    one thread and one connection per caller. `beside` (one caller only): the floor's work
    for each question, run just before its request and timed as `interleaved_floor`.
    `arms` (agent id -> latencies, filled in): each question asked of every agent of it,
    the order turning with each question."""
    waiting = deque(enumerate(questions))
    latencies: list[float] = []
    statuses: list[int] = []
    floor_latencies: list[float] = []
    callers = [_Caller(url, key) for _ in range(concurrency)]
    agents = list(arms) if arms else [AGENT]

    def call(caller: _Caller) -> None:
        while True:
            try:
                number, question = waiting.popleft()
            except IndexError:
                return
            if beside is not None:
                started = time.perf_counter()
                beside(question)
                floor_latencies.append((time.perf_counter() - started) * 1000)
            turn = number % len(agents)
            for agent in agents[turn:] + agents[:turn]:
                started = time.perf_counter()
                status, _ = caller.request(
                    "POST", "/v1/retrieve", {"agent_id": agent, "question": question}
                )
                elapsed_ms = (time.perf_counter() - started) * 1000
                latencies.append(elapsed_ms)
                statuses.append(status)
                if arms is not None:
                    arms[agent].append(elapsed_ms)

    before = _stage_totals(url)
    load_before = os.getloadavg()[0]
    server_cpu = _cpu_seconds(server_pid)
    started = time.perf_counter()
    if beside is not None and concurrency != 1:
        raise ValueError("the floor is interleaved with one caller only")
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(call, callers))
    # The interleaved floor's own time is not the gateway's.
    elapsed = time.perf_counter() - started - sum(floor_latencies) / 1000
    server_cpu = _cpu_seconds(server_pid) - server_cpu
    load_after = os.getloadavg()[0]
    after = _stage_totals(url)
    for caller in callers:
        caller.close()
    turns = max(1, len(latencies))
    interleaved = {}
    if floor_latencies:
        floor_median = statistics.median(floor_latencies)
        interleaved = {
            "interleaved_floor_median_ms": round(floor_median, 2),
            "ratio_to_interleaved_floor": round(statistics.median(latencies) / floor_median, 2),
        }
    return {
        **_summary(latencies),
        **interleaved,
        "turns_per_s": round(len(latencies) / elapsed, 1),
        "errors": sum(status != 200 for status in statuses),
        "server_cpu_ms_per_turn": round(server_cpu * 1000 / turns, 2),
        "server_stage_mean_ms": {
            stage: round((after[stage] - before.get(stage, 0.0)) * 1000 / turns, 2)
            for stage in sorted(after)
        },
        "load_average_1m": [round(load_before, 2), round(load_after, 2)],
    }


def _http_floor(url: str, key: str, requests: int = 300) -> float:
    """Median round trip of `GET /health/live` (ms): HTTP and the framework, no turn."""
    caller = _Caller(url, key)
    try:
        times = []
        for _ in range(requests):
            started = time.perf_counter()
            caller.request("GET", "/health/live")
            times.append((time.perf_counter() - started) * 1000)
    finally:
        caller.close()
    return round(statistics.median(times), 2)


_STAGE_SUM = re.compile(r'^kbgate_stage_seconds_sum\{stage="turn_(\w+)"\} (\S+)$', re.MULTILINE)


def _stage_totals(url: str) -> dict[str, float]:
    """Seconds spent so far in each turn stage, summed over turns (Prometheus text; /metrics
    answers to the platform key)."""
    caller = _Caller(url, PLATFORM_KEY)
    try:
        _, body = caller.request("GET", "/metrics")
    finally:
        caller.close()
    return {stage: float(value) for stage, value in _STAGE_SUM.findall(body.decode())}


def _summary(latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "median_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
        "n": len(ordered),
    }


def _ratios(run: dict[str, Any], floor: dict[str, Any]) -> dict[str, float]:
    """Latency as a multiple of the floor's; throughput as a multiple of the floor's rate;
    the server's CPU time per turn as a multiple of the floor's per question."""
    return {
        "median": round(run["median_ms"] / floor["median_ms"], 2),
        "p99": round(run["p99_ms"] / floor["p99_ms"], 2),
        "turns_per_s": round(run["turns_per_s"] / floor["turns_per_s"], 2),
        "cpu_per_turn": round(run["server_cpu_ms_per_turn"] / floor["cpu_ms_per_question"], 2),
    }


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7.5, 4.5))
    for mode, runs in result["http"].items():
        levels = sorted(int(c) for c in runs)
        for kind, marker in (("distinct", "o"), ("repeat", "s")):
            axis.plot(
                levels,
                [runs[str(c)][kind]["median_ms"] for c in levels],
                marker=marker,
                label=f"median, redaction {mode}, {kind}",
            )
        axis.plot(
            levels,
            [runs[str(c)]["distinct"]["p99_ms"] for c in levels],
            marker="x",
            linestyle="--",
            label=f"p99, redaction {mode}, distinct",
        )
    axis.axhline(
        result["floor"]["median_ms"],
        color="grey",
        linestyle=":",
        label="in-process floor median (embed + rank + fetch)",
    )
    axis.set_xscale("log", base=2)
    axis.set_xlabel("concurrent callers")
    axis.set_ylabel("latency (ms)")
    axis.set_yscale("log")
    axis.set_title(f"Retrieval turn over HTTP on SciFact ({result['documents']} documents)")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--limit", "--limit-docs", dest="limit", type=int, default=None)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--redaction", nargs="+", choices=["on", "off"], default=["on", "off"])
    parser.add_argument("--output", type=Path, default=RESULTS / "turn_latency.json")
    parser.add_argument(
        "--alternate",
        action="store_true",
        help="redaction on and off side by side: one gateway, two agents, requests alternated",
    )
    parser.add_argument(
        "--env",
        nargs="*",
        default=[],
        metavar="KBGATE_NAME=VALUE",
        help="configuration for the floor and the gateway alike, e.g. KBGATE_EMBEDDING_THREADS=1",
    )
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    if any(not name.startswith("KBGATE_") for name in extra):
        parser.error("--env takes KBGATE_* variables only")
    env = {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(args.data_dir / "models"),
        **extra,
    }
    config = load_config(env, data_dir=args.data_dir)
    questions = [q["text"] for q in _read_jsonl(DATASET / "queries.jsonl")][: args.queries]
    load_start = os.getloadavg()

    services = await build_services(config, Telemetry(build_logger("WARNING")))
    try:
        key = await _prepare(services, args.data_dir, args.limit)
        documents = len(
            await knowledge.list_documents(services.store, services.index, _principal(), KB)
        )
        _ = await _floor(services, questions[:20])  # warm-up
        floor_before, cpu_before = await _floor(services, questions)
        parallel_before = {
            c: await _parallel_floor(services, questions, c) for c in args.concurrency if c > 1
        }
    finally:
        await services.close()

    if args.alternate:
        http = await _alternated_passes(args, env, key, questions)
    else:
        http = await _all_passes(args, env, key, questions)

    services = await build_services(config, Telemetry(build_logger("WARNING")))
    try:
        floor_after, cpu_after = await _floor(services, questions)
        parallel_after = {
            c: await _parallel_floor(services, questions, c) for c in args.concurrency if c > 1
        }
    finally:
        await services.close()
    floor = _summary(floor_before + floor_after)
    floor["turns_per_s"] = round(1000 / statistics.mean(floor_before + floor_after), 1)
    floor["median_ms_before_http"] = round(statistics.median(floor_before), 2)
    floor["median_ms_after_http"] = round(statistics.median(floor_after), 2)
    floor["cpu_ms_per_question"] = round((cpu_before + cpu_after) / 2, 2)
    parallel = {
        str(c): {
            "turns_per_s": round((parallel_before[c][0] + parallel_after[c][0]) / 2, 1),
            "turns_per_s_before_http": round(parallel_before[c][0], 1),
            "turns_per_s_after_http": round(parallel_after[c][0], 1),
            "cpu_ms_per_question": round((parallel_before[c][1] + parallel_after[c][1]) / 2, 2),
        }
        for c in parallel_before
    }

    result: dict[str, Any] = {
        "command": "uv run python -m bench.turn_latency " + " ".join(sys.argv[1:]),
        "documents": documents,
        "queries": len(questions),
        "cpu_count": os.cpu_count(),
        "configuration": extra,
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "floor": floor,
        "parallel_floor": parallel,
        "http": http,
        "ratios_to_floor": {
            mode: {
                c: {kind: _ratios(run[kind], floor) for kind in ("distinct", "repeat")}
                for c, run in runs.items()
            }
            for mode, runs in http.items()
        },
        "turns_per_s_to_parallel_floor": {
            mode: {
                c: {
                    kind: round(run[kind]["turns_per_s"] / parallel[c]["turns_per_s"], 2)
                    for kind in ("distinct", "repeat")
                }
                for c, run in runs.items()
                if c in parallel
            }
            for mode, runs in http.items()
        },
        "redaction_on_to_off": _on_to_off(http),
        "notes": (
            "redaction_on_to_off: per concurrency and pass, the turn's median latency and "
            "turns per second with redaction on over the same with it off (the two run "
            "one after the other at each concurrency). "
            "floor: in-process embed + the ranking call + reading top_k payloads per "
            "question, sequential, measured before and after the HTTP passes. "
            "distinct: each question once on a freshly started gateway (caches empty). "
            "repeat: the same questions again on that gateway (question embeddings and "
            "redactions cached; search, fusion, fencing, turn record and HTTP still run). "
            "The HTTP client runs on the same 2 cores: one thread and one keep-alive "
            "stdlib http.client connection per caller (about 0.3 ms of CPU per request); "
            "health_live_round_trip_ms: GET /health/live, HTTP and framework alone. "
            "parallel_floor: the floor's work from as many threads as callers, each "
            "question once (the mean of a measurement before and one after the HTTP "
            "passes): the most this machine gives at that concurrency without HTTP, "
            "framework and turn logic; turns_per_s_to_parallel_floor compares with it. "
            "interleaved_floor (one caller, distinct pass): the floor's work for each "
            "question run in this process on a copy of the store just before the question's "
            "request, so floor and turn are timed in the same seconds (its services opened "
            "afresh for each pass, as the gateway is); "
            "ratio_to_interleaved_floor: the turn's median over that floor's median. "
            "cpu: CPU time of the gateway process "
            "(all threads) per turn, against the floor's per question: a figure the other "
            "load on the machine disturbs less than latency."
        ),
    }
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    _plot(result, args.output.with_suffix(".png"))
    print(json.dumps(result, indent=2))


def _on_to_off(http: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Redaction on over off: median latency and turns per second, per concurrency and pass."""
    if not {"on", "off"} <= set(http):
        return {}
    return {
        c: {
            kind: {
                "median_ms": round(
                    http["on"][c][kind]["median_ms"] / http["off"][c][kind]["median_ms"], 3
                ),
                "turns_per_s": round(
                    http["on"][c][kind]["turns_per_s"] / http["off"][c][kind]["turns_per_s"], 3
                ),
            }
            for kind in ("distinct", "repeat")
        }
        for c in http["on"]
        if c in http["off"]
    }


async def _alternated_passes(
    args: argparse.Namespace, env: dict[str, str], key: str, questions: list[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per concurrency, one fresh gateway serving both arms, requests alternated."""
    http: dict[str, dict[str, dict[str, Any]]] = {"on": {}, "off": {}}
    for concurrency in args.concurrency:
        print(f"  HTTP redaction on and off alternated, concurrency {concurrency}", file=sys.stderr)
        gateway = GatewayProcess(
            args.data_dir,
            {**env, **_UNLIMITED},
        )
        gateway.start()
        try:
            async with httpx.AsyncClient(base_url=gateway.url) as client:
                auth = {"Authorization": f"Bearer {key}"}
                for agent, redaction in ((AGENT, False), (AGENT_REDACTING, True)):
                    response = await client.put(
                        f"/v1/agents/{agent}",
                        json={"knowledge_base_ids": [KB], "pii_redaction": redaction},
                        headers=auth,
                    )
                    response.raise_for_status()
                gates = await client.patch(
                    "/v1/workspace/settings", json={"rag_pii_redaction": False}, headers=auth
                )
                gates.raise_for_status()
                await _line_measured(client, auth, AGENT, env)
            warm = [f"warm-up question {i} about cells and proteins" for i in range(8)]
            _http(gateway.url, key, warm, 1, gateway.pid, arms={AGENT: [], AGENT_REDACTING: []})
            for kind, repeat in (("distinct", questions), ("repeat", questions)):
                arms: dict[str, list[float]] = {AGENT_REDACTING: [], AGENT: []}
                run = _http(gateway.url, key, repeat, concurrency, gateway.pid, arms=arms)
                for mode, agent in (("on", AGENT_REDACTING), ("off", AGENT)):
                    mean_s = statistics.mean(arms[agent]) / 1000
                    http[mode].setdefault(str(concurrency), {})[kind] = {
                        **_summary(arms[agent]),
                        "turns_per_s": round(concurrency / mean_s, 1),
                        "errors": run["errors"],
                        # both arms' turns together: CPU and stages are not split by agent
                        "server_cpu_ms_per_turn": run["server_cpu_ms_per_turn"],
                        "server_stage_mean_ms": run["server_stage_mean_ms"],
                        "load_average_1m": run["load_average_1m"],
                    }
        finally:
            gateway.stop()
    return http


async def _all_passes(
    args: argparse.Namespace, env: dict[str, str], key: str, questions: list[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Every redaction mode at every concurrency, each on a fresh gateway."""
    http: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="kbgate-floor-") as scratch:
        # The floor beside one caller runs on a copy: the gateway holds the store's lock.
        copy = Path(scratch) / "data"
        shutil.copytree(args.data_dir, copy, ignore=shutil.ignore_patterns("models"))
        # Redaction on and off side by side at each concurrency, so both see the same load.
        for concurrency in args.concurrency:
            for mode in args.redaction:
                print(f"  HTTP redaction {mode}, concurrency {concurrency}", file=sys.stderr)
                async with _floor_beside(copy, env, concurrency) as beside:
                    http.setdefault(mode, {})[str(concurrency)] = await _passes(
                        args.data_dir,
                        env,
                        key,
                        questions,
                        concurrency,
                        redaction=mode == "on",
                        beside=beside,
                    )
    return http


@asynccontextmanager
async def _floor_beside(
    copy: Path, env: dict[str, str], concurrency: int
) -> AsyncIterator[Callable[[str], None] | None]:
    """For one caller, the floor's step on services opened afresh on the store's copy, so
    its index starts each pass as the fresh gateway's does (nothing of a previous pass
    remembered); None for more callers."""
    if concurrency != 1:
        yield None
        return
    services = await build_services(
        load_config(env, data_dir=copy), Telemetry(build_logger("WARNING"))
    )
    try:
        plan = (await plan_turn(services.planning, _principal(), AGENT)).plans[0]
        yield lambda question: _floor_step(services, plan, question)
    finally:
        await services.close()


async def _passes(
    data_dir: Path,
    env: dict[str, str],
    key: str,
    questions: list[str],
    concurrency: int,
    *,
    redaction: bool,
    beside: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """A fresh gateway (empty caches): the distinct pass, then the repeat pass; `beside`
    interleaves the floor with the distinct pass's requests (one caller)."""
    gateway = GatewayProcess(
        data_dir,
        {**env, **_UNLIMITED},
    )
    gateway.start()
    try:
        async with httpx.AsyncClient(base_url=gateway.url) as client:
            auth = {"Authorization": f"Bearer {key}"}
            agent = await client.put(
                f"/v1/agents/{AGENT}",
                json={"knowledge_base_ids": [KB], "pii_redaction": redaction},
                headers=auth,
            )
            agent.raise_for_status()
            gates = await client.patch(
                "/v1/workspace/settings", json={"rag_pii_redaction": redaction}, headers=auth
            )
            gates.raise_for_status()
            # Warm the process (first model run, code paths) with questions not measured.
            warm = [f"warm-up question {i} about cells and proteins" for i in range(8)]
            for question in warm:
                response = await client.post(
                    "/v1/retrieve", json={"agent_id": AGENT, "question": question}, headers=auth
                )
                response.raise_for_status()
            await _line_measured(client, auth, AGENT, env)
        pid = gateway.pid
        http_floor = _http_floor(gateway.url, key)
        distinct = _http(gateway.url, key, questions, concurrency, pid, beside=beside)
        repeat = _http(gateway.url, key, questions, concurrency, pid)
    finally:
        gateway.stop()
    return {"distinct": distinct, "repeat": repeat, "health_live_round_trip_ms": http_floor}


async def _line_measured(
    client: httpx.AsyncClient, auth: dict[str, str], agent: str, env: dict[str, str]
) -> None:
    """Wait until the KB's off-topic line is in force, as on a gateway serving a while (its
    measurement runs in the background from the first turn), unless lines are off."""
    if env.get("KBGATE_OFF_TOPIC_LINE", "on").strip().lower() in {"0", "off", "false", "no"}:
        return
    for _ in range(600):
        response = await client.post(
            "/v1/retrieve", json={"agent_id": agent, "question": "warm-up"}, headers=auth
        )
        response.raise_for_status()
        per_kb = response.json()["effective"]["per_knowledge_base"][KB]
        if per_kb["sources"]["score_threshold"] != "platform":
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the KB's off-topic line was not measured within a minute")


if __name__ == "__main__":
    asyncio.run(main())
