"""Turns while a KB migrates to another model, against idle, side by side in one run.

A real `kbgate serve` (default configuration) on a temporary data dir, reused across runs
with `--data-dir` (the ingest is the slow part). Workspace A holds a KB of the first
`--documents` SciFact abstracts (split into passages as any document is) and an agent;
workspace B a KB of SciFact abstracts of its own, `--other-documents` of them. The gateway
is restarted after the ingest so its start builds the indexes, as after any ingest.

One caller asks a new SciFact question per turn, alternating A's agent and B's, one
turn after the other, in these phases:

- idle_before: nothing else runs (`--turns` turns);
- migrating: A's KB migrates to the bundled model's integer re-quantization
  (`POST .../model-migration`); turns are asked until its job reports every passage done
  (the job's own rate is read from its progress);
- idle_after: nothing else runs again.

Reported: per workspace and phase the median, p95 and max latency, and the ratio of the
migrating median to the mean of the two idle medians; the job's passages per second; the
index's disk (allocated bytes of `qdrant-edge`) and the gateway's RSS before the
migration, once built, and after the old vectors are retired.

    uv run python -m bench.migration_turns --out bench/results/migration_turns.json
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

from ingest.embedder.embedding import MINILM_MODEL_NAME, MINILM_QUESTION_MODEL_NAME
from ingest.engines.edge.disk import allocated_bytes
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


def _ingest(url: str, tenant_id: str, documents: list[dict[str, Any]]) -> dict[str, str]:
    with httpx.Client(base_url=url, timeout=600) as client:
        headers = workspace_headers(client, PLATFORM_KEY, ORG, tenant_id)
        client.put(f"/v1/knowledge-bases/{KB}", json={}, headers=headers).raise_for_status()
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
    return headers


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
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--other-documents", type=int, default=300)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "migration_turns.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kbgate-migration-"))
    data_dir = args.data_dir or work / "data"
    fresh = not (data_dir / "kbgate.sqlite3").exists()
    gateway = GatewayProcess(data_dir, env={"KBGATE_PLATFORM_KEY": PLATFORM_KEY})
    keys_file = data_dir.parent / f"{data_dir.name}-keys.json"
    try:
        gateway.start()
        if fresh:
            started = time.perf_counter()
            keys = {
                TENANTS[0]: _ingest(gateway.url, TENANTS[0], _corpus(0, args.documents)),
                TENANTS[1]: _ingest(
                    gateway.url, TENANTS[1], _corpus(args.documents, args.other_documents)
                ),
            }
            print(f"ingested in {time.perf_counter() - started:.0f} s", flush=True)
            keys_file.write_text(json.dumps(keys))
            gateway.stop()
            gateway.start()  # its start builds the indexes
        keys = json.loads(keys_file.read_text())
        results = _run(gateway, keys, args.turns)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        print(json.dumps(results, indent=2))
    finally:
        gateway.stop()
        shutil.rmtree(work, ignore_errors=True)


def _run(gateway: GatewayProcess, keys: dict[str, dict[str, str]], turns: int) -> dict[str, Any]:
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

    def built() -> bool:
        _, shown = admin.request("GET", path)
        state.update(shown)
        return bool(shown["status"] == "built")

    phases["migrating"] = _turns(callers, questions, count=None, until=built)
    build_s = time.perf_counter() - began
    with_both = _footprint(gateway)
    phases["idle_after"] = _turns(callers, questions, count=turns)
    switched, _ = admin.request("POST", path + "/switch", {"override": True})
    retired, _ = admin.request("POST", path + "/retire")
    if (switched, retired) != (200, 200):
        raise RuntimeError(f"switch {switched}, retire {retired}")
    phases["switched_retired"] = _turns(callers, questions, count=turns)
    for caller in callers.values():
        caller.close()
    total = state["progress"]["total"]
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
        "passages": total,
        "build_s": round(build_s, 1),
        "passages_per_s": round(total / build_s, 1),
        "footprint": {
            "before": before,
            "both_sets": with_both,
            "retired": _footprint(gateway),
        },
        "turns": summary,
    }


if __name__ == "__main__":
    main()
