"""Dense vector sets beside `dense` (a KB's model migration), on every engine: a named
vector added to a collection that has points, filled inside a Scope only, searched by a
leg naming it, kept across a restart (Edge), and removed from one Scope's points only.

Vectors are small and synthetic: no embedding model.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.index import DENSE_VECTOR, Leg, LegKind, dense_vector_name
from tests.integration.test_index_contract import (
    DIM,
    Engine,
    axis,
    engine,  # noqa: F401 - the parametrised engine fixture
    passage,
    qdrant_url,  # noqa: F401 - the server engine's fixture (skipped without Docker)
    scope,
)

NEW = dense_vector_name("test_model")
NEW_DIM = 4


def unit4(i: int) -> tuple[float, ...]:
    return tuple(1.0 if d == i else 0.0 for d in range(NEW_DIM))


def _write_two_workspaces(index: BlockingIndex, collection: str) -> None:
    index.upsert(
        collection,
        [passage(tenant=tenant, idx=i) for tenant in ("t1", "t2") for i in range(3)],
    )


def test_a_vector_set_is_added_filled_inside_a_scope_and_searched(
    engine: Engine,  # noqa: F811 - the fixture above
    tmp_path: Path,
) -> None:
    """A second dense vector set is added to a collection holding points; filling it for
    one workspace's points leaves the other's without it, a leg naming it finds only the
    filled points of its Scope, the old `dense` vectors answer as before, and removing the
    set from one Scope keeps every point and its `dense` vector."""
    index, collection = engine.index, "kb_org_acme"
    _write_two_workspaces(index, collection)
    index.add_dense_vector(collection, NEW, NEW_DIM)
    index.add_dense_vector(collection, NEW, NEW_DIM)  # idempotent
    mine = scope("t1")
    missing, _ = index.missing_vector_page(collection, mine, NEW, None, 100)
    assert len(missing) == 3
    assert {p.payload.tenant_id for p in missing} == {"t1"}
    # A vector for another workspace's point is not taken: the Scope conditions the update.
    theirs = passage(tenant="t2", idx=0).point_id
    filled = {p.point_id: unit4(p.payload.passage_index) for p in missing}
    assert index.set_dense_vectors(collection, mine, NEW, {**filled, theirs: unit4(0)}) == 3
    assert index.count_vector(collection, mine, NEW) == 3
    assert index.count_vector(collection, scope("t2"), NEW) == 0
    assert index.missing_vector_page(collection, mine, NEW, None, 100) == ([], None)
    found = index.query(
        collection, mine, [Leg(LegKind.DENSE, dense=unit4(1), limit=10, vector=NEW)]
    ).legs[0]
    assert found[0].payload.passage_index == 1
    assert {hit.payload.tenant_id for hit in found} == {"t1"}
    old = index.query(collection, mine, [Leg(LegKind.DENSE, dense=axis(2), limit=1)]).legs[0]
    assert [hit.payload.passage_index for hit in old] == [2]
    # A point written with both sets carries both.
    both = replace(passage(tenant="t1", idx=5), dense_sets=((NEW, unit4(3)),))
    index.upsert(collection, [both])
    assert index.count_vector(collection, mine, NEW) == 4
    (page, _) = index.passages_page(collection, mine, None, 100)
    assert {name for p in page for name, _ in p.dense_sets} == {NEW}
    # Retired from one Scope: its points keep `dense`, the other workspace is untouched.
    assert index.drop_dense_vectors(collection, mine, NEW) == 4
    assert index.count_vector(collection, mine, NEW) == 0
    assert index.count(collection, mine) == 4
    assert index.count_vector(collection, mine, DENSE_VECTOR) == 4


def test_an_edge_shard_keeps_its_added_vector_set_across_a_restart(tmp_path: Path) -> None:
    """A shard given a vector set loads again with it (a load whose config lacked it would
    be refused), its vectors searchable, and a point may lack `dense` altogether."""
    collection = "kb_org_acme"
    index = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    _write_two_workspaces(index, collection)
    index.add_dense_vector(collection, NEW, NEW_DIM)
    only_new = replace(passage(tenant="t1", idx=7), dense=(), dense_sets=((NEW, unit4(2)),))
    index.upsert(collection, [only_new])
    index.close()
    again = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    try:
        found = again.query(
            collection, scope("t1"), [Leg(LegKind.DENSE, dense=unit4(2), limit=1, vector=NEW)]
        ).legs[0]
        assert [hit.point_id for hit in found] == [only_new.point_id]
        assert again.count_vector(collection, scope("t1"), DENSE_VECTOR) == 3
    finally:
        again.close()


def test_a_leg_names_only_dense_vector_sets() -> None:
    """A dense leg's vector is `dense` or `dense_<slug>`; a sparse vector's name is refused."""
    with pytest.raises(ValueError, match="not a dense vector set"):
        Leg(LegKind.DENSE, dense=axis(0), vector="bm25")
    with pytest.raises(ValueError, match="not a model slug"):
        dense_vector_name("bad name")
