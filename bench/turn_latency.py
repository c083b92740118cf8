"""The retrieval turn over HTTP against its in-process floor (embed + search), in one run.

1. Ingests the SciFact corpus once into `--data-dir` through the real ingest path
   (provisioning and document writes of the gateway core); later runs find every
   document unchanged and embed nothing.
2. Floor: in-process, per question, the two steps a turn cannot avoid — embedding the
   question (dense + BM25) and the one engine call of its KB (dense and keyword legs).
3. HTTP: a real `kbgate serve` on the same data dir; `POST /v1/retrieve` at each
   concurrency, questions from SciFact's queries, redaction on (the default) and off.
Reports median and p99 latency, turns per second, and HTTP/floor ratios; writes
`bench/results/turn_latency.json` and a PNG plot.

    uv run python -m bench.turn_latency --data-dir /tmp/kbgate-bench [--concurrency 1 8 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from gateway import knowledge, provisioning
from gateway.auth import Principal
from gateway.errors import ConflictError
from gateway.services import Services, build_services
from gateway.telemetry import Telemetry, build_logger
from gateway.turn import legs_for, plan_turn
from settings.config import load_config
from settings.records import Role
from tests.support.gateway_process import GatewayProcess

DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
RESULTS = Path(__file__).parent / "results"
PLATFORM_KEY = "bench-platform-key-turn-latency"
ORG, TENANT, KB, AGENT = "bench", "scifact", "scifact", "bench-agent"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


async def _prepare(services: Services, data_dir: Path, limit: int | None) -> str:
    """Provision once, ingest (skipping unchanged documents), return a retrieve key."""
    key_file = data_dir / "bench-key.txt"
    try:
        await provisioning.create_org(services, ORG)
        await provisioning.create_workspace(services, ORG, TENANT, None)
        secret, _ = await provisioning.create_key(
            services,
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
        services, principal, KB, name="SciFact", storage="org", settings={}
    )
    await knowledge.put_agent(services, principal, AGENT, [KB], {})
    corpus = _read_jsonl(DATASET / "corpus.jsonl")[:limit]
    started = time.perf_counter()
    for position, doc in enumerate(corpus, start=1):
        await knowledge.put_document(
            services,
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
    return secret


def _principal() -> Principal:
    return Principal(
        key_id="bench",
        roles=frozenset({Role.ADMIN, Role.INGEST, Role.RETRIEVE}),
        org_id=ORG,
        tenant_id=TENANT,
    )


async def _floor(services: Services, questions: list[str]) -> list[float]:
    """Embed + one engine call per question, in-process, sequential (milliseconds)."""
    context = await plan_turn(services, _principal(), AGENT)
    plan = context.plans[0]
    latencies = []
    for question in questions:
        started = time.perf_counter()
        embeddings = services.embedder.embed_queries([question])
        services.index.query(
            plan.collection, plan.scope, legs_for(plan, embeddings, services.config.leg_limit)
        )
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


async def _http(url: str, key: str, questions: list[str], concurrency: int) -> dict[str, float]:
    """Every question once through `POST /v1/retrieve`, `concurrency` callers at a time."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for question in questions:
        queue.put_nowait(question)
    latencies: list[float] = []
    errors = 0
    headers = {"Authorization": f"Bearer {key}"}

    async def caller(client: httpx.AsyncClient) -> None:
        nonlocal errors
        while not queue.empty():
            question = queue.get_nowait()
            started = time.perf_counter()
            response = await client.post(
                "/v1/retrieve", json={"agent_id": AGENT, "question": question}, headers=headers
            )
            latencies.append((time.perf_counter() - started) * 1000)
            errors += response.status_code != 200

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        started = time.perf_counter()
        await asyncio.gather(*(caller(client) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {
        **_summary(latencies),
        "turns_per_s": round(len(questions) / elapsed, 1),
        "errors": errors,
    }


def _summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "median_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
        "n": len(ordered),
    }


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.2))
    for mode, runs in result["http"].items():
        levels = sorted(int(c) for c in runs)
        axis.plot(
            levels,
            [runs[str(c)]["median_ms"] for c in levels],
            marker="o",
            label=f"HTTP median, redaction {mode}",
        )
        axis.plot(
            levels,
            [runs[str(c)]["p99_ms"] for c in levels],
            marker="x",
            linestyle="--",
            label=f"HTTP p99, redaction {mode}",
        )
    axis.axhline(
        result["floor"]["median_ms"],
        color="grey",
        linestyle=":",
        label="in-process floor median (embed + search)",
    )
    axis.set_xscale("log", base=2)
    axis.set_xlabel("concurrent callers")
    axis.set_ylabel("latency (ms)")
    axis.set_title(f"Retrieval turn on SciFact ({result['documents']} documents)")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--limit-docs", type=int, default=None)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
    env = {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(args.data_dir / "models"),
    }
    config = load_config(env, data_dir=args.data_dir)
    questions = [q["text"] for q in _read_jsonl(DATASET / "queries.jsonl")][: args.queries]

    services = await build_services(config, Telemetry(build_logger("WARNING")))
    try:
        key = await _prepare(services, args.data_dir, args.limit_docs)
        documents = len(await knowledge.list_documents(services, _principal(), KB))
        _ = await _floor(services, questions[:20])  # warm-up
        floor = _summary(await _floor(services, questions))
    finally:
        await services.close()

    http: dict[str, dict[str, dict[str, float]]] = {}
    for mode, pii in (("on", True), ("off", False)):
        gateway = GatewayProcess(
            args.data_dir,
            {**env, "KBGATE_RATE_LIMIT_PER_S": "100000", "KBGATE_RATE_LIMIT_BURST": "100000"},
        )
        gateway.start()
        try:
            async with httpx.AsyncClient(base_url=gateway.url) as client:
                auth = {"Authorization": f"Bearer {key}"}
                agent = await client.put(
                    f"/v1/agents/{AGENT}",
                    json={"knowledge_base_ids": [KB], "pii_redaction": pii},
                    headers=auth,
                )
                agent.raise_for_status()
                gates = await client.patch(
                    "/v1/workspace/settings", json={"rag_pii_redaction": pii}, headers=auth
                )
                gates.raise_for_status()
            await _http(gateway.url, key, questions[:20], 1)  # warm-up
            http[mode] = {
                str(c): await _http(gateway.url, key, questions, c) for c in args.concurrency
            }
        finally:
            gateway.stop()

    result: dict[str, Any] = {
        "documents": documents,
        "queries": len(questions),
        "cpu_count": os.cpu_count(),
        "floor": floor,
        "http": http,
        "ratios": {
            mode: {c: round(run["median_ms"] / floor["median_ms"], 2) for c, run in runs.items()}
            for mode, runs in http.items()
        },
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "turn_latency.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot(result, RESULTS / "turn_latency.png")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
