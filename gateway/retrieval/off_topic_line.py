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
memory and in the settings store (`MeasuredLines`, the KB's workspace data, deleted with
it), keyed by the Scope and a fingerprint of the probes, the model and the code that
measures them. A Scope's first turn in a process reads them from the store; when none are
kept, it starts their measurement in the background (per probe one engine call for its
legs and one for its keyword IDFs, then as long a pause, one Scope at a time in the
process; the probes' embeddings are computed once and kept beside the models) and is
served the platform default, as are the turns until it is done: a few seconds for 13,000
points. So a restarted gateway, or another replica on the same store, serves the lines
from its first turn. Lines are measured again in the background when a turn finds them
older than `RECOUNT_AFTER_S` (lines read from the store count as that old) and their
Scope's point count has moved by more than `REMEASURE_SHARE` since they were measured. A
KB or agent setting `score_threshold` overrides both (docs/decisions/off-topic-line.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from gateway.background import BackgroundTasks
from gateway.retrieval import answering
from gateway.retrieval.answering import joint_score, keyword_bests, keyword_legs
from gateway.retrieval.kb_plan import KbPlan
from gateway.telemetry import Telemetry
from ingest.embedder.embedding import Embedder, Embedding
from ingest.index import Index, IndexUnavailableError, Leg, LegKind, RankedPoint, SparseVector
from ingest.keyword_terms import KEYWORD_ANALYSIS_VERSION, identifier_share
from ingest.lru import LruCache
from ingest.payload import Scope
from settings.config import Config
from settings.golden import MeasuredLines
from settings.store import LinesStore, StoreUnavailableError

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
#: the passages whose words measure a Scope's identifier share (`Lines.identifiers`): the
#: share moves by less than 0.02 between 30 and 200 documents of one kind
IDENTIFIER_SAMPLE = 200
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
    #: the dense line before its bounds: how close everyday questions come to the Scope's
    #: passages (None: not measured; `gateway.retrieval.plan.with_reach` reads it)
    reach: float | None = None
    #: the share of the Scope's words in identifiers, on a sample of its passages
    #: (`ingest.keyword_terms.identifier_share`; None: not measured)
    identifiers: float | None = None


def line_from_best(best: Iterable[tuple[str, float]]) -> float:
    """The dense line from each probe's (topic, best cosine; 0 with no hit)."""
    return min(max(_nearest_counted(best), LINE_LOWEST), LINE_HIGHEST)


def lines_from_best(
    best: Iterable[tuple[str, float, float]], identifiers: float | None = None
) -> Lines:
    """Both lines from each probe's (topic, best cosine, best keyword share; 0 for none),
    with the Scope's identifier share."""
    probes = list(best)
    reach = _nearest_counted((topic, cosine) for topic, cosine, _ in probes)
    dense = min(max(reach, LINE_LOWEST), LINE_HIGHEST)
    joint = _nearest_counted((topic, joint_score(c, share)) for topic, c, share in probes)
    return Lines(dense=dense, joint=max(joint, dense), reach=reach, identifiers=identifiers)


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
    """Each Scope's measured lines, in memory and in the settings store.

    The probes are searched in the `index`, embedded by the `embedder` (kept beside the
    models in the config's model dir), measured as `background` work, and the lines kept
    in the `store`."""

    def __init__(
        self,
        store: LinesStore,
        index: Index,
        embedder: Embedder,
        background: BackgroundTasks,
        telemetry: Telemetry,
        *,
        config: Config,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._index = index
        self._embedder = embedder
        self._background = background
        self._telemetry = telemetry
        self._config = config
        self._lines: LruCache[Key, _Measured] = LruCache(LINES_KEPT)
        self._probes: tuple[Probe, ...] | None = None
        self._embeddings: list[Embedding] | None = None
        self._first: dict[Key, asyncio.Task[None]] = {}
        self._one_at_a_time = asyncio.Semaphore(1)
        self._embedding = asyncio.Lock()
        self._clock = clock
        self._fingerprint: str | None = None

    async def lines(self, plan: KbPlan, *, wait: bool = False) -> Lines | None:
        """The plan's lines; None while they are being measured for the first time (the
        platform default serves meanwhile: a Scope's first turns never wait for the probes'
        searches), or when the index could not be asked. `wait`: wait for them instead."""
        key: Key = (plan.collection, plan.scope)
        known = self._lines.get(key)
        if known is None and key not in self._first:
            known = await self._kept(plan)
        if known is None:
            first = self._first.get(key)
            if first is None:
                first = self._background.start(
                    ("off_topic_line", *key), self._measure_first(plan, key)
                )
                self._first[key] = first
                first.add_done_callback(lambda _: self._first.pop(key, None))
            if not wait:
                return None
            await asyncio.shield(first)
            measured = self._lines.get(key)
            return None if measured is None else measured.lines
        task = ("off_topic_line", *key)
        if self._clock() - known.checked_at >= RECOUNT_AFTER_S and not self._background.running(
            task
        ):
            self._background.start(task, self._recheck(plan, known))
        return known.lines

    def forget(self, tenant_id: str, kb_id: str | None = None) -> None:
        """Drop the lines of every Scope holding the KB (None: any of the workspace's) from
        memory; the store's go with the KB's calibration data."""
        self._lines.discard_where(
            lambda key: key[1].tenant_id == tenant_id and (kb_id is None or kb_id in key[1].kb_ids)
        )

    async def known(self, plan: KbPlan) -> Lines | None:
        """The plan's lines if they have been measured, here or by a process that kept them
        in the store; starts nothing."""
        found = self._lines.get((plan.collection, plan.scope)) or await self._kept(plan)
        return None if found is None else found.lines

    async def _kept(self, plan: KbPlan) -> _Measured | None:
        """The lines the store keeps for the plan's Scope, remembered here as due for a
        recount; None when none are kept or the store cannot be read."""
        try:
            kept = await self._store.get_measured_lines(
                plan.scope.tenant_id, plan.kb.kb_id, self._store_key(plan)
            )
        except StoreUnavailableError:
            return None
        if kept is None:
            return None
        self._telemetry.count("off_topic_lines_kept")
        lines = Lines(
            dense=kept.dense, joint=kept.joint, reach=kept.reach, identifiers=kept.identifiers
        )
        measured = _Measured(lines, kept.points, self._clock() - RECOUNT_AFTER_S)
        self._lines.put((plan.collection, plan.scope), measured)
        return measured

    async def _keep(self, plan: KbPlan, measured: _Measured) -> None:
        """Keep freshly measured lines in the store (a store outage only costs a later
        process their measurement)."""
        record = MeasuredLines(
            tenant_id=plan.scope.tenant_id,
            kb_id=plan.kb.kb_id,
            scope=self._store_key(plan),
            dense=measured.lines.dense,
            joint=measured.lines.joint,
            points=measured.points,
            measured_at=datetime.now(UTC).isoformat(),
            reach=measured.lines.reach,
            identifiers=measured.lines.identifiers,
        )
        with suppress(StoreUnavailableError):
            await self._store.put_measured_lines(record)

    def _store_key(self, plan: KbPlan) -> str:
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self._config.embedding_model, load_probes())
        return scope_key(self._fingerprint, plan.collection, plan.scope)

    async def _measure_first(self, plan: KbPlan, key: Key) -> None:
        with suppress(TimeoutError, IndexUnavailableError):
            measured = await self.measure(plan)
            self._lines.put(key, measured)
            await self._keep(plan, measured)

    async def measure(self, plan: KbPlan) -> _Measured:
        """Search every probe inside the plan's Scope, one probe at a time with turns
        between them; one measurement at a time in the process."""
        async with self._one_at_a_time:
            return await self._measured(plan)

    async def _measured(self, plan: KbPlan) -> _Measured:
        probes, embeddings = await self._probe_embeddings()
        index = self._index
        points = await index.count(plan.collection, plan.scope)
        best: list[tuple[str, float, float]] = []
        for probe, embedding in zip(probes, embeddings, strict=True):
            # One engine call at a time, each followed by a pause as long: a measurement
            # takes at most half the loop, and no turn waits for more than one call.
            found = await _paused(probe_legs, index, plan, embedding)
            cosine = found[0][1][0].score if found[0][1] else 0.0
            bests = await _paused(keyword_bests, index, plan.collection, plan.scope, found)
            best.append((probe.topic, cosine, max((b.share for b in bests), default=0.0)))
        sample, _ = await _paused(
            index.passages_page, plan.collection, plan.scope, None, IDENTIFIER_SAMPLE
        )
        identifiers = identifier_share(passage.payload.text for passage in sample)
        self._telemetry.count("off_topic_lines_measured")
        return _Measured(lines_from_best(best, identifiers), points, self._clock())

    async def _recheck(self, plan: KbPlan, known: _Measured) -> None:
        try:
            points = await self._index.count(plan.collection, plan.scope)
            moved = abs(points - known.points) > REMEASURE_SHARE * known.points
            fresh = await self.measure(plan) if moved else known
        except (TimeoutError, IndexUnavailableError):
            return
        fresh.checked_at = self._clock()
        self._lines.put((plan.collection, plan.scope), fresh)
        if moved:
            await self._keep(plan, fresh)

    async def _probe_embeddings(self) -> tuple[tuple[Probe, ...], Sequence[Embedding]]:
        async with self._embedding:
            if self._probes is None or self._embeddings is None:
                probes = load_probes()
                path = self._config.model_dir / PROBE_VECTORS_FILE
                embeddings = await asyncio.to_thread(
                    probe_embeddings, path, probes, self._embedder.embed_queries
                )
                self._probes, self._embeddings = probes, embeddings
        return self._probes, self._embeddings


def fingerprint(model: str | None, probes: Sequence[Probe]) -> str:
    """What kept lines were measured with: the model, the probes and the code that measures
    them (this module and `gateway.retrieval.answering`), so a process running other code
    measures again; lines kept under another fingerprint are never read."""
    digest = hashlib.sha256(
        json.dumps([model or "default", [(probe.topic, probe.text) for probe in probes]]).encode()
    )
    for module in (__file__, answering.__file__):
        digest.update(Path(module).read_bytes() if module else b"")
    return digest.hexdigest()[:16]


def scope_key(fingerprint: str, collection: str, scope: Scope) -> str:
    """The store's key of a Scope's lines."""
    fields = [fingerprint, collection, scope.org_id, scope.strict, scope.clearance.value]
    return json.dumps([*fields, sorted(scope.kb_ids)], separators=(",", ":"))


async def probe_legs(
    index: Index, plan: KbPlan, embedding: Embedding
) -> list[tuple[Leg, Sequence[RankedPoint]]]:
    """A probe's dense leg and the KB's keyword legs inside the plan's Scope, one passage
    each, with what each found (the dense leg first). Blocking."""
    document_keywords = await index.document_keywords(plan.collection)
    legs = [Leg(kind=LegKind.DENSE, dense=embedding.dense, limit=1)]
    if plan.keyword_weight > 0:
        legs += keyword_legs(embedding.sparse, 1, document_keywords=document_keywords)
    ranked = await index.rank(plan.collection, plan.scope, legs)
    return list(zip(legs, ranked.legs, strict=True))


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
    kept embedding and the texts and keyword analysis are the same: another model, probe
    set or analysis recomputes them."""
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
        "keywords": KEYWORD_ANALYSIS_VERSION,
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
    if kept.get("keywords") != KEYWORD_ANALYSIS_VERSION:
        return None  # keyword vectors of another analysis
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
