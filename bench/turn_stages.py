"""Where a retrieval turn's CPU goes, stage by stage, in process (no HTTP).

On a data dir prepared by `bench.turn_against` (or `bench.turn_latency`), with the
gateway's own services: the KB's off-topic line measured where the checkout has one, the
SciFact questions asked once (their embeddings cached from then on), then `--rounds` times
more through the turn's entry point. Each stage function is timed with the process's CPU
clock (every thread: Edge's search threads count in the engine calls, the turn records'
thread in `record`); a stage's time leaves out the stages it calls. Stages:

- plan: settings, Scopes, the off-topic lines in force, the effective settings;
- embed: the question embeddings (cached here: their lookup);
- legs/search: the legs' ranking calls' own Python, newest versions, the answer rules;
- engine rank / fetch / keyword_idf / held_terms: the Index calls (adapter and engine);
- fuse, copies (dropping copies), fetch, redact, record, fence/evidence, telemetry;
- turn (other): the rest of the turn's own code.

Also the CPU of the process's threads by name (Edge's search threads have their own).
Runs in any checkout since f309b1e (2026-12-01), whose turn lived in `gateway.turn` and
took the whole `Services`: the stage functions are looked up by name in either layout,
and stages not found are left out.
Run it with that checkout's interpreter, which imports its own gateway and bench:

    uv run python -m bench.turn_stages --data-dir /tmp/kbgate-against/this
    /work/wt-old/.venv/bin/python bench/turn_stages.py --data-dir /tmp/kbgate-against/other
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import inspect
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench.turn_latency as bench
from settings.config import load_config

#: (module, function name, stage) in this layout and in f309b1e's (`gateway.turn`).
STAGES: tuple[tuple[str, str, str], ...] = (
    ("gateway.retrieval.turn", "plan_turn", "plan"),
    ("gateway.retrieval.turn", "with_lines", "plan"),
    ("gateway.retrieval.turn", "effective_settings", "plan"),
    ("gateway.retrieval.turn", "search_while_embedding", "legs/search"),
    ("gateway.retrieval.turn", "fused_and_capped", "fuse"),
    ("gateway.retrieval.turn", "fetch_distinct", "fetch"),
    ("gateway.retrieval.turn", "_count", "telemetry"),
    ("gateway.retrieval.turn", "_redacted", "redact"),
    ("gateway.retrieval.turn", "_record", "record"),
    ("gateway.retrieval.turn", "turn_retention", "record"),
    ("gateway.retrieval.turn", "fence", "fence/evidence"),
    ("gateway.retrieval.turn", "turn_narrowing", "narrowing"),
    ("gateway.retrieval.turn", "with_question_vectors", "plan"),
    ("gateway.retrieval.turn", "preferred", "fuse"),
    ("gateway.retrieval.legs", "without_copies", "copies"),
    ("gateway.retrieval.legs", "fetch_chosen", "fetch"),
    ("gateway.turn", "plan_turn", "plan"),
    ("gateway.turn", "_effective", "plan"),
    ("gateway.turn", "embed_queries", "embed"),
    ("gateway.turn", "search_plans", "legs/search"),
    ("gateway.turn", "fuse", "fuse"),
    ("gateway.turn", "cap_per_knowledge_base", "fuse"),
    ("gateway.turn", "fetch_chosen", "fetch"),
    ("gateway.turn", "_count", "telemetry"),
    ("gateway.turn", "_redacted", "redact"),
    ("gateway.turn", "_record", "record"),
    ("gateway.turn", "fence", "fence/evidence"),
)
#: The services' parts whose methods are stages of their own.
SERVICE_STAGES: tuple[tuple[str, str, str], ...] = (
    ("query_embeddings", "start", "embed"),
    ("index", "rank", "engine rank"),
    ("index", "fetch", "engine fetch"),
    ("index", "keyword_idf", "engine keyword_idf"),
    ("index", "held_terms", "engine held_terms"),
    ("index", "count", "engine count"),
)


class StageClock:
    """CPU seconds per stage, each stage's own (the stages it calls left out)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._open: list[list[float]] = []  # per open stage: [CPU of the stages it called]

    def timed(self, function: Callable[..., Any], stage: str) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def timed_coroutine(*args: Any, **kwargs: Any) -> Any:
                started = self._enter()
                try:
                    return await function(*args, **kwargs)
                finally:
                    self._leave(stage, started)

            return timed_coroutine

        @functools.wraps(function)
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            started = self._enter()
            try:
                return function(*args, **kwargs)
            finally:
                self._leave(stage, started)

        return timed_call

    def _enter(self) -> float:
        self._open.append([0.0])
        return time.process_time()

    def _leave(self, stage: str, started: float) -> None:
        spent = time.process_time() - started
        (inner,) = self._open.pop()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + spent - inner
        if self._open:
            self._open[-1][0] += spent


def _thread_seconds() -> dict[str, float]:
    """CPU seconds of this process's threads by name (a pool's numbers left off)."""
    seconds: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip().rstrip("0123456789-")
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds[name] = seconds.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return seconds


def _instrument(clock: StageClock, services: Any) -> tuple[Any, list[str]]:
    """The turn's entry point, timed, with every stage function found timed; and the
    stages found."""
    found = []
    turn_module = None
    for module_name, name, stage in STAGES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if module_name.endswith(".turn"):
            turn_module = module
        function = getattr(module, name, None)
        if function is not None:
            setattr(module, name, clock.timed(function, stage))
            found.append(f"{module_name}.{name}")
    for part, name, stage in SERVICE_STAGES:
        owner = getattr(services, part, None)
        method = getattr(owner, name, None)
        if method is not None:
            setattr(owner, name, clock.timed(method, stage))
            found.append(f"services.{part}.{name}")
    if turn_module is None:
        raise RuntimeError("no retrieval turn module in this checkout")
    return clock.timed(turn_module.retrieve, "turn (other)"), found


def _module(*names: str) -> Any:
    """The first of these modules this checkout has (its layout, or f309b1e's)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(f"none of {names}")


async def _settled(services: Any, principal: Any, agent: str) -> None:
    """Wait for the KB's off-topic line where the checkout has lines."""
    try:
        plan = importlib.import_module("gateway.retrieval.plan")
    except ImportError:
        return
    await plan.settle_lines(getattr(services, "planning", services), principal, agent)


async def measure(data_dir: Path, agent: str, queries: int, rounds: int) -> dict[str, Any]:
    env = {
        "KBGATE_PLATFORM_KEY": bench.PLATFORM_KEY,
        "KBGATE_MODEL_CACHE_DIR": str(data_dir / "models"),
    }
    runtime = _module("gateway.runtime.services", "gateway.services")
    telemetry = _module("gateway.runtime.telemetry", "gateway.telemetry")
    logger = telemetry.Telemetry(telemetry.build_logger("WARNING"))
    services = await runtime.build_services(load_config(env, data_dir=data_dir), logger)
    try:
        principal = bench._principal()
        await _settled(services, principal, agent)
        questions = [q["text"] for q in bench._read_jsonl(bench.DATASET / "queries.jsonl")]
        questions = questions[:queries]
        clock = StageClock()
        retrieve, found = _instrument(clock, services)
        turn = getattr(services, "retrieval", services)  # what the turn takes, either layout
        for question in questions:  # embeddings cached, lazy state loaded
            await retrieve(turn, principal, agent, question, [])
        clock.seconds.clear()
        threads = _thread_seconds()
        cpu = time.process_time()
        for _ in range(rounds):
            for question in questions:
                await retrieve(turn, principal, agent, question, [])
        turns = rounds * len(questions)
        cpu = time.process_time() - cpu
        after = _thread_seconds()
    finally:
        await services.close()
    ordered = sorted(clock.seconds.items(), key=lambda item: -item[1])
    return {
        "agent": agent,
        "turns": turns,
        "cpu_ms_per_turn": round(cpu * 1000 / turns, 3),
        "stage_cpu_ms_per_turn": {stage: round(s * 1000 / turns, 3) for stage, s in ordered},
        "thread_cpu_ms_per_turn": {
            name: round((seconds - threads.get(name, 0.0)) * 1000 / turns, 2)
            for name, seconds in sorted(after.items())
            if seconds > threads.get(name, 0.0)
        },
        "stages_found": found,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--agent", nargs="+", default=["bench-agent", "bench-agent-redacting"])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    results = [
        asyncio.run(measure(args.data_dir, agent, args.queries, args.rounds))
        for agent in args.agent
    ]
    text = json.dumps(results, indent=2)
    if args.output is not None:
        args.output.write_text(text + "\n")
    print(text)
    print(f"  ({sys.executable})", file=sys.stderr)


if __name__ == "__main__":
    main()
