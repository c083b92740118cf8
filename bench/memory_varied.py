"""Peak RSS of a real gateway while it ingests a varied-length corpus twice over.

1. Starts `kbgate serve` on a fresh temp data dir (the model folder is assembled in
   `--model-dir`, reused across runs).
2. Pass 1: ingests `--documents` deterministic documents of 5 to 3,000 words (see
   `tests/support/varied_corpus.py`: geometric length spread, sentences of 3 to 40 words,
   some run-on sentences longer than a passage window, technical words and numbers)
   through `PUT /v1/knowledge-bases/{kb}/documents/{id}`, `--concurrency` at a time.
3. Pass 2: the same ids and lengths with new words, so every document is replaced and
   embedded again.
Samples the gateway's VmRSS from /proc every `--sample-s` seconds and reads VmHWM (peak)
after each pass. Reports, side by side in one run: RSS at start, after each pass, the
peak of each pass, the second pass's growth (absolute and relative to the first pass's
rise), and passages per second; writes `bench/results/memory_varied.json`.

    uv run python -m bench.memory_varied [--documents 120] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.support.gateway_process import GatewayProcess
from tests.support.varied_corpus import Document, provision_varied_kb, rss_kib, varied_corpus

RESULTS = Path(__file__).parent / "results"
PLATFORM_KEY = "bench-platform-key-memory-varied"


class Sampler:
    """VmRSS of one process every `every_s` seconds, on a thread, until stopped."""

    def __init__(self, pid: int, every_s: float) -> None:
        self.pid, self.every_s = pid, every_s
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = time.monotonic()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = round(time.monotonic() - self._started, 2)
            self.samples.append((now, rss_kib(self.pid)["VmRSS"]))
            self._stop.wait(self.every_s)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def _ingest(
    gateway: GatewayProcess, headers: dict[str, str], corpus: list[Document], concurrency: int
) -> tuple[int, float]:
    """(passages indexed, seconds taken)."""

    def put(doc: Document) -> int:
        with gateway.client(timeout=600.0) as client:
            answer = client.put(
                f"/v1/knowledge-bases/varied/documents/{doc.doc_id}",
                json={"title": doc.title, "text": doc.text, "classification": "internal"},
                headers=headers,
            )
        answer.raise_for_status()
        return int(answer.json()["passages"])

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        passages = sum(pool.map(put, corpus))
    return passages, time.perf_counter() - started


def _mib(kib: int) -> float:
    return round(kib / 1024, 1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    first_corpus = varied_corpus(args.documents, seed=1)
    second_corpus = varied_corpus(args.documents, seed=2)
    with tempfile.TemporaryDirectory(prefix="kbgate-memory-") as temp:
        env = {
            "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
            "KBGATE_MODEL_CACHE_DIR": str(args.model_dir),
            "KBGATE_RATE_LIMIT_PER_S": "1000",
        }
        with GatewayProcess(Path(temp) / "data", env) as gateway:
            with gateway.client() as client:
                headers = provision_varied_kb(client, PLATFORM_KEY)
            start = rss_kib(gateway.pid)
            with Sampler(gateway.pid, args.sample_s) as sampler:
                passages_1, seconds_1 = _ingest(gateway, headers, first_corpus, args.concurrency)
                after_1 = rss_kib(gateway.pid)
                passages_2, seconds_2 = _ingest(gateway, headers, second_corpus, args.concurrency)
                after_2 = rss_kib(gateway.pid)
    rise_1 = after_1["VmHWM"] - start["VmRSS"]
    growth_peak = after_2["VmHWM"] - after_1["VmHWM"]
    growth_rss = after_2["VmRSS"] - after_1["VmRSS"]
    words = [doc.words for doc in first_corpus]
    return {
        "documents_per_pass": args.documents,
        "words_per_pass": sum(words),
        "words_min_max": [min(words), max(words)],
        "concurrency": args.concurrency,
        "passes": [
            {
                "passages": passages_1,
                "seconds": round(seconds_1, 1),
                "passages_per_s": round(passages_1 / seconds_1, 2),
                "rss_after_mib": _mib(after_1["VmRSS"]),
                "peak_rss_mib": _mib(after_1["VmHWM"]),
            },
            {
                "passages": passages_2,
                "seconds": round(seconds_2, 1),
                "passages_per_s": round(passages_2 / seconds_2, 2),
                "rss_after_mib": _mib(after_2["VmRSS"]),
                "peak_rss_mib": _mib(after_2["VmHWM"]),
            },
        ],
        "rss_start_mib": _mib(start["VmRSS"]),
        "peak_rss_mib": _mib(after_2["VmHWM"]),
        "second_pass_peak_growth_mib": _mib(growth_peak),
        "second_pass_rss_growth_mib": _mib(growth_rss),
        "second_pass_peak_growth_vs_first_rise": round(growth_peak / max(rise_1, 1), 3),
        "rss_samples_mib": [[t, _mib(kib)] for t, kib in sampler.samples],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=120)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--sample-s", type=float, default=0.5)
    parser.add_argument(
        "--model-dir", type=Path, default=Path(tempfile.gettempdir()) / "kbgate-bench-models"
    )
    parser.add_argument("--output", type=Path, default=RESULTS / "memory_varied.json")
    args = parser.parse_args(argv)
    result = run(args)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    summary = {k: v for k, v in result.items() if k != "rss_samples_mib"}
    sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
