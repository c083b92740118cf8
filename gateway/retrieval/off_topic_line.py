"""The off-topic line: the dense floor a KB's turns use when no level sets one.

A fixed cosine cannot suit every KB: a general-knowledge KB lies close to most everyday
questions (10% of off-topic questions reach 0.50 on dbpedia-entity-5k), a narrow one far
from them, where answerable questions also score lower (5% of SciFact's claims stay at
0.45 or less). So each KB measures its own line against built-in probes: 180 everyday
questions on 30 topics (`data/offtopic_probes.jsonl`) no KB is about as a whole. Each
probe's best cosine inside the turn's Scope is taken; each topic keeps its highest; the
line is the sixth highest topic's, bounded to [`LINE_LOWEST`, `LINE_HIGHEST`]. Up to five
topics may lie close to the KB (a nutrition KB near the nutrition, fitness and cooking
probes) without lifting its line.

The line is measured per Scope: what the caller's clearance lets it see, and nothing
else, so no caller's abstentions depend on passages it may not read. Lines are kept in
memory. A Scope's first turn starts its measurement in the background (a dense search
per probe, one engine call each, then as long a pause, one Scope at a time in the
process; the probes' embeddings are computed once and kept beside the models) and is
served the platform default, as are the turns until it is done: about two seconds for
13,000 points. A known line is measured again in the background when a turn finds it
older than `RECOUNT_AFTER_S` and its Scope's point count has moved by more than
`REMEASURE_SHARE` since it was measured. A KB or agent setting `score_threshold`
overrides the line (docs/decisions/off-topic-line.md).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.retrieval.index_calls import call_index
from ingest.embedding import Embedding
from ingest.index import IndexUnavailableError, Leg, LegKind
from ingest.lru import LruCache
from ingest.payload import Scope

if TYPE_CHECKING:
    from gateway.retrieval.plan import KbPlan
    from gateway.runtime.services import Services

#: the line's bounds, whatever the probes score
LINE_LOWEST = 0.40
LINE_HIGHEST = 0.60
#: topics whose probes may lie close to a KB without lifting its line
TOPICS_ALLOWED_NEAR = 5
#: probes searched in one engine call (Qdrant Edge holds the GIL for the call's length: a
#: probe far from everything is searched exactly, about 5 ms in a Scope of 13,000 points)
PROBES_PER_CALL = 1
#: a known line's age after which a turn has its Scope's points counted again
RECOUNT_AFTER_S = 60.0
#: the share of a Scope's points that must have come or gone since its line was measured
#: for it to be measured again: a few more passages of a KB's own kind hardly move a
#: line, and a large Scope's measurement takes up to half the event loop for seconds
REMEASURE_SHARE = 0.1
#: Scopes whose lines are kept in memory
LINES_KEPT = 20_000
#: the probes' embeddings, in the model dir
PROBE_VECTORS_FILE = "offtopic-probes.json"
#: how far a probe's embedding may move and still be the same model's
_SAME_VECTOR = 1e-5

Key = tuple[str, Scope]


@dataclass(frozen=True, slots=True)
class Probe:
    """One built-in everyday question."""

    topic: str
    text: str


def load_probes() -> tuple[Probe, ...]:
    raw = (resources.files("gateway.retrieval") / "data" / "offtopic_probes.jsonl").read_text(
        "utf-8"
    )
    return tuple(Probe(**json.loads(line)) for line in raw.splitlines() if line.strip())


def line_from_best(best: Iterable[tuple[str, float]]) -> float:
    """The line from each probe's (topic, best cosine; 0 with no hit)."""
    highest: dict[str, float] = {}
    for topic, score in best:
        highest[topic] = max(score, highest.get(topic, 0.0))
    ranked = sorted(highest.values(), reverse=True)
    nearest_counted = ranked[TOPICS_ALLOWED_NEAR] if len(ranked) > TOPICS_ALLOWED_NEAR else 0.0
    return min(max(nearest_counted, LINE_LOWEST), LINE_HIGHEST)


@dataclass(slots=True)
class _Line:
    value: float
    points: int
    checked_at: float


class OffTopicLines:
    """Each Scope's measured line, in memory (a cache: any process measures the same)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lines: LruCache[Key, _Line] = LruCache(LINES_KEPT)
        self._probes: tuple[Probe, ...] | None = None
        self._vectors: list[tuple[float, ...]] | None = None
        self._first: dict[Key, asyncio.Task[None]] = {}
        self._one_at_a_time = asyncio.Semaphore(1)
        self._embedding = asyncio.Lock()
        self._clock = clock

    async def line(self, services: Services, plan: KbPlan, *, wait: bool = False) -> float | None:
        """The plan's line; None while it is being measured for the first time (the
        platform default serves meanwhile: a Scope's first turns never wait for the probes'
        searches), or when the index could not be asked. `wait`: wait for it instead."""
        key: Key = (plan.collection, plan.scope)
        known = self._lines.get(key)
        if known is None:
            first = self._first.get(key)
            if first is None:
                first = services.background.start(
                    ("off_topic_line", *key), self._measure_first(services, plan, key)
                )
                self._first[key] = first
                first.add_done_callback(lambda _: self._first.pop(key, None))
            if not wait:
                return None
            await asyncio.shield(first)
            measured = self._lines.get(key)
            return None if measured is None else measured.value
        task = ("off_topic_line", *key)
        if self._clock() - known.checked_at >= RECOUNT_AFTER_S and not services.background.running(
            task
        ):
            services.background.start(task, self._recheck(services, plan, known))
        return known.value

    def known(self, collection: str, scope: Scope) -> float | None:
        """The Scope's line if it has been measured; starts nothing."""
        found = self._lines.get((collection, scope))
        return None if found is None else found.value

    async def _measure_first(self, services: Services, plan: KbPlan, key: Key) -> None:
        with suppress(TimeoutError, IndexUnavailableError):
            self._lines.put(key, await self.measure(services, plan))

    async def measure(self, services: Services, plan: KbPlan) -> _Line:
        """Search every probe inside the plan's Scope, one engine call each with turns
        between them; one measurement at a time in the process."""
        async with self._one_at_a_time:
            return await self._measured(services, plan)

    async def _measured(self, services: Services, plan: KbPlan) -> _Line:
        probes, vectors = await self._probe_vectors(services)
        index, timeout_s = services.index, services.config.qdrant_timeout_s
        points = await call_index(
            index.holds_the_gil, timeout_s, index.count, plan.collection, plan.scope
        )
        best: list[tuple[str, float]] = []
        for start in range(0, len(probes), PROBES_PER_CALL):
            chunk = vectors[start : start + PROBES_PER_CALL]
            legs = [Leg(kind=LegKind.DENSE, dense=vector, limit=1) for vector in chunk]
            called = time.perf_counter()
            result = await call_index(
                index.holds_the_gil, timeout_s, index.rank, plan.collection, plan.scope, legs
            )
            # as long again for everything else: a measurement takes at most half the loop
            await asyncio.sleep(time.perf_counter() - called)
            topics = (probe.topic for probe in probes[start : start + PROBES_PER_CALL])
            best.extend(
                (topic, found[0].score if found else 0.0)
                for topic, found in zip(topics, result.legs, strict=True)
            )
        services.telemetry.count("off_topic_lines_measured")
        return _Line(line_from_best(best), points, self._clock())

    async def _recheck(self, services: Services, plan: KbPlan, known: _Line) -> None:
        index = services.index
        try:
            points = await call_index(
                index.holds_the_gil,
                services.config.qdrant_timeout_s,
                index.count,
                plan.collection,
                plan.scope,
            )
            moved = abs(points - known.points) > REMEASURE_SHARE * known.points
            fresh = await self.measure(services, plan) if moved else known
        except (TimeoutError, IndexUnavailableError):
            return
        fresh.checked_at = self._clock()
        self._lines.put((plan.collection, plan.scope), fresh)

    async def _probe_vectors(
        self, services: Services
    ) -> tuple[tuple[Probe, ...], Sequence[tuple[float, ...]]]:
        async with self._embedding:
            if self._probes is None or self._vectors is None:
                probes = load_probes()
                path = services.config.model_dir / PROBE_VECTORS_FILE
                vectors = await asyncio.to_thread(
                    probe_vectors, path, probes, services.embedder.embed_queries
                )
                self._probes, self._vectors = probes, vectors
        return self._probes, self._vectors


def probe_vectors(
    path: Path, probes: Sequence[Probe], embed: Callable[[Sequence[str]], list[Embedding]]
) -> list[tuple[float, ...]]:
    """The probes' question embeddings, kept beside the models in `path` (about 1 s of CPU
    to compute). Kept ones serve while the first probe, embedded again, still matches its
    kept vector and the texts are the same: another model or probe set recomputes them."""
    texts = [probe.text for probe in probes]
    try:
        kept = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, dict) and kept.get("texts") == texts:
        vectors = [tuple(float(x) for x in vector) for vector in kept["vectors"]]
        again = embed(texts[:1])[0].dense
        if (
            len(again) == len(vectors[0])
            and max(abs(a - b) for a, b in zip(again, vectors[0], strict=True)) <= _SAME_VECTOR
        ):
            return vectors
    vectors = [embedding.dense for embedding in embed(texts)]
    written = path.with_suffix(".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(json.dumps({"texts": texts, "vectors": vectors}), "utf-8")
        written.replace(path)
    except OSError:
        pass  # a read-only model dir: computed again by the next process
    return vectors
