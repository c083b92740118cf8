"""How long a workspace of 10,000 passages takes to delete, export and import.

Per run, in a fresh data dir (Qdrant Edge and SQLite, as `kbgate serve` embedded): an
org with two workspaces in the same collections, `gone` (10,000 passages: four KBs, two
in the org's collection and two in `kb_shared`, 1,000 documents of ten passages; two
agents, five keys, three settings changes, 200 turn records) and its neighbour `stay`
(2,000 passages in KBs of the same ids). Passages are written through the Index port
with synthetic vectors (random unit 384-d dense, 60-term BM25) and real payloads and
payload indexes: embedding 12,000 passages on this 2-core machine would take most of
an hour and changes nothing the deletion does. Both collections are then indexed
(`optimize`, as a gateway start leaves them). Timed:

- export: the workspace's archive (`GET .../export`'s generator), written to a file;
- import: that archive into a new workspace of another org (`POST .../import`'s use case);
- delete: `DELETE /v1/orgs/{org}/workspaces/gone`'s use case, then checked: zero passages
  under its Scope in both collections, the neighbour's counts unchanged.

    uv run python -m bench.deletion --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from gateway.access.auth import Principal
from gateway.admin import lifecycle, provisioning, transfer
from gateway.admin.knowledge import put_agent, put_knowledge_base, target_of
from gateway.http.archive_records import RULES
from gateway.runtime.services import Services, build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.index import Passage, SparseVector
from ingest.payload import Classification, PassagePayload, Scope, text_checksum
from ingest.sync import Target, point_id
from settings.config import load_config
from settings.records import Role, TurnPassage, TurnRecord

RESULTS = Path(__file__).parent / "results" / "deletion.json"
PLATFORM_KEY = "bench-deletion-platform-key-01"
KBS = {"kb-a": "org", "kb-b": "org", "kb-c": "shared", "kb-d": "shared"}
PASSAGES_PER_DOCUMENT = 10
DIM = 384
WORDS = (
    "harbour", "pilot", "beacon", "reef", "ledger", "storm", "keeper", "tide", "channel",
    "buoy", "anchor", "vessel", "cargo", "manifest", "crew", "dock", "crane", "quay",
    "lantern", "signal", "chart", "compass", "current", "shoal",
)  # fmt: skip


def _admin(org_id: str, tenant_id: str) -> Principal:
    return Principal(
        key_id="bench",
        roles=frozenset({Role.ADMIN}),
        org_id=org_id,
        tenant_id=tenant_id,
        clearance=Classification.RESTRICTED,
    )


def _passages(rng: random.Random, target: Target, documents: int) -> list[Passage]:
    """Real payloads, synthetic vectors."""
    dense = np.random.default_rng(rng.randrange(2**32)).standard_normal(
        (documents * PASSAGES_PER_DOCUMENT, DIM), dtype=np.float32
    )
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    out = []
    for n in range(documents * PASSAGES_PER_DOCUMENT):
        doc, position = divmod(n, PASSAGES_PER_DOCUMENT)
        text = " ".join(rng.choice(WORDS) for _ in range(120))
        terms = sorted(rng.sample(range(1, 2**31), 60))
        sparse = SparseVector(tuple(terms), tuple(rng.random() + 0.5 for _ in terms))
        document_id = f"doc-{doc}"
        out.append(
            Passage(
                point_id=point_id(target, document_id, "v1", position),
                dense=tuple(dense[n].tolist()),
                sparse=sparse,
                payload=PassagePayload(
                    tenant_id=target.tenant_id,
                    knowledge_base_id=target.kb_id,
                    org_id=target.org_id,
                    document_id=document_id,
                    document_version="v1",
                    passage_index=position,
                    classification="internal",
                    text=text,
                    title=f"Ledger {doc}",
                    source="bench",
                    checksum=text_checksum(text),
                    indexed_at="2026-12-01T00:00:00+00:00",
                ),
                document_sparse=sparse if position == 0 else None,
            )
        )
    return out


async def _workspace(
    services: Services, rng: random.Random, tenant_id: str, documents_per_kb: int
) -> None:
    await provisioning.create_workspace(services.store, "bench", tenant_id, None)
    admin = _admin("bench", tenant_id)
    for kb_id, storage in KBS.items():
        kb, _ = await put_knowledge_base(
            services.knowledge, admin, kb_id, name=kb_id, storage=storage, settings={}
        )
        target = target_of(kb)
        await services.index.ensure_collection(target.collection)
        passages = _passages(rng, target, documents_per_kb)
        for start in range(0, len(passages), 256):
            await services.index.upsert(target.collection, passages[start : start + 256])
    await put_agent(services.knowledge, admin, "bot", list(KBS)[:3], {})
    await put_agent(services.knowledge, admin, "helper", list(KBS)[2:], {})


async def _extras(services: Services, tenant_id: str) -> None:
    """Keys, settings changes and turn records, as a workspace in use has them."""
    for _ in range(5):
        await provisioning.create_key(
            services.store, org_id="bench", tenant_id=tenant_id, roles=["retrieve"], clearance=None
        )
    for value in (4, 5, 6):
        await services.store.update_workspace_settings(
            tenant_id, {"max_knowledge_bases_per_agent": value}, key_id="bench", at="now"
        )
    passage = TurnPassage(
        passage_id="p", document_id="doc-1", knowledge_base_id="kb-a", checksum="c", text="x"
    )
    for n in range(200):
        await services.store.put_turn(
            TurnRecord(
                turn_id=f"turn-{tenant_id}-{n}",
                tenant_id=tenant_id,
                agent_id="bot",
                created_at="now",
                passages=[passage],
            ),
            3600,
        )


async def _counts(services: Services, tenant_id: str, org_id: str = "bench") -> dict[str, int]:
    scope = Scope.of(org_id=org_id, tenant_id=tenant_id, kb_ids=list(KBS), clearance="restricted")
    return {
        "org": await services.index.count(f"kb_org_{org_id}", scope),
        "shared": await services.index.count("kb_shared", scope),
    }


async def _run(data_dir: Path, seed: int, passages: int) -> dict[str, Any]:
    config = load_config({}, data_dir=data_dir, platform_key=PLATFORM_KEY)
    services = await build_services(config, Telemetry(build_logger("WARNING")))
    rng = random.Random(seed)
    try:
        await provisioning.create_org(services.store, services.index, "bench")
        per_kb = passages // PASSAGES_PER_DOCUMENT // len(KBS)
        started = time.perf_counter()
        await _workspace(services, rng, "gone", per_kb)
        await _workspace(services, rng, "stay", per_kb // 5)
        await _extras(services, "gone")
        written_s = time.perf_counter() - started
        started = time.perf_counter()
        await services.index.optimize()
        optimize_s = time.perf_counter() - started
        before_gone, before_stay = await _counts(services, "gone"), await _counts(services, "stay")

        archive = data_dir / "gone.kbgate.ndjson.gz"
        started = time.perf_counter()
        workspace = await transfer.exportable(
            services.store, provisioning.PLATFORM, "bench", "gone"
        )
        with archive.open("wb") as out:
            async for chunk in transfer.export_chunks(services.transfer, workspace):
                out.write(chunk)
        export_s = time.perf_counter() - started

        await provisioning.create_org(services.store, services.index, "moved")
        started = time.perf_counter()
        with archive.open("rb") as spooled:
            imported = await transfer.import_workspace(
                services.transfer, "moved", "gone2", spooled, RULES
            )
        import_s = time.perf_counter() - started

        started = time.perf_counter()
        removal = await lifecycle.delete_workspace(
            services.deletions, "bench", "gone", provisioning.PLATFORM
        )
        delete_s = time.perf_counter() - started
        after_gone, after_stay = await _counts(services, "gone"), await _counts(services, "stay")
        _check(after_gone == {"org": 0, "shared": 0}, f"left behind: {after_gone}")
        _check(after_stay == before_stay, f"neighbour moved: {before_stay} -> {after_stay}")
        moved = await _counts(services, "gone2", "moved")
        _check(moved["org"] == before_gone["org"], f"imported {moved}, exported {before_gone}")
        return {
            "passages": sum(before_gone.values()),
            "neighbour_passages": sum(before_stay.values()),
            "write_s": round(written_s, 2),
            "optimize_s": round(optimize_s, 2),
            "export_s": round(export_s, 2),
            "archive_bytes": archive.stat().st_size,
            "import_s": round(import_s, 2),
            "imported_passages": imported.passages,
            "delete_s": round(delete_s, 3),
            "deleted": {
                "passages": removal.passages,
                "knowledge_bases": removal.knowledge_bases,
                "agents": removal.agents,
                "keys": removal.keys,
                "turns": removal.turns,
                "settings_changes": removal.settings_changes,
            },
        }
    finally:
        await services.close()


def _check(holds: bool, message: str) -> None:
    if not holds:
        raise RuntimeError(message)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--passages", type=int, default=10_000)
    args = parser.parse_args()
    runs = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="kbgate-deletion-") as tmp:
            result = asyncio.run(_run(Path(tmp), seed=run, passages=args.passages))
        print(json.dumps(result))
        runs.append(result)
    summary = {
        name: {
            "median": statistics.median(r[name] for r in runs),
            "min": min(r[name] for r in runs),
            "max": max(r[name] for r in runs),
        }
        for name in ("delete_s", "export_s", "import_s", "archive_bytes")
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"runs": runs, "summary": summary}, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
