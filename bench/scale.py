"""Scale benchmark: a platform of 1,000 workspaces at 10k, 100k and 1M passages.

For each size, in one run:

1. **Build** a store through the real write path: orgs, workspaces and knowledge bases
   provisioned by the gateway core, passages written by the Qdrant Edge adapter
   (`EdgeIndex.upsert`: the payload contract, its payload indexes, `sync.point_id`, the
   writer's document versions) into per-org collections and `kb_shared`, then indexed
   by `EdgeIndex.optimize` as `kbgate serve` does at start (timed: the index build).
   Texts and sparse vectors are SciFact's, replayed; dense vectors are SciFact's real
   embeddings replayed with seeded perturbations (`bench.scale_corpus` says exactly how).
2. **Recall**: each leg's recall@10 under full Scopes (tenant, KBs, clearance, org)
   against exact search, for workspaces of every size (`bench.scale_engine`).
3. **Turns**: a real `kbgate serve` on the store (time to live, RSS), `POST /v1/retrieve`
   for a tiny, a median and the largest workspace (retrieve keys of the default
   clearance, agents with all their KBs, redaction off so the index is what is measured),
   interleaved, at one and at eight callers; each question once per gateway.
4. **Off-topic lines**: on a fresh gateway, the time the largest workspace's lines take
   to measure from its first turn, and the tiny workspace's turns (one caller, back to
   back) while they are measured, against after.
5. **Index maintenance**: a burst of writes into the largest workspace (2% of the store,
   at least 10,000 passages: enough for Edge to index) beside a turn's ranking calls
   through the Index port (the worst call is the longest a turn waited; then the call's
   median with the burst searched exactly, as it is until the next start), then a gateway
   start, which builds their indexes before it serves (its time to live and the build it
   logged), and the same ranking call on the indexed store: what building while serving
   would buy.

Stores are kept in the work dir and reused while their manifest matches (phase 5 changes
a store: the next run builds it again).

    uv run python -m bench.scale --work-dir /tmp/kbgate-scale              # 10k, 100k, 1M
    uv run python -m bench.scale --work-dir /tmp/kbgate-scale --max 10000  # CI-sized
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from bench.gateway_start import logged_build_ms, start_live
from bench.scale_corpus import (
    Base,
    Layout,
    PassageStream,
    Plan,
    load_base,
    own_questions,
    plan_documents,
    scifact_questions,
)
from bench.scale_engine import (
    ScopeCase,
    measure_recall,
    rank_median_ms,
    shards_shape,
    writes_beside_turns,
)
from bench.scale_plot import figure
from bench.turn_latency import _Caller, _summary
from gateway.access.auth import Principal
from gateway.admin import knowledge, provisioning
from gateway.runtime.memory import bound_allocator
from gateway.runtime.services import Services, build_embedder, build_services
from gateway.safety.redaction import Redactor
from gateway.telemetry import Telemetry, build_logger
from ingest.embedder.embedding import Embedder
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.engine import EDGE_DIR, EdgeEngine
from ingest.engines.edge.index import EdgeIndex
from ingest.index import Leg, LegKind
from ingest.payload import CLASSIFICATION_ORDER, Classification, Scope
from ingest.sync import DocumentWriter
from settings.config import load_config
from settings.records import Role
from settings.stores.sqlite.store import SqliteStore
from tests.support.gateway_process import GatewayProcess

RESULTS = Path(__file__).parent / "results"
SIZES = (10_000, 100_000, 1_000_000)
PLATFORM_KEY = "bench-platform-key-scale"
AGENT = "scale-agent"
MANIFEST = "scale-manifest.json"
#: bump when the corpus or the layout changes, so old stores are not reused
LAYOUT_VERSION = 1
TURN_SCOPES = ("tiny", "median", "largest")
BURST_SHARE = 0.02
MIN_BURST = 10_000
LINES_TIMEOUT_S = 900.0


def _env(work_dir: Path) -> dict[str, str]:
    return {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(work_dir / "models"),
        "KBGATE_RATE_LIMIT_PER_S": "100000",
        "KBGATE_RATE_LIMIT_BURST": "100000",
        "KBGATE_RATE_LIMIT_WORKSPACE_PER_S": "100000",
        "KBGATE_RATE_LIMIT_WORKSPACE_BURST": "100000",
    }


def _principal(layout: Layout, workspace: int) -> Principal:
    return Principal(
        key_id="scale-bench",
        roles=frozenset({Role.ADMIN, Role.INGEST}),
        org_id=layout.workspace_org[workspace],
        tenant_id=layout.tenant(workspace),
        clearance=Classification.RESTRICTED,
    )


def _ranked_workspaces(plan: Plan) -> list[int]:
    """Non-empty workspaces, largest first."""
    sizes = np.bincount(plan.workspace, weights=plan.passages, minlength=1000)
    return [int(w) for w in np.argsort(-sizes, kind="stable") if sizes[w] > 0]


def turn_workspaces(plan: Plan) -> dict[str, int]:
    ranked = _ranked_workspaces(plan)
    return {
        "largest": ranked[0],
        "median": ranked[len(ranked) // 2],
        "tiny": ranked[min(len(ranked) - 1, int(len(ranked) * 0.9))],
    }


class Store:
    """One size's store: its data dir, plan and manifest."""

    def __init__(self, work_dir: Path, size: int, seed: int, base: Base, layout: Layout) -> None:
        self.size = size
        self.seed = seed
        self.data_dir = work_dir / f"store-{size}"
        self.base = base
        self.layout = layout
        self.plan = plan_documents(size, layout, base, seed)
        self.identity = {
            "size": size,
            "seed": seed,
            "layout_version": LAYOUT_VERSION,
            "base_passages": len(base.passage_texts),
        }

    def manifest(self, *, as_is: bool = False) -> dict[str, Any] | None:
        """The store's manifest if it is this size's store, unchanged since its build (or
        `as_is`: changed by a maintenance phase's burst)."""
        path = self.data_dir / MANIFEST
        if not path.exists():
            return None
        manifest: dict[str, Any] = json.loads(path.read_text())
        unchanged = as_is or not manifest.get("changed")
        return manifest if manifest.get("identity") == self.identity and unchanged else None

    def save(self, manifest: dict[str, Any]) -> None:
        (self.data_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


async def build(
    store: Store, env: dict[str, str], embedder: Embedder, redactor: Redactor
) -> dict[str, Any]:
    """Provision every record, write every passage, index; the manifest with figures."""
    shutil.rmtree(store.data_dir, ignore_errors=True)
    config = load_config(env, data_dir=store.data_dir)  # as `kbgate ingest` runs
    services = await build_services(
        config, Telemetry(build_logger("WARNING")), embedder=embedder, redactor=redactor
    )
    try:
        started = time.perf_counter()
        keys = await _provision(services, store)
        provision_s = time.perf_counter() - started
        started = time.perf_counter()
        stream = PassageStream(
            store.plan, store.layout, store.base, services.documents.writer, store.seed
        )
        written = 0
        for collection, passages in stream.batches():
            await services.index.upsert(collection, passages)
            written += len(passages)
            if written % 50_000 < len(passages):
                rate = written / (time.perf_counter() - started)
                print(f"  {store.size}: wrote {written} ({rate:.0f}/s)", file=sys.stderr)
        upsert_s = time.perf_counter() - started
        started = time.perf_counter()
        await services.index.optimize()
        optimize_s = time.perf_counter() - started
    finally:
        await services.close()
    manifest = {
        "identity": store.identity,
        "keys": keys,
        "build": {
            "passages": written,
            "documents": len(store.plan.passages),
            "provision_s": round(provision_s, 1),
            "upsert_s": round(upsert_s, 1),
            "upsert_passages_per_s": round(written / upsert_s),
            "index_build_s": round(optimize_s, 1),
            "load_average_1m": round(os.getloadavg()[0], 2),
        },
    }
    store.save(manifest)
    return manifest


async def _provision(services: Services, store: Store) -> dict[str, str]:
    """Every org, workspace and KB through the gateway core; a key for each turn scope."""
    layout = store.layout
    for org in layout.orgs:
        await provisioning.create_org(services.store, services.index, org)
    for workspace, kbs in enumerate(layout.workspace_kbs):
        org = layout.workspace_org[workspace]
        await provisioning.create_workspace(services.store, org, layout.tenant(workspace), None)
        principal = _principal(layout, workspace)
        for kb in kbs:
            await knowledge.put_knowledge_base(
                services.knowledge,
                principal,
                kb.kb_id,
                name=kb.kb_id,
                storage=kb.storage,
                settings={},
            )
    keys = {}
    for name, workspace in turn_workspaces(store.plan).items():
        secret, _ = await provisioning.create_key(
            services.store,
            org_id=layout.workspace_org[workspace],
            tenant_id=layout.tenant(workspace),
            roles=["admin", "retrieve"],
            clearance=None,
        )
        keys[name] = secret
    return keys


def recall_cases(store: Store, per_kind: int) -> list[ScopeCase]:
    """Full Scopes of workspaces of every size, in each collection they have points in:
    all KBs at restricted and at public clearance, and the first KB at internal."""
    plan, layout = store.plan, store.layout
    ranked = _ranked_workspaces(plan)
    picks = {0, 1, 4, 9, 29, 99, len(ranked) // 2, int(len(ranked) * 0.9)}
    scifact = scifact_questions()
    cases: list[ScopeCase] = []
    for rank in sorted(r for r in picks if r < len(ranked)):
        workspace = ranked[rank]
        kbs = layout.workspace_kbs[workspace]
        variants = [
            ("all KBs, restricted", range(len(kbs)), Classification.RESTRICTED),
            ("all KBs, public", range(len(kbs)), Classification.PUBLIC),
            ("1 KB, internal", range(1), Classification.INTERNAL),
        ]
        for label, chosen, clearance in variants:
            for storage in sorted({kbs[k].storage for k in chosen}):
                in_storage = [k for k in chosen if kbs[k].storage == storage]
                mask = plan.in_scope(workspace, in_storage, clearance)
                points = int(plan.passages[mask].sum())
                if points == 0:
                    continue
                seed = store.seed + rank * 10 + len(cases)
                start = (seed * 7) % (len(scifact) - per_kind)
                target = layout.target(workspace, in_storage[0])
                cases.append(
                    ScopeCase(
                        name=f"#{rank + 1} {target.tenant_id}, {label}",
                        collection=target.collection,
                        scope=Scope.of(
                            org_id=target.org_id,
                            tenant_id=target.tenant_id,
                            kb_ids=[kbs[k].kb_id for k in in_storage],
                            clearance=clearance,
                        ),
                        points=points,
                        questions=scifact[start : start + per_kind]
                        + own_questions(plan, store.base, mask, per_kind, seed),
                    )
                )
    return cases


def engine_phases(store: Store, embedder: Embedder, per_kind: int) -> dict[str, Any]:
    """Recall of every leg under full Scopes, and the shards' shape."""
    result: dict[str, Any] = {"shards": shards_shape(store.data_dir)}
    index = EdgeEngine(store.data_dir)
    try:
        started = time.perf_counter()
        result["recall"] = measure_recall(
            index, recall_cases(store, per_kind), embedder.embed_queries
        )
        result["recall_s"] = round(time.perf_counter() - started, 1)
    finally:
        index.close()
    return result


def _burst(store: Store, number: int) -> Plan:
    """A burst of ingestion into the largest workspace's first KB: 2% of the store, at
    least enough passages for Edge to index them (about 6,600 fill its threshold)."""
    extra = plan_documents(
        max(MIN_BURST, int(store.size * BURST_SHARE)),
        store.layout,
        store.base,
        store.seed + 1 + number,
        first_number=len(store.plan.passages) + number * 10**6,
    )
    return Plan(
        workspace=np.full_like(extra.workspace, turn_workspaces(store.plan)["largest"]),
        kb=np.zeros_like(extra.kb),
        base_doc=extra.base_doc,
        label=extra.label,
        passages=extra.passages,
        first_number=extra.first_number,
    )


def _write(store: Store, index: BlockingIndex, embedder: Embedder, plan: Plan) -> float:
    stream = PassageStream(plan, store.layout, store.base, DocumentWriter(index, embedder), 99)
    started = time.perf_counter()
    for collection, passages in stream.batches():
        index.upsert(collection, passages)
    return round(time.perf_counter() - started, 1)


def maintenance_phase(store: Store, env: dict[str, str], embedder: Embedder) -> dict[str, Any]:
    """What a burst of writes costs the turns, with builds at start only:

    - while serving: the burst written beside a turn's ranking calls (the largest
      workspace's, through the Index port); the worst call is the longest a turn waited,
      and the median after it is what turns pay until the next start (searched exactly);
    - at the next start (what `kbgate serve` does): a gateway started, its time to live
      and the build it logged (`index_optimized`); then the same ranking call on the
      indexed store: what a build while serving would have bought.
    """
    store.save({**(store.manifest() or {}), "changed": "maintenance bursts written"})
    workspace = turn_workspaces(store.plan)["largest"]
    target = store.layout.target(workspace, 0)
    kbs = store.layout.workspace_kbs[workspace]
    scope = Scope.of(
        org_id=target.org_id,
        tenant_id=target.tenant_id,
        kb_ids=[kb.kb_id for kb in kbs if kb.storage == kbs[0].storage],
    )
    (question,) = embedder.embed_queries(["What causes insulin resistance in adipose tissue?"])
    legs = [
        Leg(LegKind.DENSE, dense=question.dense, limit=40),
        Leg(LegKind.KEYWORD, sparse=question.sparse, limit=40),
        Leg(LegKind.DOCUMENT_KEYWORD, sparse=question.sparse, limit=40),
    ]
    burst = _burst(store, 0)
    index = BlockingIndex(EdgeIndex(store.data_dir))
    try:
        beside = writes_beside_turns(
            index,
            lambda: _write(store, index, embedder, burst),
            target.collection,
            scope,
            legs=legs,
            rounds=30,
        )
    finally:
        index.close()
    gateway, start_s = _start(store.data_dir, env)
    gateway.stop()
    index = BlockingIndex(EdgeIndex(store.data_dir))
    try:
        indexed_ms = rank_median_ms(index, target.collection, scope, legs, rounds=30)
    finally:
        index.close()
    return {
        "into": f"{target.tenant_id}/{target.kb_id} ({target.collection})",
        "while_serving": {"passages_written": burst.total, **beside},
        "at_start": {
            "start_to_live_s": round(start_s, 1),
            "index_optimized_ms": logged_build_ms(gateway),
            "rank_median_ms_indexed": indexed_ms,
        },
        "shards_after": shards_shape(store.data_dir),
    }


def _faults(pid: int) -> tuple[int, int]:
    """Minor and major page faults of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7]), int(fields[9])


def _rss(pid: int) -> dict[str, int]:
    """Resident memory of a process (MiB): total, peak, anonymous and file-backed."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in {"VmRSS", "VmHWM", "RssAnon", "RssFile"}:
            fields[name] = round(int(value.split()[0]) / 1024)
    return fields


def _disk_mib(path: Path) -> int:
    blocks = sum(f.stat().st_blocks for f in path.rglob("*") if f.is_file())
    return round(blocks * 512 / 2**20)


def _start(data_dir: Path, env: dict[str, str]) -> tuple[GatewayProcess, float]:
    """A gateway on the store, and seconds until it answers `/health/live`."""
    gateway = GatewayProcess(data_dir, env)
    return gateway, start_live(gateway)


def _prepare_agents(url: str, store: Store, keys: dict[str, str]) -> None:
    """Each turn workspace's agent with all its KBs (the first three are queried), and
    redaction off in both gates: the index is what is measured."""
    for name, workspace in turn_workspaces(store.plan).items():
        kb_ids = [kb.kb_id for kb in store.layout.workspace_kbs[workspace]]
        caller = _Caller(url, keys[name])
        try:
            for method, path, body in (
                (
                    "PUT",
                    f"/v1/agents/{AGENT}",
                    {"knowledge_base_ids": kb_ids, "pii_redaction": False},
                ),
                ("PATCH", "/v1/workspace/settings", {"rag_pii_redaction": False}),
            ):
                status, answer = caller.request(method, path, body)
                if status not in (200, 201):
                    raise RuntimeError(f"{method} {path}: {status} {answer[:200]!r}")
        finally:
            caller.close()


def _lines_measured(url: str, keys: dict[str, str], names: tuple[str, ...] = TURN_SCOPES) -> None:
    """Wait until every KB of each named workspace's agent has its off-topic line, as on a
    gateway serving a while (measured in the background from a Scope's first turn)."""
    for name in names:
        caller = _Caller(url, keys[name])
        try:
            for _ in range(6000):
                if _lines_in_force(caller):
                    break
                time.sleep(0.1)
        finally:
            caller.close()


def _lines_in_force(caller: _Caller) -> bool:
    """Whether one turn of the caller's agent ran every KB under its measured line."""
    status, answer = caller.request(
        "POST", "/v1/retrieve", {"agent_id": AGENT, "question": "warm-up"}
    )
    per_kb = json.loads(answer)["effective"]["per_knowledge_base"] if status == 200 else {}
    return bool(per_kb) and all(
        kb["sources"]["score_threshold"] != "platform" for kb in per_kb.values()
    )


def line_phase(store: Store, env: dict[str, str], keys: dict[str, str]) -> dict[str, Any]:
    """A fresh gateway: how long the largest workspace's off-topic lines take to measure
    from its first turn (those the turn phase kept in the store forgotten first), and the
    tiny workspace's turns (one caller, back to back, distinct questions) while they are
    measured against after."""
    gateway, _ = _start(store.data_dir, env)
    try:
        _prepare_agents(gateway.url, store, keys)
        _lines_measured(gateway.url, keys, ("tiny",))
        return _tiny_turns_beside_lines(gateway.url, keys)
    finally:
        gateway.stop()


async def _forget_kept_lines(data_dir: Path, tenant_id: str) -> None:
    """Delete the workspace's kept off-topic lines (its calibration data; the scale stores
    hold no golden sets)."""
    store = await SqliteStore.open(data_dir / "kbgate.sqlite3")
    try:
        await store.delete_calibration(tenant_id)
    finally:
        await store.close()


def _tiny_turns_beside_lines(url: str, keys: dict[str, str]) -> dict[str, Any]:
    tiny, largest = _Caller(url, keys["tiny"]), _Caller(url, keys["largest"])
    questions = iter(f"{q} ({n})" for n in range(1_000_000) for q in scifact_questions())

    def tiny_turn() -> float:
        started = time.perf_counter()
        status, _ = tiny.request(
            "POST", "/v1/retrieve", {"agent_id": AGENT, "question": next(questions)}
        )
        if status != 200:
            raise RuntimeError(f"retrieve: {status}")
        return (time.perf_counter() - started) * 1000

    try:
        for _ in range(20):
            tiny_turn()
        started = time.perf_counter()
        _lines_in_force(largest)  # its first turn starts the measurements
        during: list[float] = []
        while not _lines_in_force(largest):
            if time.perf_counter() - started > LINES_TIMEOUT_S:
                raise RuntimeError("the largest workspace's lines were not measured in time")
            during.extend(tiny_turn() for _ in range(10))
        measured_s = time.perf_counter() - started
        after = [tiny_turn() for _ in range(max(200, len(during) // 2))]
    finally:
        tiny.close()
        largest.close()
    return {
        "largest_lines_measured_s": round(measured_s, 1),
        "tiny_turns_during": (
            {**_summary(during), "max_ms": round(max(during), 1)} if during else None
        ),
        "tiny_turns_after": {**_summary(after), "max_ms": round(max(after), 1)},
    }


def _turns(url: str, work: list[tuple[str, str, str]], concurrency: int) -> dict[str, Any]:
    """Each (scope, key, question) once through `POST /v1/retrieve`, `concurrency` callers."""
    waiting = deque(work)
    latencies: dict[str, list[float]] = {name: [] for name in TURN_SCOPES}
    errors = 0

    def call() -> None:
        nonlocal errors
        callers: dict[str, _Caller] = {}
        try:
            while True:
                try:
                    scope, key, question = waiting.popleft()
                except IndexError:
                    return
                if key not in callers:
                    callers[key] = _Caller(url, key)
                caller = callers[key]
                started = time.perf_counter()
                status, _ = caller.request(
                    "POST", "/v1/retrieve", {"agent_id": AGENT, "question": question}
                )
                latencies[scope].append((time.perf_counter() - started) * 1000)
                errors += status != 200
        finally:
            for caller in callers.values():
                caller.close()

    load = os.getloadavg()[0]
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(call) for _ in range(concurrency)]:
            future.result()
    elapsed = time.perf_counter() - started
    every = [value for values in latencies.values() for value in values]
    return {
        **_summary(every),
        "turns_per_s": round(len(every) / elapsed, 1),
        "errors": errors,
        "per_scope": {name: _summary(values) for name, values in latencies.items() if values},
        "load_average_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def _turn_work(
    store: Store, keys: dict[str, str], per_scope: int, pass_number: int
) -> list[tuple[str, str, str]]:
    """Interleaved questions for the turn scopes: half SciFact questions, half the
    workspace's own; distinct between passes."""
    scifact = scifact_questions()
    half = per_scope // 2
    lists = {}
    for offset, (name, workspace) in enumerate(turn_workspaces(store.plan).items()):
        start = (pass_number * len(TURN_SCOPES) + offset) * half
        mask = store.plan.workspace == workspace
        own = own_questions(store.plan, store.base, mask, per_scope - half, 1000 + start)
        lists[name] = scifact[start : start + half] + own
    work = []
    for position in range(per_scope):
        for name in TURN_SCOPES:
            if position < len(lists[name]):
                work.append((name, keys[name], lists[name][position]))
    return work


def turn_phase(
    store: Store, env: dict[str, str], keys: dict[str, str], per_scope: int
) -> dict[str, Any]:
    gateway, start_s = _start(store.data_dir, env)
    try:
        rss_start = _rss(gateway.pid)
        _prepare_agents(gateway.url, store, keys)
        warm = [
            (name, keys[name], f"warm-up question {i} on cell biology")
            for i in range(4)
            for name in TURN_SCOPES
        ]
        _turns(gateway.url, warm, 1)
        _lines_measured(gateway.url, keys)
        faults = _faults(gateway.pid)
        one = _turns(gateway.url, _turn_work(store, keys, per_scope, 0), 1)
        eight = _turns(gateway.url, _turn_work(store, keys, per_scope, 1), 8)
        minor, major = (now - then for now, then in zip(_faults(gateway.pid), faults, strict=True))
        rss_end = _rss(gateway.pid)
    finally:
        gateway.stop()
    return {
        "start_to_live_s": round(start_s, 1),
        "rss_mib_after_start": rss_start,
        "rss_mib_after_turns": rss_end,
        "page_faults_per_turn": {
            "minor": round(minor / (one["n"] + eight["n"]), 1),
            "major": round(major / (one["n"] + eight["n"]), 2),
        },
        "one_caller": one,
        "eight_callers": eight,
    }


def scope_sizes(store: Store) -> dict[str, dict[str, Any]]:
    """The turn workspaces' passages, and those their keys' Scope admits (default clearance)."""
    sizes = {}
    for name, workspace in turn_workspaces(store.plan).items():
        kbs = range(min(3, len(store.layout.workspace_kbs[workspace])))
        mask = store.plan.in_scope(workspace, kbs, Classification.INTERNAL)
        sizes[name] = {
            "tenant": store.layout.tenant(workspace),
            "passages": store.plan.passages_of(workspace),
            "in_turn_scope": int(store.plan.passages[mask].sum()),
            "knowledge_bases": len(store.layout.workspace_kbs[workspace]),
        }
    return sizes


async def run_size(
    store: Store, args: argparse.Namespace, embedder: Embedder, redactor: Redactor
) -> dict[str, Any]:
    env = _env(args.work_dir)
    manifest = None if args.rebuild else store.manifest(as_is=args.as_is)
    if manifest is None:
        print(f"building {store.size}", file=sys.stderr)
        manifest = await build(store, env, embedder, redactor)
    result: dict[str, Any] = {
        "size": store.size,
        "build": manifest["build"],
        "disk_mib": _disk_mib(store.data_dir / EDGE_DIR),
        "turn_scopes": scope_sizes(store),
    }
    if "turns" in args.phases:
        print(f"turns {store.size}", file=sys.stderr)
        result["turns"] = turn_phase(store, env, manifest["keys"], args.questions)
    if "lines" in args.phases:
        print(f"lines {store.size}", file=sys.stderr)
        largest = turn_workspaces(store.plan)["largest"]
        await _forget_kept_lines(store.data_dir, store.layout.tenant(largest))
        result["lines"] = line_phase(store, env, manifest["keys"])
    if "recall" in args.phases:
        print(f"recall {store.size}", file=sys.stderr)
        result.update(engine_phases(store, embedder, args.recall_questions))
    if "maintenance" in args.phases:
        print(f"maintenance {store.size}", file=sys.stderr)
        result["maintenance"] = maintenance_phase(store, env, embedder)
    return result


async def main() -> None:
    bound_allocator()  # the gateway's heap, so the engine's figures are the gateway's
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--max", type=int, default=None, help="skip sizes above this")
    parser.add_argument("--questions", type=int, default=60, help="per turn scope and pass")
    parser.add_argument("--recall-questions", type=int, default=15, help="per kind and scope")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--base-docs", type=int, default=None, help="SciFact abstracts used")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument(
        "--as-is",
        action="store_true",
        help="measure a store a maintenance phase changed as it is, instead of rebuilding it",
    )
    parser.add_argument(
        "--phases",
        nargs="+",
        default=["turns", "lines", "recall", "maintenance"],
        choices=["turns", "lines", "recall", "maintenance"],
    )
    parser.add_argument("--output", type=Path, default=RESULTS / "scale.json")
    args = parser.parse_args()
    sizes = [s for s in args.sizes if args.max is None or s <= args.max]
    args.work_dir.mkdir(parents=True, exist_ok=True)
    config = load_config(_env(args.work_dir), data_dir=args.work_dir / "embedder")
    embedder = build_embedder(config)
    redactor = Redactor.build()
    base = load_base(args.work_dir, embedder, args.base_docs)
    layout = Layout.make(args.seed)
    load_start = os.getloadavg()
    rows = []
    for size in sizes:
        rows.append(
            await run_size(
                Store(args.work_dir, size, args.seed, base, layout), args, embedder, redactor
            )
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    result = {
        "command": "uv run python -m bench.scale " + " ".join(sys.argv[1:]),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "base": {
            "abstracts": len(base.titles),
            "passages": len(base.passage_texts),
        },
        "labels": [label.value for label in CLASSIFICATION_ORDER],
        "sizes": rows,
    }
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    figure(rows, args.output.with_suffix(".png"))


if __name__ == "__main__":
    asyncio.run(main())
