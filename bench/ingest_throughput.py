"""Ingest through HTTP, side by side with another code base, and turns while it ingests.

One run, on the first `--limit` SciFact abstracts written as Markdown files:

1. `raw`: this checkout's embedder alone on the corpus's first `--raw-passages` passages,
   in each configuration of `RAW_CONFIGS` (runs side by side x onnxruntime threads per
   run x passages per run): the model's best on this machine;
2. for each code root (`--baseline ROOT`, then this checkout; `--rounds` times,
   alternated): a fresh `kbgate serve` from that root's own virtualenv on a fresh data
   dir, then that root's `kbgate ingest --url` of the files into a KB, timed: passages/s
   through HTTP (passages indexed over the command's wall time);
3. on the same gateway, one caller's turns (`POST /v1/retrieve`, SciFact's questions one
   after another, the question cache off): `--turns` on the idle gateway, then as many as
   fit while the same files are ingested into a second KB: median and p95 of each, and
   their ratio.

The baseline root is a copy of another commit with its own virtualenv, e.g.

    mkdir /tmp/kbgate-head && git archive HEAD | tar -x -C /tmp/kbgate-head
    (cd /tmp/kbgate-head && uv sync --frozen)
    uv run python -m bench.ingest_throughput --limit 500 --baseline /tmp/kbgate-head

Ratios measured in one run are what to compare; absolute figures move with whatever else
the machine runs (the load average is recorded at each stage).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench.beir_corpus import CorpusDoc, load_corpus
from ingest.chunking import ChunkingParams, chunk_text
from ingest.embedder.embedding import build_embedder
from ingest.sync import embedding_input
from tests.support.redis_server import free_port
from tests.support.workspace_http import workspace_headers

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASET = REPO_ROOT.parent / "shared" / "datasets" / "scifact"
DEFAULT_OUT = REPO_ROOT / "bench" / "results" / "ingest_throughput.json"
PLATFORM_KEY = "bench-platform-key-ingest-throughput"
LAUNCH = "import sys; from gateway.cli import main; sys.argv[0] = 'kbgate'; sys.exit(main())"
#: (runs side by side, onnxruntime threads per run, passages per run)
RAW_CONFIGS = ((1, 1, 1), (1, 2, 1), (2, 1, 1), (2, 1, 4), (2, 1, 8))


def write_files(docs: Sequence[CorpusDoc], folder: Path) -> Path:
    """One Markdown file per document (its title the heading), as a connector reads them."""
    folder.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        (folder / f"{doc.doc_id}.md").write_text(f"# {doc.title}\n\n{doc.text}\n", "utf-8")
    return folder


def questions(path: Path, count: int) -> list[str]:
    with path.open(encoding="utf-8") as lines:
        found = [str(json.loads(line)["text"]) for line in lines]
    return found[:count]


# ---- 1. the model alone -----------------------------------------------------------------


def raw_embedder(
    docs: Sequence[CorpusDoc], model_dir: Path, passages: int, rounds: int
) -> list[dict[str, Any]]:
    """Passages/s of the embedder alone in each of `RAW_CONFIGS`, on the same passages; the
    configurations take turns `rounds` times (the median is kept), so each sees the same
    share of a machine whose load changes. The passages are spread evenly over all the
    documents the HTTP path writes, so both see texts of the same lengths."""
    params = ChunkingParams()
    every = [
        embedding_input(doc.title, passage)
        for doc in docs
        for passage in chunk_text(doc.text, params)
    ]
    texts = every[:: max(1, len(every) // passages)][:passages]
    embedders = {
        config: build_embedder(model_dir, None, config[1], config[2], workers=config[0])
        for config in RAW_CONFIGS
    }
    rates: dict[tuple[int, int, int], list[float]] = {config: [] for config in RAW_CONFIGS}
    for embedder in embedders.values():
        embedder.embed_documents(texts[:16])  # first shapes
    for _ in range(rounds):
        for config, embedder in embedders.items():
            started = time.perf_counter()
            embedder.embed_documents(texts)
            rates[config].append(len(texts) / (time.perf_counter() - started))
    for embedder in embedders.values():
        embedder.close()
    rows = []
    for (workers, threads, batch), found in rates.items():
        row = {
            "workers": workers,
            "threads": threads,
            "batch": batch,
            "passages": len(texts),
            "passages_per_s": round(statistics.median(found), 2),
            "rounds": [round(rate, 2) for rate in found],
        }
        print(f"raw {workers}x{threads} threads, batch {batch}: {row['rounds']} p/s", flush=True)
        rows.append(row)
    return rows


# ---- 2 and 3. a gateway of one code root -------------------------------------------------


class Served:
    """`kbgate serve` from `root`'s virtualenv on a fresh data dir."""

    def __init__(self, root: Path, data_dir: Path, model_dir: Path) -> None:
        self.root, self.data_dir, self.model_dir = root, data_dir, model_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def kbgate(self) -> list[str]:
        """`kbgate` from the root's own code (the root is the working directory, so its
        packages come first even where the virtualenv is shared with another checkout)."""
        return [str(self.root / ".venv" / "bin" / "python"), "-c", LAUNCH]

    def env(self) -> dict[str, str]:
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("KBGATE_")},
            "KBGATE_DATA_DIR": str(self.data_dir),
            "KBGATE_PORT": str(self.port),
            "KBGATE_HOST": "127.0.0.1",
            "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
            "KBGATE_MODEL_CACHE_DIR": str(self.model_dir),
            "KBGATE_RATE_LIMIT_PER_S": "1000",
            "KBGATE_RATE_LIMIT_WORKSPACE_PER_S": "1000",
            # every turn embeds its question: no answer from the question cache
            "KBGATE_QUERY_CACHE_SIZE": "0",
        }

    def __enter__(self) -> Served:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = (self.data_dir.parent / "gateway.log").open("ab")
        self._process = subprocess.Popen(  # noqa: S603 — a kbgate of our own, fixed arguments
            [*self.kbgate(), "serve"], cwd=self.root, env=self.env(), stdout=log, stderr=log
        )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health/ready", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{self.root}: the gateway did not get ready")

    def __exit__(self, *_: object) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=30)

    def ingest(self, folder: Path, kb_id: str, key: str) -> subprocess.Popen[str]:
        """This root's `kbgate ingest --url`, started (stdout: the JSON summary)."""
        command = [*self.kbgate(), "ingest", str(folder), "--kb", kb_id]
        command += ["--classification", "public", "--url", self.url, "--key", key, "--json"]
        return subprocess.Popen(  # noqa: S603 — a kbgate of our own, fixed arguments
            command,
            cwd=self.root,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )


def peak_rss_mb() -> float:
    """This process's peak resident set size, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_root(
    root: Path, folder: Path, asked: Sequence[str], model_dir: Path, turns: int
) -> dict[str, Any]:
    """Ingest throughput, then idle turns and turns under a second ingest, on one root."""
    with (
        tempfile.TemporaryDirectory(prefix="kbgate-ingest-bench-") as temp,
        Served(root, Path(temp) / "data", model_dir) as served,
    ):
        client = httpx.Client(base_url=served.url, timeout=120)
        headers = workspace_headers(client, PLATFORM_KEY, "bench", "bench-ws")
        for kb_id in ("scifact", "scifact2"):
            client.put(f"/v1/knowledge-bases/{kb_id}", json={}, headers=headers)
        client.put(
            "/v1/agents/bot", json={"knowledge_base_ids": ["scifact"]}, headers=headers
        ).raise_for_status()
        key = headers["Authorization"].removeprefix("Bearer ")
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        first = served.ingest(folder, "scifact", key)
        summary = json.loads(first.communicate()[0])
        seconds = time.perf_counter() - started
        passages = _passages(client, headers, "scifact")
        idle = _turns(client, headers, asked, lambda done: done >= turns)
        second = served.ingest(folder, "scifact2", key)
        time.sleep(2.0)  # past the listing and the first batch's reading
        busy = _turns(client, headers, asked, lambda _: second.poll() is not None)
        second.communicate()
    row = {
        "root": str(root),
        "documents": summary["added"],
        "failed": summary["failed"],
        "passages": passages,
        "ingest_s": round(seconds, 1),
        "passages_per_s": round(passages / seconds, 2),
        "load_1m_before": load_before,
        "load_1m_after": os.getloadavg()[0],
        "turns_idle": _latency(idle),
        "turns_under_ingest": _latency(busy),
    }
    row["turn_median_ratio"] = round(
        row["turns_under_ingest"]["median_ms"] / row["turns_idle"]["median_ms"], 2
    )
    print(
        f"{root}: {row['passages_per_s']} p/s ({passages} passages, {row['ingest_s']} s); "
        f"turns idle {row['turns_idle']['median_ms']} ms, under ingest "
        f"{row['turns_under_ingest']['median_ms']} ms (x{row['turn_median_ratio']}); "
        f"load {row['load_1m_before']:.1f}->{row['load_1m_after']:.1f}",
        flush=True,
    )
    return row


def _passages(client: httpx.Client, headers: dict[str, str], kb_id: str) -> int:
    stats = client.get(f"/v1/knowledge-bases/{kb_id}/stats", headers=headers)
    stats.raise_for_status()
    return int(stats.json()["passages"])


def _turns(
    client: httpx.Client, headers: dict[str, str], asked: Sequence[str], enough: Any
) -> list[float]:
    """One caller's turns, one after another, until `enough(done)`: each one's seconds."""
    seconds: list[float] = []
    while not enough(len(seconds)):
        question = asked[len(seconds) % len(asked)]
        started = time.perf_counter()
        answer = client.post(
            "/v1/retrieve", json={"agent_id": "bot", "question": question}, headers=headers
        )
        seconds.append(time.perf_counter() - started)
        answer.raise_for_status()
    return seconds


def _latency(seconds: Sequence[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "turns": len(ordered),
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument(
        "--baseline", type=Path, action="append", default=[], help="another code root (.venv)"
    )
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--turns", type=int, default=60, help="turns on the idle gateway")
    parser.add_argument("--raw-passages", type=int, default=200)
    parser.add_argument("--raw-rounds", type=int, default=3)
    parser.add_argument("--raw-only", action="store_true", help="only the model's stage")
    parser.add_argument(
        "--model-dir", type=Path, default=Path(tempfile.gettempdir()) / "kbgate-bench-models"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    docs = load_corpus(args.dataset / "corpus.jsonl", args.limit)
    asked = questions(args.dataset / "queries.jsonl", 50)
    roots = [*args.baseline, REPO_ROOT]
    result: dict[str, Any] = {"documents": len(docs), "load_1m_start": os.getloadavg()[0]}
    result["raw"] = raw_embedder(docs, args.model_dir, args.raw_passages, args.raw_rounds)
    if args.raw_only:
        print(json.dumps(result["raw"]), flush=True)
        return 0
    with tempfile.TemporaryDirectory(prefix="kbgate-ingest-files-") as temp:
        folder = write_files(docs, Path(temp) / "scifact")
        result["http"] = [
            one_root(root, folder, asked, args.model_dir, args.turns)
            for _ in range(args.rounds)
            for root in roots
        ]
    result["load_1m_end"] = os.getloadavg()[0]
    best_raw = max(row["passages_per_s"] for row in result["raw"])
    mine = [row for row in result["http"] if row["root"] == str(REPO_ROOT)]
    result["ratio"] = {
        "http_over_best_raw": round(
            statistics.median(row["passages_per_s"] for row in mine) / best_raw, 2
        )
    }
    for baseline in args.baseline:
        theirs = [row for row in result["http"] if row["root"] == str(baseline)]
        result["ratio"][f"http_over {baseline}"] = round(
            statistics.median(row["passages_per_s"] for row in mine)
            / statistics.median(row["passages_per_s"] for row in theirs),
            2,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result["ratio"]), "->", args.out, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
