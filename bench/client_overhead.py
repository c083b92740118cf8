"""What kbgate_client adds to a retrieval turn over raw HTTP, side by side in one run.

A real `kbgate serve` on a fresh data dir holds `--documents` SciFact abstracts in one KB
(written through the client's bulk call). Every question is asked once to warm the
gateway's caches (question embeddings, redactions), then each question is asked through
both arms, the arm going first alternating question by question, so both share the same
server state and the same seconds of machine load:

- `raw`: an `httpx.Client` kept alive, `POST /v1/retrieve` with a JSON body built by hand,
  the answer parsed with `json.loads`;
- `client`: `kbgate_client.Client.retrieve` on its own kept-alive connection: the typed
  request, the status check and retry policy, the answer decoded into `RetrieveOut`.

Reports each arm's median and p90 latency, the median of the per-question differences
(client minus raw) and, without a server (a real answer served by httpx's MockTransport),
each arm's own work per call (`raw_call`, `client_call`: the figure the shared machine's
noise cannot move) and the body's encoding and decoding alone (`client` against `json`). Writes
`bench/results/client_overhead.json`.

    uv run python -m bench.client_overhead [--documents 500] [--questions 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from kbgate_client import Client
from kbgate_client._http import Decoders, prepare
from kbgate_client.models import BulkDocument, CreateKey, PutAgent, RetrieveIn, RetrieveOut
from kbgate_client.operations import retrieve

from tests.support.gateway_process import GatewayProcess

DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
RESULTS = Path(__file__).resolve().parent / "results"
PLATFORM_KEY = "bench-platform-key-client-overhead"
AGENT = "bench"


def _read_jsonl(path: Path, limit: int) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            rows.append(json.loads(line))
            if len(rows) >= limit:
                break
    return rows


def _provision(url: str, dataset: Path, documents: int) -> str:
    """A workspace, a KB of SciFact abstracts, an agent; an all-roles key."""
    with Client(url, PLATFORM_KEY, timeout_s=600) as platform:
        platform.create_org("bench")
        platform.create_workspace("bench", "ws")
        roles = ["admin", "ingest", "retrieve"]
        key = platform.create_key(CreateKey(org_id="bench", tenant_id="ws", roles=roles)).key
        admin = platform.with_key(key)
        admin.put_knowledge_base("scifact")
        rows = _read_jsonl(dataset / "corpus.jsonl", documents)
        lines = [
            BulkDocument(
                document_id=str(row["_id"]),
                title=row.get("title", ""),
                text=row["text"],
                classification="public",
            )
            for row in rows
        ]
        for start in range(0, len(lines), 100):
            for result in admin.put_documents("scifact", lines[start : start + 100]):
                if result.status != "indexed":
                    raise RuntimeError(f"not indexed: {result}")
        admin.put_agent(AGENT, PutAgent(knowledge_base_ids=["scifact"]))
    return key


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _pass(url: str, key: str, questions: list[str]) -> dict[str, list[float]]:
    """Each question through both arms, the first arm alternating; milliseconds."""
    times: dict[str, list[float]] = {"raw": [], "client": []}
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with httpx.Client(base_url=url, timeout=60) as raw, Client(url, key, timeout_s=60) as typed:

        def by_hand(question: str) -> None:
            body = json.dumps({"agent_id": AGENT, "question": question}).encode()
            answer = raw.post("/v1/retrieve", content=body, headers=headers)
            answer.raise_for_status()
            json.loads(answer.content)

        def by_client(question: str) -> None:
            typed.retrieve(AGENT, question)

        arms = {"raw": by_hand, "client": by_client}
        for question in questions:  # warm the gateway's caches and both connections
            by_hand(question)
            by_client(question)
        for number, question in enumerate(questions):
            order = ("raw", "client") if number % 2 == 0 else ("client", "raw")
            for arm in order:
                started = time.perf_counter()
                arms[arm](question)
                times[arm].append((time.perf_counter() - started) * 1000)
    return times


def _client_work(url: str, key: str, questions: list[str], repeats: int = 2000) -> dict[str, float]:
    """Microseconds per call of each arm's own work, with no server: the gateway's longest
    answer to the first `questions` served by httpx's MockTransport (the same transport
    under both arms), and the body's encoding and decoding alone (the client's against
    `json`)."""
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with httpx.Client(base_url=url, timeout=60) as raw:
        answers = {
            question: raw.post(
                "/v1/retrieve", json={"agent_id": AGENT, "question": question}, headers=headers
            ).content
            for question in questions[:30]
        }
    question, content = max(answers.items(), key=lambda item: len(item[1]))
    body = {"agent_id": AGENT, "question": question}
    canned = httpx.MockTransport(lambda _: httpx.Response(200, content=content))
    mocked_raw = httpx.Client(base_url="http://kbgate", transport=canned)
    mocked_client = Client("http://kbgate", key, transport=canned)

    def raw_call() -> None:
        answer = mocked_raw.post("/v1/retrieve", content=json.dumps(body).encode(), headers=headers)
        answer.raise_for_status()
        json.loads(answer.content)

    def client_call() -> None:
        mocked_client.retrieve(AGENT, question)

    decoders = Decoders()

    def typed() -> None:
        prepare(retrieve, key, RetrieveIn(agent_id=AGENT, question=question), {}, None)
        decoders.decode(RetrieveOut, content)

    def plain() -> None:
        json.dumps(body).encode()
        json.loads(content)

    timed: dict[str, list[float]] = {"raw_call": [], "client_call": [], "client": [], "json": []}
    works = {"raw_call": raw_call, "client_call": client_call, "client": typed, "json": plain}
    for _ in range(5):  # rounds, the arms alternating
        for name, work in works.items():
            started = time.perf_counter()
            for _ in range(repeats // 5):
                work()
            timed[name].append((time.perf_counter() - started) / (repeats // 5) * 1e6)
    mocked_raw.close()
    mocked_client.close()
    medians = {name: statistics.median(values) for name, values in timed.items()}
    return {**medians, "answer_bytes": float(len(content))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--documents", type=int, default=500)
    parser.add_argument("--questions", type=int, default=300)
    args = parser.parse_args(argv)
    questions = [row["text"] for row in _read_jsonl(args.dataset / "queries.jsonl", args.questions)]
    env = {"KBGATE_PLATFORM_KEY": PLATFORM_KEY, "KBGATE_RATE_LIMIT_PER_S": "100000",
           "KBGATE_RATE_LIMIT_BURST": "100000", "KBGATE_RATE_LIMIT_WORKSPACE_PER_S": "100000",
           "KBGATE_RATE_LIMIT_WORKSPACE_BURST": "100000"}  # fmt: skip
    for name in ("KBGATE_MODEL_CACHE_DIR",):
        if name in os.environ:
            env[name] = os.environ[name]
    with (
        tempfile.TemporaryDirectory(prefix="kbgate-client-bench-") as folder,
        GatewayProcess(Path(folder) / "data", env=env) as gateway,
    ):
        key = _provision(gateway.url, args.dataset, args.documents)
        times = _pass(gateway.url, key, questions)
        work = _client_work(gateway.url, key, questions)
    differences = [c - r for c, r in zip(times["client"], times["raw"], strict=True)]
    report = {
        "documents": args.documents,
        "questions": len(questions),
        "arms": {
            arm: {
                "median_ms": round(statistics.median(values), 3),
                "p90_ms": round(_percentile(values, 0.9), 3),
            }
            for arm, values in times.items()
        },
        "median_difference_ms": round(statistics.median(differences), 3),
        "client_work_us": {name: round(value, 1) for name, value in work.items()},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "client_overhead.json").write_text(json.dumps(report, indent=2) + "\n")
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
