"""The dense leg's recall under Scope filters once search graphs are built, against exact
search of the same Scope.

A small synthetic collection (clustered vectors, tenants of very different sizes, several
KBs and labels each) is written through the adapter, with thresholds lowered so that
every Scope here is searched through the graph, as tenants of tens of thousands of
passages are on a real store. The reference is a numpy search over the Scope's own points.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from qdrant_client import QdrantClient, models
from testcontainers.community.qdrant import QdrantContainer

from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.engines.server.index import ServerIndex
from ingest.index import Leg, LegKind, Passage, SparseVector, org_collection
from ingest.payload import CLASSIFICATION_ORDER, Classification, PassagePayload, Scope
from tests.integration.test_index_contract import QDRANT_IMAGE
from tests.support.services import require_docker

DIM = 64
ORG = "acme"
COLLECTION = org_collection(ORG)
TENANTS = {"big": 6000, "mid": 1500, "small": 120}
KBS = ("kb-a", "kb-b", "kb-c")
LABEL_SHARES = (0.4, 0.3, 0.2, 0.1)
CENTRES = 24
TOP = 10
QUERIES = 40

Vectors = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Corpus:
    """Every point's vector, tenant, KB and label, and its id."""

    vectors: Vectors
    tenants: list[str]
    kbs: list[str]
    labels: list[int]

    def point_id(self, position: int) -> str:
        return str(uuid.UUID(int=position + 1))

    def inside(self, scope: Scope) -> npt.NDArray[np.int64]:
        level = CLASSIFICATION_ORDER.index(scope.clearance)
        return np.asarray(
            [
                position
                for position, (tenant, kb, label) in enumerate(
                    zip(self.tenants, self.kbs, self.labels, strict=True)
                )
                if tenant == scope.tenant_id and kb in scope.kb_ids and label <= level
            ],
            dtype=np.int64,
        )


def _unit(rows: Vectors) -> Vectors:
    normalised: Vectors = rows / np.linalg.norm(rows, axis=-1, keepdims=True)
    return normalised


def make_corpus(seed: int = 11) -> Corpus:
    """Each KB of each tenant draws its points around two of the shared centres."""
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((CENTRES, DIM)))
    vectors, tenants, kbs, labels = [], [], [], []
    for tenant, size in TENANTS.items():
        topics = {kb: rng.choice(CENTRES, size=2, replace=False) for kb in KBS}
        for _ in range(size):
            kb = KBS[int(rng.integers(0, len(KBS)))]
            centre = centres[int(rng.choice(topics[kb]))]
            vectors.append(centre + rng.standard_normal(DIM) / np.sqrt(DIM) * 0.8)
            tenants.append(tenant)
            kbs.append(kb)
            labels.append(int(rng.choice(len(CLASSIFICATION_ORDER), p=LABEL_SHARES)))
    return Corpus(_unit(np.asarray(vectors)), tenants, kbs, labels)


def passages(corpus: Corpus) -> list[Passage]:
    return [
        Passage(
            point_id=corpus.point_id(position),
            dense=tuple(float(v) for v in corpus.vectors[position]),
            sparse=SparseVector((position % 50,), (1.0,)),
            payload=PassagePayload(
                tenant_id=corpus.tenants[position],
                knowledge_base_id=corpus.kbs[position],
                org_id=ORG,
                document_id=f"doc{position}",
                document_version="v1",
                passage_index=0,
                classification=CLASSIFICATION_ORDER[corpus.labels[position]].value,
                text=f"passage {position}",
                title="",
                source="",
                checksum="0",
                indexed_at="2026-01-01T00:00:00Z",
            ),
        )
        for position in range(len(corpus.vectors))
    ]


SCOPES = [
    # most of the collection: the graph search with a loose filter
    Scope.of(org_id=ORG, tenant_id="big", kb_ids=KBS, clearance=Classification.RESTRICTED),
    # a few percent of it, inside a large tenant: the narrow filter ACORN is for
    Scope.of(org_id=ORG, tenant_id="big", kb_ids=["kb-a"], clearance=Classification.PUBLIC),
    Scope.of(org_id=ORG, tenant_id="mid", kb_ids=["kb-b", "kb-c"]),
    Scope.of(org_id=ORG, tenant_id="small", kb_ids=KBS, clearance=Classification.RESTRICTED),
]


def queries(corpus: Corpus, inside: npt.NDArray[np.int64], seed: int) -> Vectors:
    """Half near points of the Scope (a tenant asking about its own documents), half near
    any point of the collection (the filter unrelated to where the question lands)."""
    rng = np.random.default_rng(seed)
    anchors = np.concatenate(
        [
            rng.choice(inside, size=QUERIES // 2),
            rng.integers(0, len(corpus.vectors), size=QUERIES - QUERIES // 2),
        ]
    )
    noise = rng.standard_normal((QUERIES, DIM)) / np.sqrt(DIM) * 0.3
    return _unit(corpus.vectors[anchors] + noise)


def assert_recall(index: BlockingIndex, corpus: Corpus) -> None:
    for number, scope in enumerate(SCOPES):
        inside = corpus.inside(scope)
        recalls = []
        for query in queries(corpus, inside, seed=number):
            leg = Leg(LegKind.DENSE, dense=tuple(float(v) for v in query), limit=TOP)
            (found,) = index.rank(COLLECTION, scope, [leg]).legs
            exact = inside[np.argsort(-(corpus.vectors[inside] @ query))[:TOP]]
            expected = {corpus.point_id(int(position)) for position in exact}
            returned = {point.point_id for point in found}
            assert returned <= {corpus.point_id(int(position)) for position in inside}
            recalls.append(len(returned & expected) / len(expected))
        assert np.mean(recalls) >= 0.98, (scope, np.mean(recalls), min(recalls))


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return make_corpus()


def test_edge_filtered_dense_search_finds_the_exact_top_10(tmp_path: Path, corpus: Corpus) -> None:
    """Once Qdrant Edge has built its graphs, the dense leg returns on average at least 98%
    of the exact top 10 of every Scope, from most of a collection down to a few percent of
    it inside a large tenant and a small tenant's, for questions near the Scope's points and
    near anyone's; and never a point outside the Scope."""
    index = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM, indexing_threshold_kb=1))
    try:
        index.upsert(COLLECTION, passages(corpus))
        assert index.optimize() == [COLLECTION]
        assert_recall(index, corpus)
    finally:
        index.close()


@pytest.fixture
def server_index() -> Iterator[tuple[BlockingIndex, str]]:
    require_docker()
    with QdrantContainer(image=QDRANT_IMAGE) as container:
        url = f"http://{container.rest_host_address}"
        index = BlockingIndex.opening(lambda: ServerIndex.connect(url, None, 10, dense_dim=DIM))
        yield index, url
        index.close()


@pytest.mark.docker
def test_server_filtered_dense_search_finds_the_exact_top_10(
    server_index: tuple[BlockingIndex, str], corpus: Corpus
) -> None:
    """The same on a Qdrant server, once its optimizer has built the collection's graphs
    (its thresholds lowered for the test, as the Edge test lowers Edge's)."""
    index, url = server_index
    index.ensure_collection(COLLECTION)
    client = QdrantClient(url=url, check_compatibility=False)
    try:
        client.update_collection(
            COLLECTION,
            optimizers_config=models.OptimizersConfigDiff(indexing_threshold=1),
            hnsw_config=models.HnswConfigDiff(full_scan_threshold=1),
        )
        index.upsert(COLLECTION, passages(corpus))
        deadline = time.monotonic() + 120
        while client.get_collection(COLLECTION).status != models.CollectionStatus.GREEN:
            assert time.monotonic() < deadline, "the server did not finish indexing"
            time.sleep(0.5)
    finally:
        client.close()
    assert_recall(index, corpus)
