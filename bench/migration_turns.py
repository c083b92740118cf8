"""Turns while a KB migrates to another model, against idle, side by side in one run.

A real `kbgate serve` (default configuration) on a temporary data dir, reused across runs
with `--data-dir` (the ingest is the slow part). Workspace A holds a KB and an agent;
workspace B a KB of SciFact abstracts of its own, `--other-documents` of them, ingested
over the HTTP API. A's KB is filled in one of two ways:

- by default, the first `--documents` SciFact abstracts ingested over the HTTP API (split
  into passages, embedded and analysed for PII as any document is);
- with `--replay-passages N`, N passages written straight into the KB through the Qdrant
  Edge adapter (`EdgeIndex.upsert`) while the gateway is stopped (the data dir admits one
  process), as `bench.scale` builds its stores: its corpus (`bench.scale_corpus`: SciFact's
  passage texts, BM25 vectors and real MiniLM vectors replayed with seeded perturbations)
  under one workspace and KB (`Layout.single`, the KB's storage and collection as the HTTP
  API answered when it was made), each synthetic document a copy of one abstract (about
  2.5 passages, distinct document ids, the payload contract's `PassagePayload` with the
  tenant, org, KB and a classification of 40/30/20/10 % public to restricted: turns, at
  the key's default clearance, see the public and internal ones; the migration embeds
  all). Each passage carries its text's and title's real PII analysis (the gateway's
  recognizers, run once per base passage and cached in `--base-dir` beside the base
  embeddings), as a write with the analyzer stores it: turns then redact from stored
  spans, as on B. Texts repeat across copies (100k passages from SciFact's 13k): nothing
  caches a passage's embedding (only questions' vectors are cached), so the migration
  embeds a repeated text at the cost of a new one; turns drop copies among their
  candidates as they do any copies. Ingesting 100k passages over HTTP would take hours; this takes
  minutes once the base is cached.

The gateway is restarted after the ingest or the replay so its start builds the indexes,
as after any ingest (the replay's write time, the start's time to live and the build it
logged are reported).

One caller asks a new SciFact question per turn, alternating A's agent and B's, one
turn after the other, in these phases:

- idle_before: nothing else runs (`--turns` turns);
- migrating: A's KB migrates to the bundled model's integer re-quantization
  (`POST .../model-migration`); turns are asked until its job reports every passage done,
  or for `--migrating-window-s` seconds: then the job's progress (done of total) is read
  and the migration cancelled (its new vectors removed), so a migration too long to wait
  for is measured over a window;
- idle_after: nothing else runs again;
- switched_retired (a whole migration only): the KB switched to the new model and the old
  vectors retired.

Reported: per workspace and phase the median, p95 and max latency, and the ratio of the
migrating median to the mean of the two idle medians; the KB's passages, the window, the
job's done/total and status at the end of the migrating phase and its passages per second
(done over the phase's time; in a window, `done` is the progress last saved, at most 2 s
old); the index's disk (allocated bytes of `qdrant-edge`) and the gateway's RSS before
the migration, at the end of the migrating phase, and after the old vectors are retired.

    uv run python -m bench.migration_turns --out bench/results/migration_turns.json

Issue 62's target, a 100k-passage KB (the base embedded and analysed into `--base-dir` on
the first run), the whole migration, or its first `--migrating-window-s` seconds:

    uv run python -m bench.migration_turns --replay-passages 100000 \\
        --base-dir /tmp/kbgate-replay-base --out bench/results/migration_turns_100k.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench.gateway_start import logged_build_ms, start_live
from bench.scale_corpus import Layout, PassageStream, load_base, load_pii, plan_documents
from gateway.runtime.services import build_embedder
from gateway.safety.redaction import Redactor
from ingest.embedder.embedding import MINILM_MODEL_NAME, MINILM_QUESTION_MODEL_NAME
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.disk import allocated_bytes
from ingest.engines.edge.index import EdgeIndex
from ingest.index import Storage
from ingest.sync import DocumentWriter
from settings.config import load_config
from tests.support.gateway_process import GatewayProcess
from tests.support.workspace_http import workspace_headers

RESULTS = Path(__file__).parent / "results"
DATASET = Path("/work/shared/datasets/scifact")
PLATFORM_KEY = "bench-platform-key-migration"
ORG, KB, AGENT = "bench", "papers", "bot"
TENANTS = ("migrating", "neighbour")
BULK = 32


class _Caller:
    """One keep-alive HTTP/1.1 connection (stdlib: little client CPU per request)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self._connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=120)
        self._headers = {**headers, "Content-Type": "application/json"}

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        payload = json.dumps(body).encode() if body is not None else None
        self._connection.request(method, path, body=payload, headers=self._headers)
        response = self._connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None

    def close(self) -> None:
        self._connection.close()


def _corpus(start: int, count: int) -> list[dict[str, Any]]:
    rows = (DATASET / "corpus.jsonl").read_text().splitlines()[start : start + count]
    return [json.loads(row) for row in rows]


def _questions() -> list[str]:
    return [json.loads(row)["text"] for row in (DATASET / "queries.jsonl").read_text().splitlines()]


def _ingest(
    url: str, tenant_id: str, documents: list[dict[str, Any]]
) -> tuple[dict[str, str], dict[str, Any]]:
    """A workspace with a KB, an agent of it and `documents` in it; its key's headers and
    the KB as the API answered (its storage and collection)."""
    with httpx.Client(base_url=url, timeout=600) as client:
        headers = workspace_headers(client, PLATFORM_KEY, ORG, tenant_id)
        made = client.put(f"/v1/knowledge-bases/{KB}", json={}, headers=headers)
        made.raise_for_status()
        client.put(
            f"/v1/agents/{AGENT}", json={"knowledge_base_ids": [KB]}, headers=headers
        ).raise_for_status()
        for start in range(0, len(documents), BULK):
            lines = [
                json.dumps(
                    {
                        "document_id": row["_id"],
                        "title": row["title"],
                        "text": row["text"] or row["title"],
                        "classification": "internal",
                    }
                )
                for row in documents[start : start + BULK]
            ]
            answer = client.post(
                f"/v1/knowledge-bases/{KB}/documents",
                content="\n".join(lines).encode(),
                headers={**headers, "Content-Type": "application/x-ndjson"},
            )
            answer.raise_for_status()
    return headers, made.json()


def _replay(
    data_dir: Path, kb: dict[str, Any], passages: int, base_dir: Path, seed: int
) -> dict[str, Any]:
    """`passages` of `bench.scale_corpus` written into workspace A's KB through the Edge
    adapter, with no gateway on the data dir; the write's figures."""
    base_dir.mkdir(parents=True, exist_ok=True)
    config = load_config(
        {"KBGATE_MODEL_CACHE_DIR": str(base_dir / "models")}, data_dir=base_dir / "embedder"
    )
    embedder = build_embedder(config)
    try:
        base = load_base(base_dir, embedder, None)
        pii = load_pii(base_dir, base, Redactor.build())
        layout = Layout.single(ORG, TENANTS[0], KB, Storage(kb["storage"]), base)
        if layout.target(0, 0).collection != kb["collection"]:
            raise RuntimeError(f"the KB's collection is {kb['collection']!r}")
        plan = plan_documents(passages, layout, base, seed)
        index = BlockingIndex(EdgeIndex(data_dir))
        try:
            writer = DocumentWriter(
                index, embedder, model_id=config.embedding_model or MINILM_MODEL_NAME
            )
            stream = PassageStream(plan, layout, base, writer, seed, pii=pii)
            started = time.perf_counter()
            written = 0
            for collection, batch in stream.batches():
                index.upsert(collection, batch)
                written += len(batch)
            write_s = time.perf_counter() - started
        finally:
            index.close()
    finally:
        close = getattr(embedder, "close", None)
        if callable(close):
            close()
    return {
        "passages": written,
        "documents": len(plan.passages),
        "base_abstracts": len(base.titles),
        "base_passages": len(base.passage_texts),
        "write_s": round(write_s, 1),
        "write_passages_per_s": round(written / write_s),
    }


class _Questions:
    """SciFact's questions, each asked once; past the last, again with a round number (a
    new text, so no cache answers it)."""

    def __init__(self) -> None:
        self._texts = _questions()
        self._asked = 0

    def next(self) -> str:
        text = self._texts[self._asked % len(self._texts)]
        rounds = self._asked // len(self._texts)
        self._asked += 1
        return f"{text} ({rounds})" if rounds else text


def _turns(
    callers: dict[str, _Caller],
    questions: _Questions,
    *,
    count: int | None,
    until: Any = None,
    pause_s: float = 0.2,
) -> dict[str, list[float]]:
    """Alternating turns of each workspace, `pause_s` between rounds: `count` rounds, or
    until `until()` is true."""
    found: dict[str, list[float]] = {name: [] for name in callers}
    rounds = 0
    while (count is not None and rounds < count) or (count is None and not until()):
        time.sleep(pause_s)
        for name, caller in callers.items():
            question = questions.next()
            started = time.perf_counter()
            status, _ = caller.request(
                "POST", "/v1/retrieve", {"agent_id": AGENT, "question": question}
            )
            found[name].append((time.perf_counter() - started) * 1000)
            if status != 200:
                raise RuntimeError(f"a turn answered {status}")
        rounds += 1
    return found


def _summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "median_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1),
        "max_ms": round(ordered[-1], 1),
        "n": len(ordered),
    }


def _clean_slate(admin: _Caller, path: str) -> str:
    """End what an earlier run on the data dir left (a migration building, switched or
    rolled back: its second set removed), and the model to migrate to: the one of the
    bundled pair the KB does not answer from."""
    status, shown = admin.request("GET", path)
    answering = MINILM_MODEL_NAME
    if status == 200:
        state = shown["status"]
        if state == "switched":
            admin.request("POST", path + "/rollback")
            state = "rolled_back"
        if state in {"building", "built", "failed"}:
            admin.request("DELETE", path)
        elif state == "rolled_back":
            admin.request("POST", path + "/retire")
        _, shown = admin.request("GET", path)
        answering = next(s["model"] for s in shown["vector_sets"] if s["answering"])
    return MINILM_QUESTION_MODEL_NAME if answering == MINILM_MODEL_NAME else MINILM_MODEL_NAME


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _footprint(gateway: GatewayProcess) -> dict[str, float]:
    return {
        "index_disk_mb": round(allocated_bytes(gateway.data_dir / "qdrant-edge") / 2**20, 1),
        "gateway_rss_mb": _rss_mb(gateway.pid),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--documents", type=int, default=3000, help="A's, over HTTP")
    parser.add_argument("--other-documents", type=int, default=300)
    parser.add_argument(
        "--replay-passages", type=int, default=0, help="fill A's KB with this many, replayed"
    )
    parser.add_argument("--base-dir", type=Path, default=Path("/tmp/kbgate-replay-base"))  # noqa: S108
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument(
        "--migrating-window-s", type=float, default=None, help="default: until built"
    )
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "migration_turns.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kbgate-migration-"))
    data_dir = args.data_dir or work / "data"
    fresh = not (data_dir / "kbgate.sqlite3").exists()
    gateway = GatewayProcess(data_dir, env={"KBGATE_PLATFORM_KEY": PLATFORM_KEY})
    setup_file = data_dir.parent / f"{data_dir.name}-setup.json"
    try:
        if fresh:
            setup_file.write_text(json.dumps(_set_up(gateway, args)))
        setup = json.loads(setup_file.read_text())
        if setup["replay"]["passages"] != args.replay_passages:
            raise SystemExit(f"{data_dir} was set up otherwise: {setup['replay']}")
        live_s = start_live(gateway)  # after a setup, its start builds the indexes
        if fresh:
            setup["start"] = {
                "start_to_live_s": round(live_s, 1),
                "index_optimized_ms": logged_build_ms(gateway),
            }
            setup_file.write_text(json.dumps(setup))
        results = {
            "setup": {k: v for k, v in setup.items() if k != "keys"},
            **_run(gateway, setup["keys"], args.turns, args.migrating_window_s),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        print(json.dumps(results, indent=2))
    finally:
        gateway.stop()
        shutil.rmtree(work, ignore_errors=True)


def _set_up(gateway: GatewayProcess, args: argparse.Namespace) -> dict[str, Any]:
    """The workspaces, KBs, agents and keys over the HTTP API with B's documents, and A's:
    over HTTP too, or replayed once the gateway is stopped. Leaves the gateway stopped."""
    gateway.start()
    started = time.perf_counter()
    own = [] if args.replay_passages else _corpus(0, args.documents)
    a_headers, a_kb = _ingest(gateway.url, TENANTS[0], own)
    b_headers, _ = _ingest(gateway.url, TENANTS[1], _corpus(args.documents, args.other_documents))
    setup: dict[str, Any] = {
        "keys": {TENANTS[0]: a_headers, TENANTS[1]: b_headers},
        "http_ingest_s": round(time.perf_counter() - started, 1),
        "replay": {"passages": 0},
    }
    print(f"ingested over HTTP in {setup['http_ingest_s']:.0f} s", flush=True)
    gateway.stop()
    if args.replay_passages:
        setup["replay"] = _replay(
            gateway.data_dir, a_kb, args.replay_passages, args.base_dir, args.seed
        )
        print(f"replayed: {json.dumps(setup['replay'])}", flush=True)
    return setup


def _run(
    gateway: GatewayProcess,
    keys: dict[str, dict[str, str]],
    turns: int,
    window_s: float | None,
) -> dict[str, Any]:
    callers = {name: _Caller(gateway.url, headers) for name, headers in keys.items()}
    admin = callers[TENANTS[0]]
    path = f"/v1/knowledge-bases/{KB}/model-migration"
    target = _clean_slate(admin, path)
    questions = _Questions()
    _turns(callers, questions, count=5)  # warm up: models and caches
    phases: dict[str, dict[str, list[float]]] = {}
    phases["idle_before"] = _turns(callers, questions, count=turns)
    before = _footprint(gateway)
    status, started = admin.request("POST", path, {"model": target})
    if status != 202:
        raise RuntimeError(f"the migration did not start: {status} {started}")
    began = time.perf_counter()
    state: dict[str, Any] = {}

    def phase_over() -> bool:
        _, shown = admin.request("GET", path)
        state.update(shown)
        if shown["status"] == "failed":
            raise RuntimeError(f"the migration failed: {shown['error']}")
        windowed = window_s is not None and time.perf_counter() - began >= window_s
        return bool(shown["status"] == "built") or windowed

    phases["migrating"] = _turns(callers, questions, count=None, until=phase_over)
    migrating_s = time.perf_counter() - began
    job = {"status": state["status"], **state["progress"]}
    at_end = _footprint(gateway)
    whole = job["status"] == "built"
    if not whole:
        cancelled, _ = admin.request("DELETE", path)
        if cancelled != 200:
            raise RuntimeError(f"cancel {cancelled}")
    phases["idle_after"] = _turns(callers, questions, count=turns)
    retired_footprint = None
    if whole:
        switched, _ = admin.request("POST", path + "/switch", {"override": True})
        retired, _ = admin.request("POST", path + "/retire")
        if (switched, retired) != (200, 200):
            raise RuntimeError(f"switch {switched}, retire {retired}")
        phases["switched_retired"] = _turns(callers, questions, count=turns)
        retired_footprint = _footprint(gateway)
    for caller in callers.values():
        caller.close()
    summary: dict[str, dict[str, Any]] = {
        name: {phase: _summary(found[name]) for phase, found in phases.items()} for name in TENANTS
    }
    for name in TENANTS:
        idle = (
            summary[name]["idle_before"]["median_ms"] + summary[name]["idle_after"]["median_ms"]
        ) / 2
        summary[name]["migrating_over_idle"] = round(
            summary[name]["migrating"]["median_ms"] / idle, 2
        )
    return {
        "kb_passages": job["total"],
        "migrating_window_s": window_s,
        "migrating_s": round(migrating_s, 1),
        "job_at_migrating_end": job,
        "passages_per_s": round(job["done"] / migrating_s, 1),
        "footprint": {
            "before": before,
            "both_sets": at_end,
            "retired": retired_footprint,
        },
        "turns": summary,
    }


if __name__ == "__main__":
    main()
