"""The Index contract for a workspace's life: reading passages back with their vectors
(export) and dropping an organization's collection, on every engine the contract suite
runs (Qdrant Edge, qdrant-client local mode, a Qdrant server container without which that
case is skipped). Vectors are small and synthetic (8-d)."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace

import pytest

from ingest.engines.blocking import BlockingIndex
from ingest.engines.server.index import ServerIndex
from ingest.index import (
    SHARED_COLLECTION,
    IndexUnavailableError,
    Passage,
    SparseVector,
    org_collection,
)
from tests.integration.test_index_contract import (  # the contract suite's engines and data
    DIM,
    Engine,
    engine,
    index,
    passage,
    qdrant_url,
    random_unit,
    scope,
)

__all__ = ["engine", "index", "qdrant_url"]  # fixtures, used by name


def _org_collection() -> str:
    return org_collection(f"org-{uuid.uuid4().hex[:12]}")


def _read_all(index: BlockingIndex, collection: str, page: int) -> list[Passage]:
    """Every passage inside the scope of tenant t1's KB `kb`, page by page."""
    found: list[Passage] = []
    offset: str | None = None
    while True:
        passages, offset = index.passages_page(collection, scope(), offset, page)
        assert len(passages) <= page
        found.extend(passages)
        if offset is None:
            return found


def test_passages_page_reads_back_what_was_written_inside_the_scope_only(
    index: BlockingIndex,
) -> None:
    """Paging through a scope returns every point of it exactly as `upsert` took it (ids,
    payloads, dense, BM25 and whole-document BM25 vectors) and nothing of a neighbour in
    the same collection; rewriting the pages into a fresh collection reproduces them."""
    rng = random.Random(7)
    collection, copy = _org_collection(), _org_collection()
    mine = [
        replace(
            passage(idx=i, dense=random_unit(rng), terms=(1, 10 + i)),
            document_sparse=SparseVector(indices=(3, 9), values=(0.5, 1.25)) if i == 0 else None,
        )
        for i in range(7)
    ]
    neighbour = [passage(tenant="t2", idx=i, dense=random_unit(rng)) for i in range(3)]
    index.upsert(collection, mine + neighbour)

    read = _read_all(index, collection, page=3)

    written = {p.point_id: p for p in mine}
    assert sorted(p.point_id for p in read) == sorted(written)
    for got in read:
        want = written[got.point_id]
        assert got.dense == pytest.approx(want.dense, abs=1e-6)
        assert (got.payload, got.sparse, got.document_sparse) == (
            want.payload,
            want.sparse,
            want.document_sparse,
        )
    index.upsert(copy, read)
    assert index.count(copy, scope()) == len(mine)
    assert index.count(copy, scope(tenant="t2")) == 0
    assert index.passages_page(_org_collection(), scope(), None, 10) == ([], None)


def test_drop_collection_removes_an_org_collection_and_refuses_the_shared_one(
    engine: Engine,
) -> None:
    """Dropping an org's collection answers how many points it held and removes it (a
    second drop answers None, counts read 0, a later write creates it afresh, empty of
    the old points); `kb_shared` is never dropped (ValueError) and keeps its points."""
    index = engine.index
    collection = _org_collection()
    index.upsert(collection, [passage(idx=i) for i in range(4)])
    keeper = f"keep-{uuid.uuid4().hex[:8]}"
    index.upsert(SHARED_COLLECTION, [passage(tenant=keeper, idx=0)])

    assert index.drop_collection(collection) == 4
    assert index.drop_collection(collection) is None
    assert index.count(collection, scope()) == 0
    with pytest.raises(ValueError, match="kb_shared"):
        index.drop_collection(SHARED_COLLECTION)
    assert index.count(SHARED_COLLECTION, scope(tenant=keeper)) == 1
    index.upsert(collection, [passage(idx=9)])
    assert index.count(collection, scope()) == 1


@pytest.mark.docker
def test_a_collection_another_replica_dropped_is_found_missing_then_made_anew(
    qdrant_url: str,
) -> None:
    """Two server adapters on one Qdrant (two gateway replicas): after one drops an org's
    collection, the other's next call on it fails as unavailable (503, retried) instead of
    erroring, and from then on it sees the collection as missing and can create it again."""
    first = BlockingIndex.opening(lambda: ServerIndex.connect(qdrant_url, None, 10, dense_dim=DIM))
    second = BlockingIndex.opening(lambda: ServerIndex.connect(qdrant_url, None, 10, dense_dim=DIM))
    collection = _org_collection()
    try:
        first.upsert(collection, [passage()])
        assert second.count(collection, scope()) == 1
        assert first.drop_collection(collection) == 1
        with pytest.raises(IndexUnavailableError):
            second.count(collection, scope())
        assert second.count(collection, scope()) == 0
        second.upsert(collection, [passage(idx=2)])
        assert first.count(collection, scope()) == 1
    finally:
        first.close()
        second.close()
