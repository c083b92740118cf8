"""Where a turn on a `bench.scale` store goes, in process: the engine calls a turn makes
(count, wall time), this code against variants, alternated question by question.

Arms (`--arms`, the first is the baseline of the ratios):

- `this`: the code as it is;
- `counted`: `keyword_idf`'s N (how many of the Scope's points hold each keyword vector)
  counted at every call instead of kept between writes (`ingest.engines.edge.counts`);
- `shard-idf`: keyword legs' IDF over the whole shard instead of the Scope (what the
  isolation rule costs; never a setting: other workspaces' points would move scores);
- `no-acorn`: dense legs' graph search without ACORN (what filtered recall costs:
  docs/decisions/filtered-search.md).

Each turn workspace of `bench.scale` (largest, median, tiny) asks half SciFact questions
and half its own, each question once per arm, the arms' order turned every question; one
caller, per-turn wall time.

    uv run python -m bench.scale_turn_calls --work-dir /tmp/kbgate-scale --size 1000000 \\
        --base-docs 1000 --arms this counted --output bench/results/scale_kept_counts.json
    uv run python -m bench.scale_turn_calls --work-dir /tmp/kbgate-scale --size 1000000 \\
        --base-docs 1000 --arms this shard-idf no-acorn --workspaces largest \\
        --output bench/results/scale_turn_calls.json
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from qdrant_edge import SearchParams

from bench import scale
from bench.scale_corpus import Layout, load_base, own_questions, scifact_questions
from gateway.access.auth import Principal
from gateway.retrieval import turn
from gateway.runtime.services import build_embedder, build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.engines.common import DENSE_EF
from ingest.engines.edge import engine as edge_engine
from ingest.engines.edge import index as edge_index
from ingest.engines.edge.counts import CountsBetweenWrites
from ingest.engines.edge.index import EdgeIndex
from ingest.index import Leg
from ingest.payload import DEFAULT_CLEARANCE, Scope
from settings.config import load_config
from settings.records import Role

ARMS = ("this", "counted", "shard-idf", "no-acorn")
#: The engine calls timed, by method name.
CALLS = ("rank", "keyword_idf", "keyword_holders", "fetch", "count", "held_terms")


class _SwitchedCounts(CountsBetweenWrites):
    """The adapter's kept counts, with the keyword holders kept (on) or not (off)."""

    def __init__(self) -> None:
        super().__init__()
        self.holders_kept = True

    def kept(self, collection: str, scope: Scope, key: Hashable) -> int | None:
        if not self.holders_kept and _holders(key):
            return None
        return super().kept(collection, scope, key)

    def keep(self, collection: str, scope: Scope, key: Hashable, mark: Any, count: int) -> None:
        if self.holders_kept or not _holders(key):
            super().keep(collection, scope, key, mark, count)


def _holders(key: Hashable) -> bool:
    return isinstance(key, tuple) and bool(key) and key[0] == edge_index._HOLDERS


class _Arms:
    """Puts the engine in one arm's state; times its calls under the arm's name."""

    def __init__(self, index: EdgeIndex) -> None:
        self.counts = _SwitchedCounts()
        index._counts = self.counts  # the adapter's own, swapped for the bench's switch
        self.arm = "this"
        self.calls: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self._idf_over = edge_engine._idf_over
        self._filtered_dense = edge_engine._FILTERED_DENSE
        for name in CALLS:
            method = getattr(index.engine, name)
            setattr(index.engine, name, self._timed(name, method))

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                kinds = _leg_kinds(args[2]) if name in {"rank", "keyword_idf"} else ""
                spent = (time.perf_counter() - started) * 1000
                self.calls[self.arm][f"{name} {kinds}".strip()].append(spent)

        return timed

    def enter(self, arm: str) -> None:
        self.arm = arm
        self.counts.holders_kept = arm != "counted"
        edge_engine._idf_over = _shard_idf if arm == "shard-idf" else self._idf_over
        edge_engine._FILTERED_DENSE = (
            SearchParams(hnsw_ef=DENSE_EF) if arm == "no-acorn" else self._filtered_dense
        )


def _shard_idf(corpus: Any) -> Any:
    return SearchParams()


def _leg_kinds(legs: Sequence[Leg]) -> str:
    return "+".join(sorted(leg.kind.value for leg in legs))


def _principal(layout: Layout, workspace: int) -> Principal:
    """The workspace's turn key: the default clearance, as `bench.scale`'s keys."""
    return replace(
        scale._principal(layout, workspace),
        roles=frozenset({Role.ADMIN, Role.RETRIEVE}),
        clearance=DEFAULT_CLEARANCE,
    )


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    env = scale._env(args.work_dir)
    embedder = build_embedder(load_config(env, data_dir=args.work_dir / "embedder"))
    base = load_base(args.work_dir, embedder, args.base_docs)
    layout = Layout.make(7)
    store = scale.Store(args.work_dir, args.size, 7, base, layout)
    services = await build_services(
        load_config(env, data_dir=store.data_dir), Telemetry(build_logger("WARNING"))
    )
    if not isinstance(services.index, EdgeIndex):
        raise SystemExit("the store is not on Qdrant Edge")
    arms = _Arms(services.index)
    results: dict[str, Any] = {}
    try:
        for offset, (name, workspace) in enumerate(scale.turn_workspaces(store.plan).items()):
            if name not in args.workspaces:
                continue
            principal = _principal(layout, workspace)
            half = args.questions // 2
            asked = scifact_questions()[offset * half : (offset + 1) * half] + own_questions(
                store.plan, base, store.plan.workspace == workspace, args.questions - half, 99
            )
            for question in asked[:4]:  # lazy state loaded, embeddings cached
                await turn.retrieve(services.retrieval, principal, scale.AGENT, question, [])
            arms.calls.clear()
            times: dict[str, list[float]] = {arm: [] for arm in args.arms}
            for position, question in enumerate(asked):
                turned = position % len(args.arms)
                for arm in [*args.arms[turned:], *args.arms[:turned]]:
                    arms.enter(arm)
                    started = time.perf_counter()
                    await turn.retrieve(services.retrieval, principal, scale.AGENT, question, [])
                    times[arm].append((time.perf_counter() - started) * 1000)
            arms.enter("this")
            results[name] = _summary(times, arms.calls, len(asked))
            print(name, json.dumps(results[name]), file=sys.stderr, flush=True)
    finally:
        await services.close()
    return results


def _summary(
    times: dict[str, list[float]], calls: dict[str, dict[str, list[float]]], turns: int
) -> dict[str, Any]:
    first, *others = times
    return {
        "turns_per_arm": turns,
        "median_ms": {arm: round(statistics.median(v), 2) for arm, v in times.items()},
        "mean_ms": {arm: round(statistics.mean(v), 2) for arm, v in times.items()},
        "per_question_ratio_median": {
            f"{arm}/{first}": round(
                statistics.median(a / b for a, b in zip(times[arm], times[first], strict=True)),
                3,
            )
            for arm in others
        },
        "engine_calls": {
            arm: {
                call: {
                    "per_turn": round(len(spent) / turns, 2),
                    "median_ms": round(statistics.median(spent), 2),
                    "ms_per_turn": round(sum(spent) / turns, 2),
                }
                for call, spent in sorted(by_call.items(), key=lambda item: -sum(item[1]))
            }
            for arm, by_call in calls.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--base-docs", type=int, default=None)
    parser.add_argument("--questions", type=int, default=60, help="per workspace and arm")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=["this", "counted"])
    parser.add_argument(
        "--workspaces", nargs="+", choices=scale.TURN_SCOPES, default=list(scale.TURN_SCOPES)
    )
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    found = asyncio.run(measure(args))
    result = {
        "command": "uv run python -m bench.scale_turn_calls " + " ".join(sys.argv[1:]),
        "size": args.size,
        "load_average_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
        "workspaces": found,
    }
    text = json.dumps(result, indent=2)
    if args.output is not None:
        args.output.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
