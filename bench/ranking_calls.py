"""The turn's ranking call on a turn-bench data dir, ready to time (`bench.keyword_corpus`,
`bench.ranking_refs`): the gateway's services on the Qdrant Edge store, the bench agent's
plan, and each golden-set question's legs as a turn builds them."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.turn_latency import AGENT, DATASET, PLATFORM_KEY, _principal, _read_jsonl
from gateway.retrieval.legs import legs_for
from gateway.retrieval.plan import KbPlan, plan_turn
from gateway.runtime.services import build_services
from gateway.runtime.telemetry import Telemetry, build_logger
from ingest.index import Leg
from ingest.qdrant_edge import EdgeIndex
from settings.config import load_config

#: how both benchmarks' results describe what was timed
CALL_NOTE = (
    "The turn's ranking call (dense, passage keyword and document keyword legs, top_k 8 "
    "depth) per question, alternated: "
)


@dataclass(frozen=True, slots=True)
class RankingCalls:
    index: EdgeIndex
    plan: KbPlan
    #: per question, the legs of its ranking call
    legs: list[list[Leg]]


def parser(doc: str | None, output: Path) -> argparse.ArgumentParser:
    """The options both benchmarks take."""
    options = argparse.ArgumentParser(description=doc)
    options.add_argument("--data-dir", type=Path, required=True)
    options.add_argument("--queries", type=int, default=300)
    options.add_argument("--rounds", type=int, default=3)
    options.add_argument("--output", type=Path, default=output)
    return options


@asynccontextmanager
async def ranking_calls(data_dir: Path, queries: int) -> AsyncIterator[RankingCalls]:
    """The first `queries` golden-set questions' ranking calls, on services kept open."""
    env = {"KBGATE_PLATFORM_KEY": PLATFORM_KEY, "KBGATE_MODEL_CACHE_DIR": str(data_dir / "models")}
    services = await build_services(
        load_config(env, data_dir=data_dir), Telemetry(build_logger("WARNING"))
    )
    try:
        index = services.index
        if not isinstance(index, EdgeIndex):
            raise SystemExit("this benchmark measures the embedded Qdrant Edge index")
        plan = (await plan_turn(services, _principal(), AGENT)).plans[0]
        questions = [q["text"] for q in _read_jsonl(DATASET / "queries.jsonl")][:queries]
        legs = [
            legs_for(
                plan,
                services.embedder.embed_queries([question]),
                services.config.leg_limit,
                document_keywords=index.document_keywords(plan.collection),
            )
            for question in questions
        ]
        yield RankingCalls(index, plan, legs)
    finally:
        await services.close()


def write_result(result: dict[str, Any], output: Path) -> None:
    output.parent.mkdir(exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
