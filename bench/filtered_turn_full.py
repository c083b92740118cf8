"""Whole retrieval turns with and without a document-field filter at 100k passages, in
process (`gateway.retrieval.turn.retrieve`, redaction off so the index is what is
measured), side by side.

The store is `bench.scale`'s corpus (SciFact's real passages and embeddings replayed over
1,000 Zipf-sized workspaces, `bench.scale_corpus`; the base embeddings are read from
`--base-dir`, where `bench.scale` caches them), written through the Qdrant Edge adapter
with one field per document, `region` (one of 20 values at random: a filter on one value
keeps about 5 % of a workspace's passages, unrelated to their content), and indexed as a
gateway's start does. The largest workspace's KBs declare `region`; its agent answers the
workspace's own questions (the first 12 words of one of its passages) alternately without
a filter and with `{"region": <value>}`, each question's two turns back to back in
alternating order. Turns embed their question (the real model; each question is new to
the cache in both arms: the filtered turn asks a copy with a trailing space).

    uv run python -m bench.filtered_turn_full --work-dir /tmp/kbgate-filtered-full \\
        --base-dir /tmp/kbgate-scale --out bench/results/filtered_turn_full.json
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from bench.scale_corpus import Layout, PassageStream, load_base, own_questions, plan_documents
from gateway.access.auth import Principal
from gateway.admin import knowledge, provisioning
from gateway.retrieval.plan import settle_lines
from gateway.retrieval.turn import TurnAsks, retrieve
from gateway.runtime.services import Services, build_embedder, build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.index import Passage
from ingest.payload import Classification
from settings.config import load_config
from settings.records import Role

REGIONS = 20
SIZE = 100_000
SEED = 7


def _region(document_id: str) -> str:
    return f"r{int(document_id.removeprefix('doc')) * 7919 % REGIONS}"


def _principal(layout: Layout, workspace: int) -> Principal:
    return Principal(
        key_id="filtered-bench",
        roles=frozenset({Role.ADMIN, Role.INGEST, Role.RETRIEVE}),
        org_id=layout.workspace_org[workspace],
        tenant_id=layout.tenant(workspace),
        clearance=Classification.RESTRICTED,
    )


async def _build(services: Services, layout: Layout, stream: PassageStream, largest: int) -> None:
    for org in layout.orgs:
        await provisioning.create_org(services.store, services.index, org)
    principal = _principal(layout, largest)
    await provisioning.create_workspace(services.store, principal.org_id, principal.tenant_id, None)
    await services.store.update_workspace_settings(
        principal.tenant_id, {"rag_pii_redaction": False}, key_id="bench", at="2026-01-01"
    )
    kb_ids = []
    for kb in layout.workspace_kbs[largest]:
        await knowledge.put_knowledge_base(
            services.knowledge,
            principal,
            kb.kb_id,
            name=kb.kb_id,
            storage=kb.storage,
            settings={"metadata_fields": {"region": "string"}},
        )
        kb_ids.append(kb.kb_id)
    await knowledge.put_agent(services.knowledge, principal, "bot", kb_ids, {})
    for collection, passages in stream.batches():
        await services.index.upsert(collection, [_tagged(passage) for passage in passages])
    await services.index.optimize()


def _tagged(passage: Passage) -> Passage:
    payload = msgspec.structs.replace(
        passage.payload, metadata={"region": _region(passage.payload.document_id)}
    )
    return dataclasses.replace(passage, payload=payload)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    for name in ("base-1000.npz", "base-1000.json"):
        if not (work / name).exists():
            shutil.copy(args.base_dir / name, work / name)
    config = load_config({}, data_dir=work / "store", model_cache_dir=work / "models")
    embedder = build_embedder(config)
    base = load_base(work, embedder, 1000)
    layout = Layout.make(SEED)
    plan = plan_documents(SIZE, layout, base, SEED)
    sizes = np.bincount(plan.workspace, weights=plan.passages, minlength=1000)
    largest = int(np.argmax(sizes))
    fresh = not (work / "store").exists()
    services = await build_services(config, Telemetry(build_logger("WARNING")), embedder=embedder)
    try:
        if fresh:
            stream = PassageStream(plan, layout, base, services.documents.writer, SEED)
            started = time.perf_counter()
            await _build(services, layout, stream, largest)
            print(f"built in {time.perf_counter() - started:.0f} s")
        principal = _principal(layout, largest)
        # The KBs' off-topic lines measured before any turn is timed (a first turn starts
        # their measurement in the background otherwise).
        await settle_lines(services.planning, principal, "bot")
        mask = plan.workspace == largest
        questions = own_questions(plan, base, mask, args.questions, SEED)
        timings: dict[str, list[float]] = {"unfiltered": [], "filtered": []}
        kept: list[int] = []
        documents = np.flatnonzero(mask)
        for number, question in enumerate(questions):
            region = f"r{number % REGIONS}"
            kept.append(
                int(sum(plan.passages[d] for d in documents if _region(f"doc{d:07d}") == region))
            )
            arms = [
                ("unfiltered", question, TurnAsks()),
                ("filtered", question + " ", TurnAsks(filter={"region": region})),
            ]
            if number % 2:
                arms.reverse()
            for name, asked, asks in arms:
                tick = time.perf_counter()
                await retrieve(services.retrieval, principal, "bot", asked, [], asks=asks)
                timings[name].append((time.perf_counter() - tick) * 1000)
    finally:
        await services.close()
    unfiltered = statistics.median(timings["unfiltered"])
    return {
        "passages": SIZE,
        "workspace_passages": int(sizes[largest]),
        "filter_keeps_median": statistics.median(kept),
        "filter_share": round(statistics.median(kept) / float(sizes[largest]), 4),
        "questions": len(questions),
        "median_ms": {name: round(statistics.median(v), 2) for name, v in timings.items()},
        "p95_ms": {name: round(float(np.percentile(v, 95)), 2) for name, v in timings.items()},
        "ratio_filtered_to_unfiltered": round(
            statistics.median(timings["filtered"]) / unfiltered, 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--base-dir", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = asyncio.run(run(args))
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
