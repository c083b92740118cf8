"""The Index contract, run against every engine: Qdrant Edge, qdrant-client local mode,
and a Qdrant server in a container (skipped without Docker). Each engine's async adapter
is called through `BlockingIndex`, on a loop of its own, as the gateway's worker threads
call it.

Vectors are small and synthetic (8-d dense, hand-made sparse): no embedding model.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from msgspec import structs
from qdrant_client import QdrantClient, models
from qdrant_edge import (
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    KeywordIndexParams,
    Memory,
    Modifier,
    Query,
    QueryBatchRequest,
    QueryRequest,
    SearchParams,
    UpdateOperation,
)
from testcontainers.community.qdrant import QdrantContainer

from ingest.engines.blocking import BlockingIndex
from ingest.engines.common import EXACT_CHECK_BELOW, IDF_COUNT_LIMIT, SCROLL_PAGE
from ingest.engines.edge.engine import _FILTERED_DENSE as _EDGE_GRAPH_SEARCH
from ingest.engines.edge.engine import DELETE_PAGE as EDGE_DELETE_PAGE
from ingest.engines.edge.engine import _scope_filter as _edge_scope_filter
from ingest.engines.edge.index import EDGE_DIR, EdgeIndex
from ingest.engines.server.index import ServerIndex
from ingest.index import (
    DENSE_VECTOR,
    SPARSE_VECTOR,
    HeldTerms,
    IndexUnavailableError,
    Leg,
    LegKind,
    Passage,
    SparseVector,
    org_collection,
)
from ingest.keyword_scale import bm25_idf
from ingest.payload import (
    INDEXED_KEYS,
    TENANT_KEY,
    TYPED_INDEXED_KEYS,
    Classification,
    PassagePayload,
    PayloadKey,
    PiiAnalysis,
    PiiSpan,
    Scope,
    text_checksum,
    to_payload,
)
from tests.support.services import require_docker

DIM = 8
ORG = "acme"
OTHER_ORG = "globex"
# Per-scope IDF (`SearchParams.idf`) needs Qdrant >= 1.19; keep in step with qdrant-client.
QDRANT_IMAGE = "qdrant/qdrant:v1.20.0"
_IDS = uuid.UUID("6f0c1d1e-6a43-4f55-9d0b-2b1f1f7f0a10")
REPO_ROOT = Path(__file__).resolve().parents[2]


# --- data -------------------------------------------------------------------------------


def axis(i: int) -> tuple[float, ...]:
    return tuple(1.0 if d == i else 0.0 for d in range(DIM))


def tilted(k: float) -> tuple[float, ...]:
    """A unit vector whose cosine with `axis(0)` is 1/sqrt(1+k^2)."""
    norm = math.sqrt(1 + k * k)
    return tuple(v / norm for v in (1.0, k, *([0.0] * (DIM - 2))))


def random_unit(rng: random.Random) -> tuple[float, ...]:
    vec = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = math.sqrt(sum(v * v for v in vec))
    return tuple(v / norm for v in vec)


def sparse(*terms: int) -> SparseVector:
    return SparseVector(indices=tuple(terms), values=tuple(1.0 for _ in terms))


def point_id(tenant: str, kb: str, doc: str, idx: int) -> str:
    return str(uuid.uuid5(_IDS, f"{tenant}|{kb}|{doc}|{idx}"))


def passage(
    *,
    tenant: str = "t1",
    kb: str = "kb",
    doc: str = "doc1",
    idx: int = 0,
    org: str | None = ORG,
    label: Classification = Classification.INTERNAL,
    dense: tuple[float, ...] | None = None,
    terms: Sequence[int] = (1,),
    text: str | None = None,
) -> Passage:
    body = text if text is not None else f"{tenant} {kb} {doc} passage {idx}"
    return Passage(
        point_id=point_id(tenant, kb, doc, idx),
        dense=dense if dense is not None else axis(idx % DIM),
        sparse=sparse(*terms),
        payload=PassagePayload(
            tenant_id=tenant,
            knowledge_base_id=kb,
            document_id=doc,
            document_version="v1",
            passage_index=idx,
            classification=label,
            text=body,
            title=doc,
            source=f"https://example.test/{doc}",
            checksum=text_checksum(body),
            indexed_at="2026-01-01T00:00:00Z",
            org_id=org,
        ),
    )


def scope(
    tenant: str = "t1",
    kbs: Sequence[str] = ("kb",),
    *,
    clearance: Classification = Classification.INTERNAL,
    strict: bool = True,
    org: str = ORG,
) -> Scope:
    return Scope.of(org_id=org, tenant_id=tenant, kb_ids=kbs, clearance=clearance, strict=strict)


def dense_leg(vector: tuple[float, ...], limit: int = 100, floor: float | None = None) -> Leg:
    return Leg(LegKind.DENSE, dense=vector, limit=limit, floor=floor)


def keyword_leg(*terms: int, limit: int = 100, floor: float | None = None) -> Leg:
    return Leg(LegKind.KEYWORD, sparse=sparse(*terms), limit=limit, floor=floor)


def document_leg(*terms: int, limit: int = 100, floor: float | None = None) -> Leg:
    return Leg(LegKind.DOCUMENT_KEYWORD, sparse=sparse(*terms), limit=limit, floor=floor)


def with_document_terms(first: Passage, *terms: int) -> Passage:
    """A document's first passage carrying the BM25 vector of the whole document."""
    return replace(first, document_sparse=sparse(*terms))


def hit_ids(index: BlockingIndex, collection: str, where: Scope, *legs: Leg) -> list[list[str]]:
    result = index.query(collection, where, legs)
    return [[hit.point_id for hit in leg] for leg in result.legs]


def ids_of(passages: Sequence[Passage]) -> set[str]:
    return {p.point_id for p in passages}


# --- engines ----------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexKind:
    """What a payload index is: the tenant key's, and read from disk as needed."""

    tenant: bool
    on_disk: bool


@dataclass
class Engine:
    """An Index under test, plus a way to read its payload indexes (None: not inspectable)."""

    name: str
    index: BlockingIndex
    payload_indexes: Callable[[str], dict[str, IndexKind]] | None
    #: where the engine lives: Edge's data dir, the server's URL
    root: str = ""
    url: str = ""


@pytest.fixture(scope="module")
def qdrant_url() -> Iterator[str]:
    require_docker()
    with QdrantContainer(image=QDRANT_IMAGE) as container:
        yield f"http://{container.rest_host_address}"


def _edge_indexes(index: BlockingIndex, root: Path) -> Callable[[str], dict[str, IndexKind]]:
    def read(collection: str) -> dict[str, IndexKind]:
        index.close()  # one EdgeShard per directory: release it to read it
        shard = EdgeShard.load(str(root / EDGE_DIR / collection))
        try:
            schema = shard.info().payload_schema
        finally:
            shard.close()
        return {
            key: IndexKind(
                tenant=bool(info.params.is_tenant), on_disk=info.params.memory == Memory.Cold
            )
            for key, info in schema.items()
            if isinstance(info.params, KeywordIndexParams)
        }

    return read


def _server_indexes(url: str) -> Callable[[str], dict[str, IndexKind]]:
    def read(collection: str) -> dict[str, IndexKind]:
        client = QdrantClient(url=url, check_compatibility=False)
        try:
            schema = client.get_collection(collection).payload_schema
        finally:
            client.close()
        return {
            key: IndexKind(
                tenant=bool(getattr(info.params, "is_tenant", False)),
                on_disk=bool(getattr(info.params, "on_disk", False)),
            )
            for key, info in schema.items()
        }

    return read


@pytest.fixture(params=["edge", "local", pytest.param("container", marks=pytest.mark.docker)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "edge":
        edge = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
        built = Engine("edge", edge, _edge_indexes(edge, tmp_path), root=str(tmp_path))
    elif request.param == "local":
        built = Engine("local", BlockingIndex(ServerIndex.local(None, dense_dim=DIM)), None)
    else:
        url: str = request.getfixturevalue("qdrant_url")
        server = BlockingIndex.opening(lambda: ServerIndex.connect(url, None, 10, dense_dim=DIM))
        built = Engine("container", server, _server_indexes(url), url=url)
    yield built
    built.index.close()


@pytest.fixture
def index(engine: Engine) -> BlockingIndex:
    return engine.index


@pytest.fixture
def collection() -> str:
    """A fresh collection per test, so a shared server never mixes tests."""
    return org_collection(f"org-{uuid.uuid4().hex[:12]}")


# --- the contract -----------------------------------------------------------------------


def test_ensure_collection_is_idempotent_and_indexes_payload(
    engine: Engine, collection: str
) -> None:
    """Creating a collection twice is fine; it starts empty with the five Scope keyword
    indexes, `tenantId` marked as the tenant key and `documentId` kept on disk, and the
    filtered keys' (validity, language)."""
    engine.index.ensure_collection(collection)
    engine.index.ensure_collection(collection)
    assert engine.index.count(collection, scope()) == 0
    if engine.payload_indexes is None:
        pytest.skip(f"{engine.name} does not keep payload indexes")
    indexes = engine.payload_indexes(collection)
    filtered = {str(key) for key, _ in TYPED_INDEXED_KEYS}
    assert set(indexes) - filtered == {str(key) for key in INDEXED_KEYS}
    assert filtered <= set(_all_indexes(engine, collection))
    assert {key: kind for key, kind in indexes.items() if key not in filtered} == {
        str(key): IndexKind(tenant=key == TENANT_KEY, on_disk=key == PayloadKey.DOCUMENT_ID)
        for key in INDEXED_KEYS
    }


def _all_indexes(engine: Engine, collection: str) -> set[str]:
    """Every indexed path of the collection, whatever its kind."""
    if engine.name == "edge":
        engine.index.close()
        shard = EdgeShard.load(str(Path(engine.root) / EDGE_DIR / collection))
        try:
            return set(shard.info().payload_schema)
        finally:
            shard.close()
    client = QdrantClient(url=engine.url, check_compatibility=False)
    try:
        return set(client.get_collection(collection).payload_schema)
    finally:
        client.close()


def test_an_edge_shard_made_with_its_document_index_in_memory_gets_it_on_disk(
    tmp_path: Path, collection: str
) -> None:
    """A shard whose `documentId` index was built in memory (before that index moved to
    disk) has it made again on disk when next opened, its points unchanged."""
    edge = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    edge.upsert(collection, [passage(idx=k, dense=tilted(k), terms=(1,)) for k in range(3)])
    edge.close()
    shard = EdgeShard.load(str(tmp_path / EDGE_DIR / collection))
    in_memory = KeywordIndexParams(is_tenant=False, enable_hnsw=False)
    shard.update(UpdateOperation.delete_field_index(PayloadKey.DOCUMENT_ID))
    shard.update(UpdateOperation.create_field_index(PayloadKey.DOCUMENT_ID, in_memory))
    shard.flush()
    shard.close()
    assert _edge_indexes(edge, tmp_path)(collection)[PayloadKey.DOCUMENT_ID] == IndexKind(
        tenant=False, on_disk=False
    )

    reopened = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    assert reopened.count(collection, scope()) == 3
    assert _edge_indexes(reopened, tmp_path)(collection)[PayloadKey.DOCUMENT_ID] == IndexKind(
        tenant=False, on_disk=True
    )


def test_query_runs_every_leg_with_its_own_limit_and_floor(
    index: BlockingIndex, collection: str
) -> None:
    """Each leg comes back in order, ranked, cut at its own limit and score floor,
    with the stored payload."""
    passages = [passage(idx=k, dense=tilted(k), terms=(1, 100 + k)) for k in range(4)]
    index.upsert(collection, passages)
    ids = [p.point_id for p in passages]

    result = index.query(
        collection,
        scope(),
        [
            dense_leg(axis(0), limit=10, floor=0.4),
            dense_leg(axis(0), limit=2),
            keyword_leg(103, limit=5),
            keyword_leg(1, limit=2),
        ],
    )

    floored, limited, rare, common = result.legs
    assert [h.point_id for h in floored] == ids[:3]  # cosines 1, .707, .447; .316 under floor
    assert [h.score for h in floored] == pytest.approx([1.0, 1 / math.sqrt(2), 1 / math.sqrt(5)])
    assert [h.point_id for h in limited] == ids[:2]
    assert [h.point_id for h in rare] == [ids[3]]
    assert rare[0].score > 0
    assert len(common) == 2
    assert {h.point_id for h in common} <= set(ids)
    assert floored[0].payload == passages[0].payload
    assert rare[0].payload == passages[3].payload


def test_rank_scores_like_query_and_reads_only_where_hits_belong(
    index: BlockingIndex, collection: str
) -> None:
    """`rank` returns the same points and scores as `query`, leg by leg, each with its
    PassageRef (KB, document, version, passage index, indexing time) and no text."""
    passages = [passage(idx=k, dense=tilted(k), terms=(1, 100 + k)) for k in range(4)]
    index.upsert(collection, passages)
    legs = [dense_leg(axis(0), floor=0.4), keyword_leg(1, 103, limit=3)]
    queried = index.query(collection, scope(), legs)
    ranked = index.rank(collection, scope(), legs)
    for full, light in zip(queried.legs, ranked.legs, strict=True):
        assert [(h.point_id, h.score) for h in full] == [(r.point_id, r.score) for r in light]
        assert [h.payload.ref for h in full] == [r.ref for r in light]
    assert ranked.legs[0][0].ref == passages[0].payload.ref
    assert not hasattr(ranked.legs[0][0], "payload")


def test_a_weak_dense_answer_is_searched_again_exactly(
    index: BlockingIndex, collection: str
) -> None:
    """A dense leg that finds nothing above its floor, or whose best cosine is below
    `EXACT_CHECK_BELOW`, is searched again exactly and counted in `exact_checks`; a
    strong dense leg and the keyword legs are not. Each leg answers the points and
    scores `query` answers."""
    index.upsert(
        collection, [passage(idx=k, dense=tilted(k), terms=(1, 100 + k)) for k in range(4)]
    )

    def toward_axis0(cosine: float) -> tuple[float, ...]:
        """A unit vector at `cosine` to axis(0), orthogonal to every passage's other axis."""
        return (cosine, *([0.0] * (DIM - 2)), math.sqrt(1 - cosine * cosine))

    def checks(*legs: Leg) -> int:
        ranked = index.rank(collection, scope(), legs)
        queried = index.query(collection, scope(), legs)
        for light, full in zip(ranked.legs, queried.legs, strict=True):
            assert [(r.point_id, r.score) for r in light] == [(h.point_id, h.score) for h in full]
        return ranked.exact_checks

    assert 0.45 < EXACT_CHECK_BELOW < 0.7
    assert checks(dense_leg(axis(0), limit=2), keyword_leg(1, limit=2), keyword_leg(200)) == 0
    assert checks(dense_leg(toward_axis0(0.7)), dense_leg(toward_axis0(0.45))) == 1
    assert checks(dense_leg(axis(DIM - 1), limit=2)) == 1  # orthogonal to every passage
    assert checks(dense_leg(axis(0), floor=0.99), dense_leg(axis(0), floor=1.01)) == 1
    assert index.rank(collection, scope(), [dense_leg(axis(0), floor=1.01)]).legs == ((),)


def test_rank_reads_each_points_ref_as_last_written(index: BlockingIndex, collection: str) -> None:
    """Ranking answers with a point's ref as it is now, however often the point was ranked
    before (Edge remembers refs between calls): a passage rewritten under the same id, or
    deleted and written again, ranks with its new indexing time and index."""

    def ranked_ref() -> list[tuple[str, str, int]]:
        [leg] = index.rank(collection, scope(), [dense_leg(axis(0))]).legs
        return [(r.point_id, r.ref.indexed_at, r.ref.passage_index) for r in leg]

    first = passage()
    index.upsert(collection, [first])
    assert ranked_ref() == [(first.point_id, "2026-01-01T00:00:00Z", 0)]
    assert ranked_ref() == [(first.point_id, "2026-01-01T00:00:00Z", 0)]
    rewritten = replace(first, payload=structs.replace(first.payload, indexed_at="2026-02-01"))
    index.upsert(collection, [rewritten])
    assert ranked_ref() == [(first.point_id, "2026-02-01", 0)]
    index.delete_document(collection, scope(), "doc1")
    assert ranked_ref() == []
    again = replace(
        first, payload=structs.replace(first.payload, indexed_at="2026-03-01", passage_index=5)
    )
    index.upsert(collection, [again])
    assert ranked_ref() == [(first.point_id, "2026-03-01", 5)]


def test_fetch_reads_payloads_inside_the_scope_only(index: BlockingIndex, collection: str) -> None:
    """`fetch` returns the stored payload of each requested point inside the scope; points
    of another tenant, KB, clearance or org, unknown ids and missing collections are simply
    absent — never read."""
    mine = passage(tenant="t1", idx=0)
    other_kb = passage(tenant="t1", kb="kb2", idx=1)
    secret = passage(tenant="t1", idx=2, label=Classification.RESTRICTED)
    theirs = passage(tenant="t2", idx=0)
    foreign_org = passage(tenant="t1", idx=3, org=OTHER_ORG)
    everything = [mine, other_kb, secret, theirs, foreign_org]
    index.upsert(collection, everything)
    asked = [p.point_id for p in everything] + [str(uuid.uuid4())]

    assert index.fetch(collection, scope("t1"), asked) == {mine.point_id: mine.payload}
    assert index.fetch(collection, scope("t1", ("kb", "kb2")), asked) == {
        mine.point_id: mine.payload,
        other_kb.point_id: other_kb.payload,
    }
    assert index.fetch(collection, scope("t2"), [mine.point_id]) == {}
    assert index.fetch(collection, scope("t1"), []) == {}
    missing = org_collection("nobody")
    assert index.fetch(missing, scope("t1"), [mine.point_id]) == {}


def test_held_terms_reads_each_points_terms_inside_the_scope_only(
    index: BlockingIndex, collection: str
) -> None:
    """`held_terms` gives the BM25 terms of each requested point inside the scope, its
    passage's and its whole document's; points of another tenant, KB or clearance, unknown
    ids and missing collections are absent."""
    index.ensure_collection(collection)
    mine = with_document_terms(passage(doc="d", idx=0, terms=(7, 9)), 7, 8, 9)
    second = passage(doc="d", idx=1, terms=(8,))
    theirs = with_document_terms(passage(tenant="t2", doc="d", idx=0, terms=(7,)), 7)
    secret = passage(doc="s", idx=0, terms=(7,), label=Classification.RESTRICTED)
    other_kb = passage(kb="kb2", doc="k", idx=0, terms=(7,))
    index.upsert(collection, [mine, second, theirs, secret, other_kb])
    asked = [p.point_id for p in (mine, second, theirs, secret, other_kb)] + [str(uuid.uuid4())]

    held = index.held_terms(collection, scope("t1"), asked)
    assert set(held) == {mine.point_id, second.point_id}
    assert held[mine.point_id] == HeldTerms(frozenset({7, 9}), frozenset({7, 8, 9}))
    assert held[second.point_id].passage == frozenset({8})
    assert index.held_terms(collection, scope("t2"), [mine.point_id]) == {}
    assert index.held_terms(collection, scope("t1"), []) == {}
    assert index.held_terms(org_collection("nobody"), scope("t1"), [mine.point_id]) == {}


def test_keyword_floor_drops_weak_hits(index: BlockingIndex, collection: str) -> None:
    """A keyword leg's floor keeps only hits scoring at least that much."""
    index.upsert(collection, [passage(idx=k, terms=(1, 100 + k)) for k in range(4)])
    [strong] = index.query(collection, scope(), [keyword_leg(1, 102)]).legs
    assert strong[0].point_id == point_id("t1", "kb", "doc1", 2)
    cut = (strong[0].score + strong[1].score) / 2
    [floored] = index.query(collection, scope(), [keyword_leg(1, 102, floor=cut)]).legs
    assert [h.point_id for h in floored] == [strong[0].point_id]


def test_other_tenant_is_never_visible(index: BlockingIndex, collection: str) -> None:
    """Two tenants with the same KB id and document id: each sees only its own points,
    through every read."""
    mine = [passage(tenant="t1", idx=i, terms=(1, 7)) for i in range(3)]
    theirs = [passage(tenant="t2", idx=i, terms=(1, 7)) for i in range(3)]
    index.upsert(collection, mine + theirs)

    dense, keyword = hit_ids(index, collection, scope("t1"), dense_leg(axis(0)), keyword_leg(7))
    assert set(dense) == ids_of(mine)
    assert set(keyword) == ids_of(mine)
    assert index.count(collection, scope("t1")) == 3
    assert index.count(collection, scope("t1"), "doc1") == 3
    stored = index.scroll_document(collection, scope("t1"), "doc1")
    assert {s.point_id for s in stored} == ids_of(mine)
    assert {s.payload.tenant_id for s in stored} == {"t1"}
    assert index.document_ids(collection, scope("t1")) == {"doc1"}
    assert hit_ids(index, collection, scope("t3"), dense_leg(axis(0))) == [[]]
    assert index.count(collection, scope("t3")) == 0


def test_knowledge_base_set_is_honoured(index: BlockingIndex, collection: str) -> None:
    """Only the KBs named in the scope are searched."""
    docs = {kb: passage(kb=kb, doc=f"doc-{kb}") for kb in ("kb-a", "kb-b", "kb-c")}
    index.upsert(collection, list(docs.values()))
    where = scope(kbs=("kb-a", "kb-b"))
    [dense] = hit_ids(index, collection, where, dense_leg(axis(0)))
    assert set(dense) == {docs["kb-a"].point_id, docs["kb-b"].point_id}
    assert index.count(collection, where) == 2
    assert index.document_ids(collection, where) == {"doc-kb-a", "doc-kb-b"}
    assert index.count(collection, scope(kbs=("kb-c",))) == 1


def test_clearance_is_honoured(index: BlockingIndex, collection: str) -> None:
    """A clearance admits its own label and those below: restricted stays hidden from internal."""
    by_label = {label: passage(doc=f"doc-{label}", label=label) for label in Classification}
    index.upsert(collection, list(by_label.values()))

    def visible(clearance: Classification) -> set[str]:
        return index.document_ids(collection, scope(clearance=clearance))

    assert visible(Classification.PUBLIC) == {"doc-public"}
    assert visible(Classification.INTERNAL) == {"doc-public", "doc-internal"}
    assert visible(Classification.RESTRICTED) == {f"doc-{label}" for label in Classification}
    [dense] = hit_ids(index, collection, scope(), dense_leg(axis(0)))
    assert by_label[Classification.RESTRICTED].point_id not in dense
    assert set(dense) == {
        by_label[Classification.PUBLIC].point_id,
        by_label[Classification.INTERNAL].point_id,
    }


def test_strict_scope_hides_legacy_and_foreign_org_points(
    index: BlockingIndex, collection: str
) -> None:
    """Strict isolation shows only points of the scope's org; a non-strict scope also shows
    legacy points that carry no orgId."""
    current = passage(doc="current", org=ORG)
    legacy = passage(doc="legacy", org=None)
    foreign = passage(doc="foreign", org=OTHER_ORG)
    index.upsert(collection, [current, legacy, foreign])

    assert index.document_ids(collection, scope(strict=True)) == {"current"}
    assert index.document_ids(collection, scope(strict=True, org=OTHER_ORG)) == {"foreign"}
    lenient = scope(strict=False)
    assert {"current", "legacy"} <= index.document_ids(collection, lenient)
    [dense] = hit_ids(index, collection, scope(strict=True), dense_leg(axis(0)))
    assert dense == [current.point_id]
    legacy_hits = index.query(collection, lenient, [dense_leg(axis(0))]).legs[0]
    assert legacy.point_id in {h.point_id for h in legacy_hits}
    legacy_hit = next(h for h in legacy_hits if h.point_id == legacy.point_id)
    assert legacy_hit.payload.org_id is None


def test_count_whole_scope_and_per_document(index: BlockingIndex, collection: str) -> None:
    """Counts cover the scope, or one document inside it."""
    doc1 = [passage(doc="doc1", idx=i) for i in range(3)]
    doc2 = [passage(doc="doc2", idx=i) for i in range(2)]
    index.upsert(collection, [*doc1, *doc2, passage(tenant="t2", doc="doc1")])
    assert index.count(collection, scope()) == 5
    assert index.count(collection, scope(), "doc1") == 3
    assert index.count(collection, scope(), "doc2") == 2
    assert index.count(collection, scope(), "nope") == 0


def test_a_count_answers_what_the_last_write_left(index: BlockingIndex, collection: str) -> None:
    """A count asked again after each kind of write answers the write's result, never an
    earlier answer to the same question."""
    index.upsert(collection, [passage(doc="doc1", idx=i) for i in range(3)])
    assert index.count(collection, scope()) == index.count(collection, scope()) == 3
    index.upsert(collection, [passage(doc="doc2", idx=0)])
    assert index.count(collection, scope()) == 4
    assert index.count(collection, scope(), "doc1") == 3
    index.delete_document(collection, scope(), "doc1")
    assert index.count(collection, scope(), "doc1") == 0
    assert index.count(collection, scope()) == 1
    index.delete_points(collection, scope(), [point_id("t1", "kb", "doc2", 0)])
    assert index.count(collection, scope()) == 0
    index.upsert(collection, [passage(doc="doc3", idx=0)])
    assert index.count(collection, scope()) == 1
    # the same point written again above the Scope's clearance leaves it
    index.upsert(collection, [passage(doc="doc3", idx=0, label=Classification.RESTRICTED)])
    assert index.count(collection, scope()) == 0
    index.upsert(collection, [passage(doc="doc3", idx=0)])
    assert index.count(collection, scope()) == 1
    index.delete_scope(collection, scope())
    assert index.count(collection, scope()) == 0


def test_scroll_document_is_ordered_scoped_and_paginated(
    index: BlockingIndex, collection: str
) -> None:
    """All passages of a long document come back, in passage order, and only from the scope."""
    rng = random.Random(7)
    big = [passage(doc="big", idx=i, dense=random_unit(rng)) for i in range(300)]
    rng.shuffle(big)
    noise = [passage(tenant="t2", doc="big", idx=i) for i in range(5)]
    noise.append(passage(doc="other", idx=0))
    noise.append(passage(doc="big", idx=999, label=Classification.RESTRICTED, kb="kb"))
    index.upsert(collection, big[:150])
    index.upsert(collection, noise)
    index.upsert(collection, big[150:])

    stored = index.scroll_document(collection, scope(), "big")
    assert [s.payload.passage_index for s in stored] == list(range(300))
    assert {s.point_id for s in stored} == ids_of(big)
    assert {(s.payload.tenant_id, s.payload.document_id) for s in stored} == {("t1", "big")}
    assert index.scroll_document(collection, scope(), "missing") == []


def test_document_ids_are_scoped(index: BlockingIndex, collection: str) -> None:
    """Distinct document ids come from the scope only, each once, however many there are
    (more than a scroll page: `SCROLL_PAGE`)."""
    many = {f"doc{n:03}" for n in range(SCROLL_PAGE + 44)}
    index.upsert(
        collection,
        [
            *(passage(doc="a", idx=i) for i in range(4)),
            *(passage(doc=doc) for doc in many),
            passage(doc="c", kb="kb2"),
            passage(doc="d", tenant="t2"),
            passage(doc="e", label=Classification.CONFIDENTIAL),
        ],
    )
    assert index.document_ids(collection, scope()) == {"a", *many}
    assert index.document_ids(collection, scope(kbs=("kb", "kb2"))) == {"a", "c", *many}
    assert index.document_ids(collection, scope("t2")) == {"d"}


def test_delete_document_stays_inside_the_scope(index: BlockingIndex, collection: str) -> None:
    """Deleting a document removes it from both legs for its tenant only, and reports how many
    points went; another tenant's same-named document and unseen labels survive."""
    mine = [passage(idx=i, terms=(1, 50 + i)) for i in range(3)]
    theirs = [passage(tenant="t2", idx=i, terms=(1, 50 + i)) for i in range(3)]
    keep = passage(doc="doc2", terms=(1, 60))
    secret = passage(doc="doc1", idx=9, label=Classification.RESTRICTED, terms=(1, 50))
    index.upsert(collection, [*mine, *theirs, keep, secret])

    assert index.delete_document(collection, scope(), "doc1") == 3

    assert index.count(collection, scope()) == 1
    assert index.count(collection, scope("t2"), "doc1") == 3
    dense, keyword = hit_ids(index, collection, scope(), dense_leg(axis(0)), keyword_leg(1, 50))
    assert dense == [keep.point_id]
    assert keyword == [keep.point_id]
    assert index.count(collection, scope(clearance=Classification.RESTRICTED), "doc1") == 1
    assert index.delete_document(collection, scope(), "doc1") == 0


def test_delete_points_stays_inside_the_scope(index: BlockingIndex, collection: str) -> None:
    """Deleting by id only touches ids inside the scope, and counts only those."""
    a, b = passage(idx=0), passage(idx=1)
    other = passage(tenant="t2", idx=0)
    index.upsert(collection, [a, b, other])

    assert index.delete_points(collection, scope(), [a.point_id, other.point_id]) == 1
    assert index.delete_points(collection, scope(), []) == 0
    assert [s.point_id for s in index.scroll_document(collection, scope(), "doc1")] == [b.point_id]
    assert index.count(collection, scope("t2")) == 1


def test_delete_scope_removes_exactly_the_scope(index: BlockingIndex, collection: str) -> None:
    """Deleting a scope removes every point inside it (legacy points too, when not strict)
    and reports how many; another tenant's same KB, another KB and labels above the
    clearance survive, and a second call removes nothing."""
    mine = [passage(doc=f"doc{i}", terms=(1, 50 + i)) for i in range(3)]
    legacy = passage(doc="old", org=None)
    theirs = passage(tenant="t2", doc="doc0")
    other_kb = passage(kb="kb2", doc="doc0")
    secret = passage(doc="doc9", label=Classification.RESTRICTED)
    index.upsert(collection, [*mine, legacy, theirs, other_kb, secret])

    assert index.delete_scope(collection, scope(strict=False)) == 4
    assert index.delete_scope(collection, scope(strict=False)) == 0

    assert index.count(collection, scope(strict=False)) == 0
    assert index.count(collection, scope(clearance=Classification.RESTRICTED)) == 1
    assert index.count(collection, scope("t2")) == 1
    assert index.count(collection, scope(kbs=("kb2",))) == 1
    assert index.delete_scope(org_collection("never-created"), scope()) == 0


def test_delete_scope_removes_a_scope_larger_than_an_edge_page(
    index: BlockingIndex, collection: str
) -> None:
    """A Scope of more points than Qdrant Edge deletes in one call goes whole, and
    another tenant's points stay."""
    mine = [passage(doc=f"doc{i}", terms=(1,)) for i in range(EDGE_DELETE_PAGE + 37)]
    index.upsert(collection, [*mine, passage(tenant="t2", doc="doc0")])

    assert index.delete_scope(collection, scope()) == len(mine)

    assert index.count(collection, scope()) == 0
    assert index.count(collection, scope("t2")) == 1


def test_backfill_org_sets_org_inside_the_scope_only(index: BlockingIndex, collection: str) -> None:
    """Backfill writes the scope's org on its legacy points, reports the count, is a no-op the
    second time, and then strict scopes see those points; other tenants are untouched."""
    legacy = [passage(doc="old", idx=i, org=None) for i in range(3)]
    current = passage(doc="new", org=ORG)
    hidden = passage(doc="old", idx=7, org=None, label=Classification.RESTRICTED)
    theirs = [passage(tenant="t2", doc="old", idx=i, org=None) for i in range(2)]
    index.upsert(collection, [*legacy, current, hidden, *theirs])
    assert index.count(collection, scope()) == 1

    assert index.backfill_org(collection, scope(strict=False)) == 3
    assert index.backfill_org(collection, scope(strict=False)) == 0

    assert index.count(collection, scope()) == 4
    stored = index.scroll_document(collection, scope(), "old")
    assert [s.payload.org_id for s in stored] == [ORG] * 3
    assert index.count(collection, scope("t2")) == 0
    assert index.count(collection, scope("t2", strict=False)) == 2
    assert index.count(collection, scope(clearance=Classification.RESTRICTED), "old") == 3


def test_backfill_org_refuses_a_strict_scope(index: BlockingIndex, collection: str) -> None:
    """A strict scope cannot see legacy points, so backfilling through one is a caller bug."""
    index.ensure_collection(collection)
    with pytest.raises(ValueError, match="non-strict"):
        index.backfill_org(collection, scope(strict=True))


def _analysis(analyzer: str, *spans: PiiSpan) -> PiiAnalysis:
    return PiiAnalysis(analyzer=analyzer, text=spans, title=(PiiSpan(0, 3, "PERSON", 0.85),))


def test_pii_analysis_round_trips_in_the_payload(index: BlockingIndex, collection: str) -> None:
    """A passage written with its PII analysis reads back with the same spans (offsets,
    types, scores) and analyzer, through fetch, scroll and query alike."""
    analysis = _analysis("pii-1-a", PiiSpan(0, 2, "EMAIL_ADDRESS", 1.0), PiiSpan(3, 5, "URL", 0.5))
    written = passage(doc="d")
    written = replace(written, payload=structs.replace(written.payload, pii=analysis))
    index.upsert(collection, [written])
    fetched = index.fetch(collection, scope(), [written.point_id])[written.point_id]
    assert fetched.pii == analysis
    assert index.scroll_document(collection, scope(), "d")[0].payload.pii == analysis
    (hits,) = index.query(collection, scope(), [dense_leg(written.dense)]).legs
    assert hits[0].payload.pii == analysis


def test_stale_pii_pages_and_set_pii_stay_inside_the_scope(
    index: BlockingIndex, collection: str
) -> None:
    """Pages list the scope's points whose analysis is missing or another analyzer's, and
    no others; set_pii writes only inside the scope (counting those), keeps the other payload
    keys, and analysed points drop out of later pages."""
    mine = [passage(doc="d", idx=i) for i in range(5)]
    current = replace(mine[4], payload=structs.replace(mine[4].payload, pii=_analysis("pii-new")))
    old = replace(mine[3], payload=structs.replace(mine[3].payload, pii=_analysis("pii-old")))
    theirs = passage(tenant="t2", doc="d")
    index.upsert(collection, [*mine[:3], old, current, theirs])

    seen: list[str] = []
    offset: str | None = None
    while True:
        page, offset = index.stale_pii_page(collection, scope(), "pii-new", offset, 2)
        assert len(page) <= 2
        seen += [p.point_id for p in page]
        if offset is None:
            break
    assert sorted(seen) == sorted(p.point_id for p in mine[:4])

    analyses = {pid: _analysis("pii-new") for pid in [*seen, theirs.point_id]}
    assert index.set_pii(collection, scope(), analyses) == 4
    page, _ = index.stale_pii_page(collection, scope(), "pii-new", None, 10)
    assert page == []
    stored = index.fetch(collection, scope(), [mine[0].point_id])[mine[0].point_id]
    assert stored.pii == _analysis("pii-new")
    assert stored.text == mine[0].payload.text
    assert stored.org_id == ORG
    (untouched,) = index.stale_pii_page(collection, scope("t2"), "pii-new", None, 10)[0]
    assert untouched.point_id == theirs.point_id
    assert untouched.payload.pii is None


def test_missing_collection_behaves_as_empty(index: BlockingIndex) -> None:
    """Reads and deletes on a collection never created return nothing instead of failing."""
    missing = org_collection("never-created")
    result = index.query(missing, scope(), [dense_leg(axis(0)), keyword_leg(1), document_leg(1)])
    assert result.legs == ((), (), ())
    assert index.count(missing, scope()) == 0
    assert index.count(missing, scope(), "doc1") == 0
    assert index.scroll_document(missing, scope(), "doc1") == []
    assert index.document_ids(missing, scope()) == set()
    assert index.delete_document(missing, scope(), "doc1") == 0
    assert index.delete_points(missing, scope(), [point_id("t1", "kb", "doc1", 0)]) == 0
    assert index.backfill_org(missing, scope(strict=False)) == 0


def test_document_keyword_leg_ranks_whole_documents_inside_the_scope(
    index: BlockingIndex, collection: str
) -> None:
    """A new collection stores whole-document BM25 vectors: the document keyword leg finds a
    document by words of any of its passages, answers with its first passage, ranks it by
    the whole document, and never sees another tenant's, KB's or clearance's documents."""
    index.ensure_collection(collection)
    assert index.document_keywords(collection)
    both = [
        with_document_terms(passage(doc="both", idx=0, terms=(7,)), 7, 8),
        passage(doc="both", idx=1, terms=(8,)),
    ]
    one = [with_document_terms(passage(doc="one", idx=0, terms=(7,)), 7, 20)]
    hidden = [
        with_document_terms(passage(tenant="t2", doc="other", idx=0, terms=(7, 8)), 7, 8),
        with_document_terms(passage(kb="kb2", doc="kb2", idx=0, terms=(7, 8)), 7, 8),
        with_document_terms(
            passage(doc="secret", idx=0, terms=(7, 8), label=Classification.RESTRICTED), 7, 8
        ),
    ]
    index.upsert(collection, [*both, *one, *hidden])

    documents, passages = hit_ids(index, collection, scope(), document_leg(7, 8), keyword_leg(8))
    assert documents == [both[0].point_id, one[0].point_id]
    assert passages == [both[1].point_id]
    ranked = index.rank(collection, scope(), [document_leg(7, 8)])
    assert [r.ref for r in ranked.legs[0]] == [both[0].payload.ref, one[0].payload.ref]


def test_document_keywords_of_a_missing_collection(index: BlockingIndex) -> None:
    """A collection not created yet has no document keyword vectors to search."""
    assert not index.document_keywords(org_collection("never-created"))


def test_upsert_overwrites_a_point_with_the_same_id(index: BlockingIndex, collection: str) -> None:
    """Re-indexing a passage replaces it in place (deterministic ids), never duplicates it."""
    index.upsert(collection, [passage(text="first")])
    index.upsert(collection, [passage(text="second")])
    stored = index.scroll_document(collection, scope(), "doc1")
    assert [s.payload.text for s in stored] == ["second"]


def test_keyword_scores_ignore_other_tenants_documents(
    index: BlockingIndex, collection: str
) -> None:
    """BM25 IDF is computed over the scope, so another tenant's documents cannot move a
    tenant's keyword scores (nor reveal their vocabulary through them)."""
    index.upsert(collection, [passage(idx=i, terms=(1, 10 + i)) for i in range(4)])
    [before] = index.query(collection, scope(), [keyword_leg(10, 11)]).legs
    index.upsert(collection, [passage(tenant="t2", idx=i, terms=(10,)) for i in range(20)])
    [after] = index.query(collection, scope(), [keyword_leg(10, 11)]).legs
    assert [h.point_id for h in after] == [h.point_id for h in before]
    assert [h.score for h in after] == pytest.approx([h.score for h in before])
    index.delete_document(collection, scope(tenant="t2"), "doc1")
    [gone] = index.query(collection, scope(), [keyword_leg(10, 11)]).legs
    assert [h.score for h in gone] == pytest.approx([h.score for h in before])


def test_keyword_scores_ignore_the_tenants_other_kbs_and_restricted_documents(
    index: BlockingIndex, collection: str
) -> None:
    """IDF counts only the scope's points: documents of the tenant's other KBs and those
    above the caller's clearance move no score, whether written after the scope was last
    searched or deleted since (Edge then computes IDF over the tenant alone)."""

    def scores() -> dict[str, float]:
        [hits] = index.query(collection, scope(), [keyword_leg(10, 11)]).legs
        return {hit.point_id: hit.score for hit in hits}

    index.upsert(collection, [passage(idx=i, terms=(1, 10 + i)) for i in range(4)])
    before = scores()
    others = [
        *(passage(kb="kb-other", doc="other", idx=i, terms=(10,)) for i in range(10)),
        *(
            passage(doc="secret", idx=i, terms=(10,), label=Classification.RESTRICTED)
            for i in range(10)
        ),
    ]
    for extra in (others[:10], others[10:]):
        index.upsert(collection, extra)
        assert scores() == pytest.approx(before)
    index.delete_document(collection, scope(kbs=("kb-other",)), "other")
    index.delete_document(collection, scope(clearance=Classification.RESTRICTED), "secret")
    assert scores() == pytest.approx(before)


def test_keyword_idf_is_what_the_keyword_legs_score_with(
    index: BlockingIndex, collection: str
) -> None:
    """`keyword_idf` gives each keyword leg's terms the IDF the engine scores that leg with,
    over the scope's points holding the leg's vector alone (another tenant's points move
    nothing): a passage scores the sum of IDF x its weight over the terms it holds; a term
    no point of the scope holds counts as held by none; a dense leg gets ()."""
    index.upsert(collection, [passage(idx=i, terms=(1, 10 + i)) for i in range(4)])
    index.upsert(collection, [passage(tenant="t2", idx=i, terms=(10, 99)) for i in range(20)])
    firsts = [
        with_document_terms(passage(doc="a", terms=(5,)), 5, 6),
        with_document_terms(passage(doc="b", terms=(5,)), 5),
    ]
    index.upsert(collection, firsts)
    legs = [keyword_leg(1, 10, 99), dense_leg(axis(0)), document_leg(5, 6, 99)]
    passages, dense, documents = index.keyword_idf(collection, scope(), legs)
    assert dense == ()
    assert passages == pytest.approx((bm25_idf(6, 4), bm25_idf(6, 1), bm25_idf(6, 0)))
    assert documents == pytest.approx((bm25_idf(2, 2), bm25_idf(2, 1), bm25_idf(2, 0)))
    [keyword] = index.query(collection, scope(), [keyword_leg(1, 10, 99)]).legs
    first = {hit.point_id: hit.score for hit in keyword}[point_id("t1", "kb", "doc1", 0)]
    assert first == pytest.approx(passages[0] + passages[1])
    # a scope with no point: every term is held by none of none
    nobody = index.keyword_idf(collection, scope(tenant="t9"), legs)
    assert nobody == ((bm25_idf(0, 0),) * 3, (), (bm25_idf(0, 0),) * 3)
    # a collection not created yet holds no term: nothing to weigh
    missing = index.keyword_idf(org_collection("never-created"), scope(), legs)
    assert missing == ((0.0, 0.0, 0.0), (), (0.0, 0.0, 0.0))


def test_keyword_idf_answers_what_the_last_write_left(
    index: BlockingIndex, collection: str
) -> None:
    """`keyword_idf` asked again after each kind of write weighs the Scope's points as the
    write left them (how many hold the keyword vector, and the term), never an earlier
    answer to the same legs."""
    legs = [keyword_leg(1, 2)]
    index.upsert(collection, [passage(idx=i, terms=(1,)) for i in range(3)])
    assert index.keyword_idf(collection, scope(), legs) == index.keyword_idf(
        collection, scope(), legs
    )
    assert index.keyword_idf(collection, scope(), legs)[0] == pytest.approx(
        (bm25_idf(3, 3), bm25_idf(3, 0))
    )
    index.upsert(collection, [passage(doc="doc2", idx=0, terms=(2,))])
    assert index.keyword_idf(collection, scope(), legs)[0] == pytest.approx(
        (bm25_idf(4, 3), bm25_idf(4, 1))
    )
    index.delete_document(collection, scope(), "doc1")
    assert index.keyword_idf(collection, scope(), legs)[0] == pytest.approx(
        (bm25_idf(1, 0), bm25_idf(1, 1))
    )
    index.delete_scope(collection, scope())
    assert index.keyword_idf(collection, scope(), legs)[0] == pytest.approx(
        (bm25_idf(0, 0), bm25_idf(0, 0))
    )


def test_keyword_idf_holds_in_a_scope_too_large_to_count_term_by_term(
    index: BlockingIndex, collection: str
) -> None:
    """In a scope whose points holding the keyword vector are more than `keyword_idf`
    counts term by term (`IDF_COUNT_LIMIT`), each term's IDF is still the one the keyword
    leg scores with, over all of them."""
    held = IDF_COUNT_LIMIT + 44
    index.upsert(
        collection,
        [passage(idx=i, terms=(1, 2) if i % 3 == 0 else (1,)) for i in range(held)],
    )
    index.upsert(collection, [passage(tenant="t2", idx=i, terms=(2,)) for i in range(30)])
    [idf] = index.keyword_idf(collection, scope(), [keyword_leg(1, 2, 99)])
    thirds = len(range(0, held, 3))
    expected = (bm25_idf(held, held), bm25_idf(held, thirds), bm25_idf(held, 0))
    assert idf == pytest.approx(expected, rel=1e-4)  # the engine's scores are float32
    [keyword] = index.query(collection, scope(), [keyword_leg(1, 2, 99, limit=held)]).legs
    first = {hit.point_id: hit.score for hit in keyword}[point_id("t1", "kb", "doc1", 0)]
    assert first == pytest.approx(idf[0] + idf[1])


def test_bad_input_is_rejected(index: BlockingIndex, collection: str) -> None:
    """Wrong dense size, non-UUID ids and foreign collection names raise ValueError."""
    with pytest.raises(ValueError, match="dimensions"):
        index.upsert(collection, [passage(dense=(1.0, 0.0))])
    with pytest.raises(ValueError, match="dimensions"):
        index.query(collection, scope(), [dense_leg((1.0,))])
    bad_id = Passage("doc1-0", axis(0), sparse(1), passage().payload)
    with pytest.raises(ValueError, match="UUID"):
        index.upsert(collection, [bad_id])
    with pytest.raises(ValueError, match="UUID"):
        index.delete_points(collection, scope(), ["doc1-0"])
    with pytest.raises(ValueError, match="collection"):
        index.count("../elsewhere", scope())


def test_ping_then_close(index: BlockingIndex, collection: str) -> None:
    """A live index answers ping; a closed one reports itself unavailable."""
    index.ensure_collection(collection)
    index.ping()
    index.close()
    with pytest.raises(IndexUnavailableError):
        index.ping()
    with pytest.raises(IndexUnavailableError):
        index.count(collection, scope())


# --- engine specifics -------------------------------------------------------------------


def test_edge_upserts_survive_close_and_reopen(tmp_path: Path) -> None:
    """Points written by one EdgeIndex are there, indexed and searchable, for the next one."""
    collection = org_collection(ORG)
    first = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    first.upsert(collection, [passage(idx=i) for i in range(5)])
    first.close()

    second = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    try:
        assert second.count(collection, scope()) == 5
        assert second.document_ids(collection, scope()) == {"doc1"}
        [dense] = hit_ids(second, collection, scope(), dense_leg(axis(3), limit=1))
        assert dense == [point_id("t1", "kb", "doc1", 3)]
    finally:
        second.close()


def _mixed_corpus(rng: random.Random) -> list[Passage]:
    """Three tenants, two KBs each, two clearances: 240 passages, enough vector data for a
    1 KB indexing threshold to build an HNSW graph."""
    return [
        with_document_terms(found, 7, 300 + n) if found.payload.passage_index == 0 else found
        for n, found in enumerate(
            passage(
                tenant=tenant,
                kb=kb,
                doc=f"doc{n % 10}",
                idx=n // 10,
                label=Classification.CONFIDENTIAL if n % 3 == 0 else Classification.INTERNAL,
                dense=random_unit(rng),
                terms=(7, 100 + n % 25),
            )
            for tenant in ("t1", "t2", "t3")
            for kb in ("kb", "kb2")
            for n in range(40)
        )
    ]


def _indexed_edge(root: Path) -> BlockingIndex:
    return BlockingIndex(EdgeIndex(root, dense_dim=DIM, indexing_threshold_kb=1))


def test_edge_optimize_builds_the_graph_and_searches_stay_inside_the_scope(
    tmp_path: Path,
) -> None:
    """After `optimize` indexes a collection (HNSW graph, searched through the graph even
    under the Scope filter), every leg still returns only the scope's passages and finds a
    passage by its own vector first; the keyword legs answer exactly as before and the
    dense leg nearly so (the graph is approximate, and built by several threads: at most
    one of an exact top 10 may be missed); a second call has nothing left to do."""
    collection = org_collection(ORG)
    corpus = _mixed_corpus(random.Random(7))
    index = _indexed_edge(tmp_path)
    index.upsert(collection, corpus)
    scopes = [
        scope("t1", clearance=Classification.CONFIDENTIAL),
        scope("t2", ("kb2",)),
        scope("t3", ("kb", "kb2")),
    ]
    probes = [corpus[5], corpus[47], corpus[130], corpus[233]]

    def answers() -> list[tuple[list[str], list[list[float]]]]:
        """Per scope and probe: the dense leg's passages, and every leg's scores (the
        keyword legs tie often, and ties may come back in another order)."""
        found = []
        for where in scopes:
            for n, probe in enumerate(probes):
                legs = index.query(
                    collection,
                    where,
                    [
                        dense_leg(probe.dense, limit=10),
                        keyword_leg(7, 100 + n, limit=10),
                        document_leg(7, limit=10),
                    ],
                ).legs
                scores = [[round(hit.score, 5) for hit in leg] for leg in legs]
                found.append(([hit.point_id for hit in legs[0]], scores))
        return found

    def visible_ids() -> list[list[list[str]]]:
        return [
            hit_ids(
                index, collection, where, dense_leg(probe.dense), keyword_leg(7), document_leg(7)
            )
            for where in scopes
            for probe in probes
        ]

    exact = answers()
    try:
        assert index.optimize() == [collection]
        assert index.optimize() == []
        allowed = [
            {p.point_id for p in corpus if where.admits(to_payload(p.payload))} for where in scopes
        ]
        for position, legs in enumerate(visible_ids()):
            visible = allowed[position // len(probes)]
            assert legs[0]
            assert all(set(found) <= visible for found in legs)
        for where in scopes:
            for probe in probes:
                if where.admits(to_payload(probe.payload)):
                    [dense] = hit_ids(index, collection, where, dense_leg(probe.dense, limit=1))
                    assert dense == [probe.point_id]
        for (dense_after, scores_after), (dense_before, scores_before) in zip(
            answers(), exact, strict=True
        ):
            assert scores_after[1:] == scores_before[1:]
            assert len(set(dense_after) & set(dense_before)) >= len(dense_before) - 1
    finally:
        index.close()


def test_edge_answers_a_far_question_exactly_where_its_graph_misses(tmp_path: Path) -> None:
    """Questions far from a tenant's content (a tight cluster of 3,000 passages, a few
    scattered ones) are where a graph search misses: over 20 such questions the graph
    alone finds only part of the exact top 10. Through the adapter, every question whose
    exact best cosine is below `EXACT_CHECK_BELOW` gets exactly the exact top 10."""
    dim, rng = 32, random.Random(2)

    def around(axis_index: int, spread: float) -> tuple[float, ...]:
        values = [(d == axis_index) + rng.gauss(0, spread) for d in range(dim)]
        norm = math.sqrt(sum(v * v for v in values))
        return tuple(v / norm for v in values)

    corpus = [passage(doc=f"near{n}", dense=around(0, 0.05)) for n in range(3000)]
    corpus += [passage(doc=f"far{n}", dense=around(dim - 1, 0.6)) for n in range(20)]
    rng.shuffle(corpus)
    questions = [around(dim - 1, 0.6) for _ in range(20)]
    collection = org_collection(ORG)
    index = BlockingIndex(EdgeIndex(tmp_path, dense_dim=dim, indexing_threshold_kb=1))
    try:
        index.upsert(collection, corpus)
        assert index.optimize() == [collection]
        answers = [index.rank(collection, scope(), [dense_leg(q, limit=10)]) for q in questions]
    finally:
        index.close()
    shard = EdgeShard.load(str(tmp_path / EDGE_DIR / collection))
    try:
        exact = [_edge_dense(shard, q, SearchParams(exact=True)) for q in questions]
        graph = [_edge_dense(shard, q, _EDGE_GRAPH_SEARCH) for q in questions]
    finally:
        shard.close()
    covered = [n for n, top in enumerate(exact) if top[0][1] < EXACT_CHECK_BELOW]
    assert len(covered) >= 10
    assert any({i for i, _ in graph[n]} != {i for i, _ in exact[n]} for n in covered)
    for n in covered:
        assert [point.point_id for point in answers[n].legs[0]] == [i for i, _ in exact[n]]
        assert answers[n].exact_checks == 1


def _edge_dense(
    shard: EdgeShard, vector: tuple[float, ...], params: SearchParams
) -> list[tuple[str, float]]:
    """The top 10 of the dense vector in the default Scope, searched as `params` say."""
    request = QueryRequest(
        limit=10,
        query=Query.Nearest(list(vector), using=DENSE_VECTOR),
        filter=_edge_scope_filter(scope()),
        params=params,
        with_payload=False,
    )
    (found,) = shard.query_batch(QueryBatchRequest([request]))
    return [(str(point.id), point.score) for point in found]


def test_edge_threshold_zero_never_indexes(tmp_path: Path) -> None:
    """With the indexing threshold at 0, `optimize` leaves every segment plain (a start
    stays instant) and searches still answer; the same data would have been indexed."""
    collection = org_collection(ORG)
    corpus = _mixed_corpus(random.Random(3))
    never = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM, indexing_threshold_kb=0))
    never.upsert(collection, corpus)
    try:
        assert never.optimize() == []
        [dense] = hit_ids(never, collection, scope(), dense_leg(corpus[1].dense, limit=1))
        assert dense == [corpus[1].point_id]
    finally:
        never.close()
    later = _indexed_edge(tmp_path)
    try:
        assert later.optimize() == [collection]
    finally:
        later.close()


def _recorded_search_pool(root: Path, collection: str) -> object:
    """The search pool size Edge keeps in a shard's config."""
    config = json.loads((root / EDGE_DIR / collection / "edge_config.json").read_text())
    return config.get("max_search_threads")


@pytest.mark.parametrize(
    ("search_threads", "pool"), [(1, 1), (3, 3), (None, len(os.sched_getaffinity(0)))]
)
def test_edge_shards_open_with_the_configured_search_pool(
    tmp_path: Path, search_threads: int | None, pool: int
) -> None:
    """Every shard is opened with the configured search pool, one thread per usable core
    unless set, and searches answer the same with any; a later open with another count
    applies that one, not the count the shard kept."""
    collection = org_collection(ORG)
    corpus = _mixed_corpus(random.Random(5))
    index = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM, search_threads=search_threads))
    try:
        index.upsert(collection, corpus)
        [dense] = hit_ids(index, collection, scope(), dense_leg(corpus[7].dense, limit=1))
        assert dense == [corpus[7].point_id]
    finally:
        index.close()
    assert _recorded_search_pool(tmp_path, collection) == pool
    again = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM, search_threads=2))
    try:
        [dense] = hit_ids(again, collection, scope(), dense_leg(corpus[7].dense, limit=1))
        assert dense == [corpus[7].point_id]
    finally:
        again.close()
    assert _recorded_search_pool(tmp_path, collection) == 2


def test_edge_search_pool_of_no_threads_is_refused(tmp_path: Path) -> None:
    """A search pool of 0 threads is a configuration error."""
    with pytest.raises(ValueError, match="search_threads"):
        BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM, search_threads=0))


def test_edge_writes_after_optimize_are_searched(tmp_path: Path) -> None:
    """An indexed collection takes new points, replacements and deletions, and every
    search sees them at once, also after the next open."""
    collection = org_collection(ORG)
    corpus = _mixed_corpus(random.Random(11))
    index = _indexed_edge(tmp_path)
    index.upsert(collection, corpus)
    assert index.optimize() == [collection]
    added = passage(doc="late", dense=axis(0), terms=(999,))
    index.upsert(collection, [added])
    gone = corpus[0]
    index.delete_document(collection, scope(), gone.payload.document_id)
    try:
        assert hit_ids(index, collection, scope(), keyword_leg(999)) == [[added.point_id]]
        assert gone.payload.document_id not in index.document_ids(collection, scope())
    finally:
        index.close()
    reopened = _indexed_edge(tmp_path)
    try:
        [dense] = hit_ids(reopened, collection, scope(), dense_leg(axis(0), limit=1))
        assert dense == [added.point_id]
        assert gone.payload.document_id not in reopened.document_ids(collection, scope())
    finally:
        reopened.close()


# Imports only what an Edge writer needs (qdrant-client alone takes seconds to import).
_KILLED_WRITER = """
import os, signal, sys, uuid
from pathlib import Path
from ingest.index import Passage, SparseVector, org_collection
from ingest.payload import PassagePayload, Scope
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex

index = BlockingIndex(EdgeIndex(Path(sys.argv[1]), dense_dim=int(sys.argv[2])))
collection = org_collection("acme")
payload = dict(tenant_id="t1", knowledge_base_id="kb", document_id="doc1", document_version="v1",
               classification="internal", text="x", title="x", source="x", checksum="x",
               indexed_at="2026-01-01T00:00:00Z")
index.upsert(collection, [
    Passage(str(uuid.uuid4()), (1.0,) * int(sys.argv[2]), SparseVector((1,), (1.0,)),
            PassagePayload(passage_index=i, **payload))
    for i in range(40)
])
index.backfill_org(collection, Scope.of(org_id="acme", tenant_id="t1", kb_ids=["kb"], strict=False))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_edge_writes_survive_kill_9(tmp_path: Path) -> None:
    """A process killed right after its writes return loses none of them (upsert, then a
    payload update): the WAL is replayed on load."""
    proc = subprocess.run(  # noqa: S603 - our own interpreter running our own script
        [sys.executable, "-c", _KILLED_WRITER, str(tmp_path), str(DIM)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    index = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    try:
        assert index.count(org_collection(ORG), scope()) == 40
    finally:
        index.close()


def test_edge_counts_the_scopes_keyword_holders_once_between_writes(tmp_path: Path) -> None:
    """On Edge (the data dir's only writer) `keyword_idf` counts how many of a Scope's
    points hold each keyword vector once, then again only after a write to the collection:
    other questions over the same Scope cost no such count, another Scope has its own."""
    edge = EdgeIndex(tmp_path, dense_dim=DIM)
    index = BlockingIndex(edge)
    counted: list[tuple[str, ...]] = []
    holders = edge.engine.keyword_holders

    def counting(collection: str, scope: Scope, names: Sequence[str]) -> dict[str, int]:
        counted.append(tuple(names))
        return holders(collection, scope, names)

    edge.engine.keyword_holders = counting  # type: ignore[method-assign]  # a spy on the engine's count
    collection = org_collection(ORG)
    try:
        index.upsert(collection, [passage(idx=i, terms=(1,)) for i in range(3)])
        index.keyword_idf(collection, scope(), [keyword_leg(1, 2)])
        index.keyword_idf(collection, scope(), [keyword_leg(3)])
        assert len(counted) == 1
        index.keyword_idf(collection, scope(tenant="t2"), [keyword_leg(1)])
        assert len(counted) == 2
        # writes outside the Scope's cells: another workspace, a label above its clearance
        index.upsert(collection, [passage(tenant="t2", terms=(1,))])
        index.upsert(collection, [passage(doc="x", label=Classification.RESTRICTED)])
        index.keyword_idf(collection, scope(), [keyword_leg(1)])
        assert len(counted) == 2
        index.upsert(collection, [passage(doc="doc2", terms=(2,))])
        assert index.keyword_idf(collection, scope(), [keyword_leg(2)])[0] == pytest.approx(
            (bm25_idf(4, 1),)
        )
        assert len(counted) == 3
    finally:
        index.close()


def test_edge_directory_is_held_by_one_index(tmp_path: Path) -> None:
    """A second EdgeIndex on a directory in use reports the collection unavailable."""
    collection = org_collection(ORG)
    first = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    second = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    try:
        first.ensure_collection(collection)
        with pytest.raises(IndexUnavailableError):
            second.count(collection, scope())
    finally:
        second.close()
        first.close()


def test_edge_is_safe_across_threads(tmp_path: Path) -> None:
    """Concurrent writers and readers on shared collections lose no points."""
    index = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    collections = [org_collection(f"org{n}") for n in range(3)]

    def work(n: int) -> int:
        target = collections[n % 3]
        index.upsert(target, [passage(tenant=f"t{n}", idx=i) for i in range(20)])
        return index.count(target, scope(f"t{n}"))

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            assert list(pool.map(work, range(12))) == [20] * 12
        assert sum(index.count(collections[n % 3], scope(f"t{n}")) for n in range(12)) == 240
    finally:
        index.close()


def test_unreachable_server_is_unavailable() -> None:
    """A server that does not answer makes ping and reads raise IndexUnavailableError."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    index = BlockingIndex.opening(
        lambda: ServerIndex.connect(f"http://127.0.0.1:{port}", None, 1, dense_dim=DIM)
    )
    try:
        with pytest.raises(IndexUnavailableError):
            index.ping()
        with pytest.raises(IndexUnavailableError):
            index.count(org_collection(ORG), scope())
    finally:
        index.close()


def test_edge_shards_live_under_the_data_dir(tmp_path: Path) -> None:
    """One shard directory per collection, created only when written to."""
    index = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    try:
        index.count(org_collection("ghost"), scope())
        index.ensure_collection(org_collection(ORG))
        assert sorted(p.name for p in (tmp_path / EDGE_DIR).iterdir()) == [org_collection(ORG)]
    finally:
        index.close()
    assert os.listdir(tmp_path / EDGE_DIR / org_collection(ORG))


# --- collections made before whole-document keyword vectors ------------------------------


def _older_collection_is_served_without_document_legs(
    index: BlockingIndex, collection: str
) -> None:
    assert not index.document_keywords(collection)
    first = with_document_terms(passage(idx=0, terms=(7,)), 7, 8)
    index.upsert(collection, [first, passage(idx=1, terms=(8,))])
    dense, keyword, documents = index.query(
        collection, scope(), [dense_leg(axis(0), limit=1), keyword_leg(8), document_leg(7, 8)]
    ).legs
    assert [h.point_id for h in dense] == [first.point_id]
    assert [h.point_id for h in keyword] == [point_id("t1", "kb", "doc1", 1)]
    assert documents == ()
    assert index.rank(collection, scope(), [document_leg(7, 8)]).legs == ((),)


def test_edge_shard_made_before_document_keywords_opens_and_skips_that_leg(
    tmp_path: Path,
) -> None:
    """A shard created by an earlier release (dense and passage BM25 vectors only) still
    opens, takes writes (the whole-document vector is dropped) and answers every other
    leg; the document keyword leg finds nothing there."""
    collection = org_collection(ORG)
    older = EdgeConfig(
        vectors={DENSE_VECTOR: EdgeVectorParams(size=DIM, distance=Distance.Cosine)},
        sparse_vectors={SPARSE_VECTOR: EdgeSparseVectorParams(modifier=Modifier.Idf)},
    )
    EdgeShard.create(str(tmp_path / EDGE_DIR / collection), older).close()
    index = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    try:
        _older_collection_is_served_without_document_legs(index, collection)
    finally:
        index.close()


def test_local_collection_made_before_document_keywords_skips_that_leg(tmp_path: Path) -> None:
    """The same for qdrant-client: a collection without the whole-document vector."""
    collection = org_collection(ORG)
    client = QdrantClient(path=str(tmp_path))
    client.create_collection(
        collection,
        vectors_config={
            DENSE_VECTOR: models.VectorParams(size=DIM, distance=models.Distance.COSINE)
        },
        sparse_vectors_config={
            SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)
        },
    )
    client.close()
    index = BlockingIndex(ServerIndex.local(tmp_path, dense_dim=DIM))
    try:
        _older_collection_is_served_without_document_legs(index, collection)
    finally:
        index.close()
