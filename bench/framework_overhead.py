"""What the HTTP framework adds to a retrieval turn, in process, with no network.

One caller's HTTP turn costs more than its floor (`bench.turn_latency`). This splits off
the part Litestar and the gateway's middleware add (authentication, rate limit, body
decoding, guards, the response, request telemetry): the app built by `create_app` is
called directly as an ASGI app in this process, so neither uvicorn nor the socket counts.
Alternated per question on one set of services, distinct questions:

- `direct`: `gateway.retrieval.turn.retrieve`, as the controller calls it;
- `asgi`: `POST /v1/retrieve` through the app; `asgi_wrapper` is that request's time
  minus the turn inside it (timed around the controller's call);
- `canned`: the same request with the turn replaced by a result computed once, repeated
  back to back: the framework's cost while the CPU caches hold its code and data. The
  wrapper's cost right after a real turn is what a caller pays.

Writes `bench/results/framework_overhead.json`.

    uv run python -m bench.framework_overhead --data-dir /tmp/kbgate-turnbench

The store must have been built by `bench.turn_latency` (it holds `bench-key.txt`); this
runs on a copy of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from litestar import Litestar

from bench.turn_latency import AGENT, DATASET, PLATFORM_KEY, RESULTS, _principal, _read_jsonl
from gateway.http.app import create_app
from gateway.retrieval import turn
from gateway.runtime.services import build_services
from gateway.telemetry import Telemetry, build_logger
from settings.config import load_config

Call = Callable[[str, str, bytes], Awaitable[tuple[int, bytes]]]


def _asgi_caller(app: Litestar, key: str) -> Call:
    """One HTTP/1.1 request straight into the ASGI app: (status, body)."""

    async def call(method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [
                (b"host", b"bench"),
                (b"authorization", f"Bearer {key}".encode()),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
            "state": {},
        }
        delivered = False
        messages: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client never disconnects
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            messages.append(message)

        await app(scope, receive, send)  # type: ignore[arg-type]  # plain dicts are ASGI messages
        return int(messages[0]["status"]), b"".join(m.get("body", b"") for m in messages[1:])

    return call


def _replace_turn(function: Callable[..., Awaitable[turn.TurnResult]]) -> None:
    """What the retrieval controller calls as `turn.retrieve` (a probe, restored after)."""
    setattr(turn, "retrieve", function)  # noqa: B010 — mypy rejects assigning a module's function


def _median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 3)


async def _measure(data_dir: Path, questions: list[str], repeats: int) -> dict[str, Any]:
    env = {
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(data_dir / "models"),
        "KBGATE_RATE_LIMIT_PER_S": "100000",
        "KBGATE_RATE_LIMIT_BURST": "100000",
        "KBGATE_RATE_LIMIT_WORKSPACE_PER_S": "100000",
        "KBGATE_RATE_LIMIT_WORKSPACE_BURST": "100000",
    }
    config = load_config(env, data_dir=data_dir)
    services = await build_services(config, Telemetry(build_logger("WARNING")))
    app = create_app(config, services)
    call = _asgi_caller(app, (data_dir / "bench-key.txt").read_text().strip())
    principal = _principal()
    real = turn.retrieve
    inner: list[float] = []

    async def timed_turn(*args: Any, **kwargs: Any) -> turn.TurnResult:
        started = time.perf_counter()
        result = await real(*args, **kwargs)
        inner.append(time.perf_counter() - started)
        return result

    def body(question: str) -> bytes:
        return json.dumps({"agent_id": AGENT, "question": question}).encode()

    try:
        async with app.lifespan():
            for i in range(5):  # first model runs, code paths
                await call("POST", "/v1/retrieve", body(f"warm-up {i} about cells"))
            direct: list[float] = []
            asgi: list[float] = []
            _replace_turn(timed_turn)
            for position, question in enumerate(questions):
                # The same words, not the same text: each question embedded once per path.
                passes: list[tuple[list[float], Awaitable[object]]] = [
                    (asgi, call("POST", "/v1/retrieve", body(question))),
                    (direct, real(services.retrieval, principal, AGENT, question + " ", [])),
                ]
                for times, pending in passes if position % 2 else passes[::-1]:
                    started = time.perf_counter()
                    await pending
                    times.append(time.perf_counter() - started)
            canned_result = await real(services.retrieval, principal, AGENT, "what do cells do", [])

            async def canned_turn(*_: Any, **__: Any) -> turn.TurnResult:
                return canned_result

            _replace_turn(canned_turn)
            canned = []
            for _ in range(repeats):
                started = time.perf_counter()
                status, _ = await call("POST", "/v1/retrieve", body("what do cells do"))
                canned.append(time.perf_counter() - started)
                if status != 200:
                    raise RuntimeError(f"canned turn answered {status}")
            health = []
            for _ in range(repeats):
                started = time.perf_counter()
                await call("GET", "/health/live", b"")
                health.append(time.perf_counter() - started)
    finally:
        _replace_turn(real)
        await services.close()
    return {
        "direct_turn_median_ms": _median_ms(direct),
        "asgi_turn_median_ms": _median_ms(asgi),
        "asgi_wrapper_median_ms": _median_ms([a - i for a, i in zip(asgi, inner, strict=True)]),
        "canned_turn_request_median_ms": _median_ms(canned),
        "health_live_median_ms": _median_ms(health),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("--output", type=Path, default=RESULTS / "framework_overhead.json")
    args = parser.parse_args()
    if not (args.data_dir / "bench-key.txt").exists():
        parser.error("build the store with bench.turn_latency first")
    questions = [q["text"] for q in _read_jsonl(DATASET / "queries.jsonl")][: args.queries]
    with tempfile.TemporaryDirectory(prefix="kbgate-framework-") as scratch:
        copy = Path(scratch) / "data"
        shutil.copytree(args.data_dir, copy, ignore=shutil.ignore_patterns("models"))
        (copy / "models").symlink_to((args.data_dir / "models").resolve())
        figures = await _measure(copy, questions, args.repeats)
    result = {
        "command": "uv run python -m bench.framework_overhead " + " ".join(sys.argv[1:]),
        "queries": len(questions),
        **figures,
        "notes": (
            "In process, no socket: the app from create_app called as an ASGI app. direct: "
            "gateway.retrieval.turn.retrieve; asgi: POST /v1/retrieve, alternated with direct per "
            "question (distinct questions); asgi_wrapper: the request minus the turn inside "
            "it; canned: the request with a precomputed turn, back to back (warm caches)."
        ),
    }
    args.output.parent.mkdir(exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
