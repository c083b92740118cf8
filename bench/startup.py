"""Start-up time to ready: `kbgate serve` from spawn to /health/ready 200.

Cold: a fresh model cache (the model folder is assembled from the PyPI packages)
and a fresh data dir. Warm: the model folder already assembled. Median of N each,
measured alternately in one run.

    uv run python bench/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.support.redis_server import free_port

RESULTS = Path(__file__).parent / "results" / "startup.json"


def time_to_ready(data_dir: Path, model_dir: Path) -> float:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("KBGATE_")},
        "KBGATE_DATA_DIR": str(data_dir),
        "KBGATE_MODEL_CACHE_DIR": str(model_dir),
        "KBGATE_PORT": str(port),
        "KBGATE_PLATFORM_KEY": "bench-platform-key-000000",
    }
    kbgate = Path(sys.executable).with_name("kbgate")
    started = time.perf_counter()
    process = subprocess.Popen(  # noqa: S603 — our own console script
        [str(kbgate), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health/ready", timeout=1).status_code == 200:
                    return time.perf_counter() - started
            except httpx.HTTPError:
                pass
            if process.poll() is not None:
                raise RuntimeError("gateway exited")
            time.sleep(0.02)
    finally:
        process.terminate()
        process.wait(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cold: list[float] = []
    warm: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        warm_models = root / "warm-models"
        time_to_ready(root / "prime", warm_models)  # assemble once for the warm runs
        for run in range(args.runs):
            cold.append(time_to_ready(root / f"cold-data-{run}", root / f"cold-models-{run}"))
            warm.append(time_to_ready(root / f"warm-data-{run}", warm_models))
    result = {
        "runs": args.runs,
        "cold_s": [round(v, 3) for v in cold],
        "warm_s": [round(v, 3) for v in warm],
        "cold_median_s": round(statistics.median(cold), 3),
        "warm_median_s": round(statistics.median(warm), 3),
        "cold_over_warm": round(statistics.median(cold) / statistics.median(warm), 2),
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
