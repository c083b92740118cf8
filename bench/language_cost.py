"""What detecting a passage's language costs at ingest (`ingest.language`): the model's
load, and the time per passage over SciFact's abstracts chunked as kbgate chunks them,
side by side with the chunking itself; and the share detected as English.

    uv run python -m bench.language_cost --docs 500 --out bench/results/language_cost.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path

from ingest.chunking import ChunkingParams, chunk_text
from ingest.language import LanguageDetector

DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = (DATASET / "corpus.jsonl").read_text().splitlines()[: args.docs]
    texts = [json.loads(line)["text"] for line in lines]
    started = time.perf_counter()
    detector = LanguageDetector.loaded()
    load_s = time.perf_counter() - started
    params = ChunkingParams()
    passages = [passage for text in texts for passage in chunk_text(text, params)]
    detect_us: list[float] = []
    found: Counter[str | None] = Counter()
    for passage in passages:
        tick = time.perf_counter()
        found[detector.detect(passage)] += 1
        detect_us.append((time.perf_counter() - tick) * 1e6)
    chunk_us: list[float] = []
    for text in texts:
        tick = time.perf_counter()
        chunk_text(text, params)
        chunk_us.append((time.perf_counter() - tick) * 1e6)
    report = {
        "documents": len(texts),
        "passages": len(passages),
        "model_load_s": round(load_s, 2),
        "detect_us_per_passage": {
            "median": round(statistics.median(detect_us), 1),
            "p95": round(sorted(detect_us)[int(0.95 * len(detect_us))], 1),
        },
        "chunk_us_per_document_median": round(statistics.median(chunk_us), 1),
        "languages": {str(code): count for code, count in found.most_common(5)},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
