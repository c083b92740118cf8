"""The off-topic lines: the floors a KB's turns use when no level sets `score_threshold`.

A fixed cosine cannot suit every KB: a general-knowledge KB lies close to most everyday
questions (10% of off-topic questions reach 0.50 on dbpedia-entity-5k), a narrow one far
from them, where answerable questions also score lower (5% of SciFact's claims stay at
0.45 or less). So each KB measures its own lines against built-in probes: 180 everyday
questions on 30 topics (`data/offtopic_probes.jsonl`) no KB is about as a whole. Each
probe's best cosine and best keyword share (`ingest.keyword_scale`) inside the turn's
Scope are taken; each topic keeps its highest; a line is the sixth highest topic's. Up to
five topics may lie close to the KB (a nutrition KB near the nutrition, fitness and
cooking probes) without lifting it.

- The **dense line**, on the best cosine, bounded to [`LINE_LOWEST`, `LINE_HIGHEST`]: a
  question whose best passage reaches it is answered.
- The **joint line**, on `gateway.retrieval.answering.joint_score` (best cosine + 0.2 x
  best keyword share), at least the dense line: a question below the dense line is still
  answered when its cosine and its words together reach it, as the probes' seldom do.

The lines are measured per Scope: what the caller's clearance lets it see, and nothing
else, so no caller's abstentions depend on passages it may not read. Lines are kept in
memory. A Scope's first turn starts their measurement in the background (per probe one
engine call for its legs and one for its keyword IDFs, then as long a pause, one Scope at
a time in the process; the probes' embeddings are computed once and kept beside the
models) and is served the platform default, as are the turns until it is done: a few
seconds for 13,000 points. Known lines are measured again in the background when a turn
finds them older than `RECOUNT_AFTER_S` and their Scope's point count has moved by more
than `REMEASURE_SHARE` since they were measured. A KB or agent setting `score_threshold`
overrides both (docs/decisions/off-topic-line.md).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.retrieval.answering import joint_score, keyword_bests, keyword_legs
from gateway.retrieval.index_calls import call_index
from ingest.embedding import Embedding
from ingest.index import Index, IndexUnavailableError, Leg, LegKind, RankedPoint, SparseVector
from ingest.lru import LruCache
from ingest.payload import Scope

if TYPE_CHECKING:
    from gateway.retrieval.plan import KbPlan
    from gateway.runtime.services import Services

#: the dense line's bounds, whatever the probes score
LINE_LOWEST = 0.40
LINE_HIGHEST = 0.60
#: topics whose probes may lie close to a KB without lifting its lines
TOPICS_ALLOWED_NEAR = 5
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
T = TypeVar("T")


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


@dataclass(frozen=True, slots=True)
class Lines:
    """A Scope's two measured lines."""

    #: on the best cosine
    dense: float
    #: on `joint_score`; never below `dense`
    joint: float


def line_from_best(best: Iterable[tuple[str, float]]) -> float:
    """The dense line from each probe's (topic, best cosine; 0 with no hit)."""
    return min(max(_nearest_counted(best), LINE_LOWEST), LINE_HIGHEST)


def lines_from_best(best: Iterable[tuple[str, float, float]]) -> Lines:
    """Both lines from each probe's (topic, best cosine, best keyword share; 0 for none)."""
    probes = list(best)
    dense = line_from_best((topic, cosine) for topic, cosine, _ in probes)
    joint = _nearest_counted((topic, joint_score(c, share)) for topic, c, share in probes)
    return Lines(dense=dense, joint=max(joint, dense))


def _nearest_counted(best: Iterable[tuple[str, float]]) -> float:
    """The highest value of the sixth highest topic (0 with fewer topics)."""
    highest: dict[str, float] = {}
    for topic, score in best:
        highest[topic] = max(score, highest.get(topic, 0.0))
    ranked = sorted(highest.values(), reverse=True)
    return ranked[TOPICS_ALLOWED_NEAR] if len(ranked) > TOPICS_ALLOWED_NEAR else 0.0


@dataclass(slots=True)
class _Measured:
    lines: Lines
    points: int
    checked_at: float


class OffTopicLines:
    """Each Scope's measured lines, in memory (a cache: any process measures the same)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lines: LruCache[Key, _Measured] = LruCache(LINES_KEPT)
        self._probes: tuple[Probe, ...] | None = None
        self._embeddings: list[Embedding] | None = None
        self._first: dict[Key, asyncio.Task[None]] = {}
        self._one_at_a_time = asyncio.Semaphore(1)
        self._embedding = asyncio.Lock()
        self._clock = clock

    async def lines(self, services: Services, plan: KbPlan, *, wait: bool = False) -> Lines | None:
        """The plan's lines; None while they are being measured for the first time (the
        platform default serves meanwhile: a Scope's first turns never wait for the probes'
        searches), or when the index could not be asked. `wait`: wait for them instead."""
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
            return None if measured is None else measured.lines
        task = ("off_topic_line", *key)
        if self._clock() - known.checked_at >= RECOUNT_AFTER_S and not services.background.running(
            task
        ):
            services.background.start(task, self._recheck(services, plan, known))
        return known.lines

    def known(self, collection: str, scope: Scope) -> Lines | None:
        """The Scope's lines if they have been measured; starts nothing."""
        found = self._lines.get((collection, scope))
        return None if found is None else found.lines

    async def _measure_first(self, services: Services, plan: KbPlan, key: Key) -> None:
        with suppress(TimeoutError, IndexUnavailableError):
            self._lines.put(key, await self.measure(services, plan))

    async def measure(self, services: Services, plan: KbPlan) -> _Measured:
        """Search every probe inside the plan's Scope, one probe at a time with turns
        between them; one measurement at a time in the process."""
        async with self._one_at_a_time:
            return await self._measured(services, plan)

    async def _measured(self, services: Services, plan: KbPlan) -> _Measured:
        probes, embeddings = await self._probe_embeddings(services)
        index, timeout_s = services.index, services.config.qdrant_timeout_s
        points = await call_index(
            index.holds_the_gil, timeout_s, index.count, plan.collection, plan.scope
        )
        best: list[tuple[str, float, float]] = []
        for probe, embedding in zip(probes, embeddings, strict=True):
            # One engine call at a time, each followed by a pause as long: a measurement
            # takes at most half the loop, and no turn waits for more than one call.
            found = await _paused(call_index, index.holds_the_gil, timeout_s, probe_legs,
                                  index, plan, embedding)  # fmt: skip
            cosine = found[0][1][0].score if found[0][1] else 0.0
            bests = await _paused(call_index, index.holds_the_gil, timeout_s, keyword_bests,
                                  index, plan.collection, plan.scope, found)  # fmt: skip
            best.append((probe.topic, cosine, max((b.share for b in bests), default=0.0)))
        services.telemetry.count("off_topic_lines_measured")
        return _Measured(lines_from_best(best), points, self._clock())

    async def _recheck(self, services: Services, plan: KbPlan, known: _Measured) -> None:
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

    async def _probe_embeddings(
        self, services: Services
    ) -> tuple[tuple[Probe, ...], Sequence[Embedding]]:
        async with self._embedding:
            if self._probes is None or self._embeddings is None:
                probes = load_probes()
                path = services.config.model_dir / PROBE_VECTORS_FILE
                embeddings = await asyncio.to_thread(
                    probe_embeddings, path, probes, services.embedder.embed_queries
                )
                self._probes, self._embeddings = probes, embeddings
        return self._probes, self._embeddings


def probe_legs(
    index: Index, plan: KbPlan, embedding: Embedding
) -> list[tuple[Leg, Sequence[RankedPoint]]]:
    """A probe's dense leg and the KB's keyword legs inside the plan's Scope, one passage
    each, with what each found (the dense leg first). Blocking."""
    document_keywords = index.document_keywords(plan.collection)
    legs = [Leg(kind=LegKind.DENSE, dense=embedding.dense, limit=1)]
    if plan.keyword_weight > 0:
        legs += keyword_legs(embedding.sparse, 1, document_keywords=document_keywords)
    return list(zip(legs, index.rank(plan.collection, plan.scope, legs).legs, strict=True))


async def _paused(call: Callable[..., Awaitable[T]], *args: Any) -> T:
    """`call(*args)`, then a pause as long as it took."""
    called = time.perf_counter()
    result = await call(*args)
    await asyncio.sleep(time.perf_counter() - called)
    return result


def probe_embeddings(
    path: Path, probes: Sequence[Probe], embed: Callable[[Sequence[str]], list[Embedding]]
) -> list[Embedding]:
    """The probes' question embeddings, kept beside the models in `path` (about 1 s of CPU
    to compute). Kept ones serve while the first probe, embedded again, still matches its
    kept embedding and the texts are the same: another model or probe set recomputes them."""
    texts = [probe.text for probe in probes]
    try:
        kept = _kept_embeddings(json.loads(path.read_text("utf-8")), texts)
    except (OSError, ValueError, KeyError, TypeError):
        kept = None
    if kept:
        again = embed(texts[:1])[0]
        if _same(again, kept[0]):
            return kept
    embeddings = embed(texts)
    written = path.with_suffix(".tmp")
    stored = {
        "texts": texts,
        "vectors": [embedding.dense for embedding in embeddings],
        "sparse": [[embedding.sparse.indices, embedding.sparse.values] for embedding in embeddings],
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(json.dumps(stored), "utf-8")
        written.replace(path)
    except OSError:
        pass  # a read-only model dir: computed again by the next process
    return embeddings


def _kept_embeddings(kept: object, texts: list[str]) -> list[Embedding] | None:
    if not isinstance(kept, dict) or kept.get("texts") != texts:
        return None
    return [
        Embedding(
            tuple(float(x) for x in vector),
            SparseVector(tuple(int(i) for i in indices), tuple(float(v) for v in values)),
        )
        for vector, (indices, values) in zip(kept["vectors"], kept["sparse"], strict=True)
    ]


def _same(fresh: Embedding, kept: Embedding) -> bool:
    return (
        len(fresh.dense) == len(kept.dense)
        and max(abs(a - b) for a, b in zip(fresh.dense, kept.dense, strict=True)) <= _SAME_VECTOR
        and fresh.sparse == kept.sparse
    )
