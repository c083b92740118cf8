"""Would Qdrant Edge in a process of its own lift eight callers? A measurement, not a feature.

Edge's Python binding holds the GIL for a whole query (`bench.edge_gil`), so inside the
gateway every ranking call stops the event loop and the rest of the turn's Python. This
probe serves the turn benchmark's SciFact store in two ways, alternately, each pass on a
freshly started gateway (empty caches), redaction off:

- `in-process`: as `kbgate serve` runs, Edge inside the gateway process;
- `child`: the turn's two engine reads — the ranking call and the payload read — go over
  pipes (one borrowed per call) to a child process that opens a copy of the same Edge
  data and answers them in turn; every other index call stays in the gateway. Writes
  are not forwarded: the probe only reads, and the copy is not kept in step with
  anything.

Per pass: the median latency of one caller (100 questions) and the turns per second of
eight callers (the other 200), distinct questions; the gateway process's CPU per turn
(the child's is not counted). Writes `bench/results/edge_process_probe.json`.

    uv run python -m bench.edge_process_probe --data-dir /tmp/kbgate-turnbench2 [--pairs 3]

The store must have been built by `bench.turn_latency` (it holds `bench-key.txt`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import multiprocessing
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

import httpx

from bench.turn_latency import AGENT, DATASET, KB, PLATFORM_KEY, RESULTS, _http, _read_jsonl
from tests.support.redis_server import free_port

MODES = ("in-process", "child")
#: Pipes to the child: more than the gateway's worker threads that may call at once.
CHANNELS = 8


def _engine_child(connections: list[Connection], data_dir: str) -> None:
    """The child: open the Edge data under `data_dir` and answer calls from every channel."""
    from ingest.qdrant_edge import EdgeIndex

    index = EdgeIndex(Path(data_dir))
    live = list(connections)
    while live:
        for ready in wait(live):
            connection = cast(Connection, ready)
            try:
                method, arguments = connection.recv()
            except EOFError:  # the gateway has gone
                live.remove(connection)
                continue
            try:
                connection.send((True, getattr(index, method)(*arguments)))
            except Exception as error:  # the probe reports it in the gateway, as the call's error
                connection.send((False, repr(error)))


class _ForwardedReads:
    """The gateway's index, with `rank` and `fetch` answered by the child process.

    A calling thread borrows a channel (a pipe of its own to the child) for one call, sends
    and waits on it: no hand-off to another thread.
    """

    #: The calls wait on a pipe, without the GIL: they belong in worker threads.
    holds_the_gil = False

    def __init__(self, index: Any, connections: list[Connection]) -> None:
        self._index = index
        self._free: queue.SimpleQueue[Connection] = queue.SimpleQueue()
        for connection in connections:
            self._free.put(connection)

    def _call(self, method: str, *arguments: Any) -> Any:
        connection = self._free.get()
        try:
            connection.send((method, arguments))
            succeeded, value = connection.recv()
        finally:
            self._free.put(connection)
        if not succeeded:
            raise RuntimeError(value)
        return value

    def rank(self, collection: str, scope: Any, legs: Any) -> Any:
        return self._call("rank", collection, scope, list(legs))

    def fetch(self, collection: str, scope: Any, point_ids: Any) -> Any:
        return self._call("fetch", collection, scope, list(point_ids))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)


async def _serve(mode: str, data_dir: Path, copy_dir: Path, port: int) -> None:
    """One gateway on `port`; in `child` mode its engine reads go to a child process."""
    import uvicorn

    from gateway.http.app import create_app
    from gateway.runtime.services import build_services
    from gateway.telemetry import Telemetry, build_logger
    from settings.config import load_config

    environment = {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(data_dir / "models"),
        "KBGATE_RATE_LIMIT_PER_S": "100000",
        "KBGATE_RATE_LIMIT_BURST": "100000",
    }
    config = load_config(environment, data_dir=data_dir, port=port)
    services = await build_services(config, Telemetry(build_logger("WARNING")))
    if mode == "child":
        pipes = [multiprocessing.Pipe() for _ in range(CHANNELS)]
        child = multiprocessing.get_context("spawn").Process(
            target=_engine_child, args=([end for _, end in pipes], str(copy_dir)), daemon=True
        )
        child.start()
        reads = _ForwardedReads(services.index, [end for end, _ in pipes])
        services = dataclasses.replace(services, index=reads)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config, services),
            host="127.0.0.1",
            port=port,
            http="httptools",
            loop="asyncio",
            log_level="warning",
        )
    )
    await server.serve()


def _pass(
    mode: str, data_dir: Path, copy_dir: Path, key: str, questions: list[str]
) -> dict[str, Any]:
    """A fresh gateway in `mode`: one caller, then eight, distinct questions."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "bench.edge_process_probe",
        "--serve",
        mode,
        "--port",
        str(port),
    ]
    command += ["--data-dir", str(data_dir), "--copy-dir", str(copy_dir)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603 — this module, fixed arguments
    try:
        _wait_live(url)
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=url, headers=auth) as client:
            agent = {"knowledge_base_ids": [KB], "pii_redaction": False}
            client.put(f"/v1/agents/{AGENT}", json=agent).raise_for_status()
            client.patch(
                "/v1/workspace/settings", json={"rag_pii_redaction": False}
            ).raise_for_status()
            for number in range(8):
                warm = {"agent_id": AGENT, "question": f"warm-up question {number} about cells"}
                client.post("/v1/retrieve", json=warm).raise_for_status()
        one = _http(url, key, questions[:100], 1, process.pid)
        eight = _http(url, key, questions[100:], 8, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return {
        "mode": mode,
        "one_caller_median_ms": one["median_ms"],
        "eight_callers_turns_per_s": eight["turns_per_s"],
        "eight_callers_median_ms": eight["median_ms"],
        "gateway_cpu_ms_per_turn_eight_callers": eight["server_cpu_ms_per_turn"],
        "errors": one["errors"] + eight["errors"],
    }


def _wait_live(url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health/live").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the probe's gateway did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--output", type=Path, default=RESULTS / "edge_process_probe.json")
    parser.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--copy-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve, args.data_dir, args.copy_dir, args.port))
        return
    key = (args.data_dir / "bench-key.txt").read_text().strip()
    questions = [q["text"] for q in _read_jsonl(DATASET / "queries.jsonl")][:300]
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(
        prefix="kbgate-edge-copy-",
        ignore_cleanup_errors=True,  # a child may still be closing
    ) as copy:
        copy_dir = Path(copy)
        shutil.copytree(args.data_dir / "qdrant-edge", copy_dir / "qdrant-edge")
        passes = [
            _pass(mode, args.data_dir, copy_dir, key, questions)
            for _ in range(args.pairs)
            for mode in MODES
        ]
    summary = {
        mode: {
            "one_caller_median_ms": statistics.median(
                p["one_caller_median_ms"] for p in passes if p["mode"] == mode
            ),
            "eight_callers_turns_per_s": statistics.median(
                p["eight_callers_turns_per_s"] for p in passes if p["mode"] == mode
            ),
        }
        for mode in MODES
    }
    result = {
        "command": "uv run python -m bench.edge_process_probe " + " ".join(sys.argv[1:]),
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "passes": passes,
        "medians": summary,
    }
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
