"""Property: each engine's scope filter admits exactly what `Scope.admits` admits.

Random points (tenant, KB, org or none, label from small alphabets) and random scopes;
`count`, a dense leg and a keyword leg with big limits, and `document_ids` must all
agree with the oracle. Each example writes under fresh tenant ids.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, nullcontext
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.index import Index, Leg, LegKind, Passage, SparseVector, org_collection
from ingest.payload import Classification, PassagePayload, Scope, to_payload
from ingest.qdrant_edge import EdgeIndex
from ingest.qdrant_server import ServerIndex

DIM = 4
TENANTS = ("t1", "t2")
KBS = ("kb1", "kb2", "kb3")
ORGS = ("o1", "o2", None)
DOCS = ("d1", "d2", "d3")
COLLECTION = org_collection("prop")
_run = itertools.count()


@dataclass(frozen=True)
class Point:
    tenant: str
    kb: str
    org: str | None
    label: Classification
    doc: str


points_st = st.lists(
    st.builds(
        Point,
        tenant=st.sampled_from(TENANTS),
        kb=st.sampled_from(KBS),
        org=st.sampled_from(ORGS),
        label=st.sampled_from(tuple(Classification)),
        doc=st.sampled_from(DOCS),
    ),
    min_size=1,
    max_size=25,
)
scopes_st = st.builds(
    Scope.of,
    org_id=st.sampled_from(("o1", "o2")),
    tenant_id=st.sampled_from(TENANTS),
    kb_ids=st.frozensets(st.sampled_from(KBS), min_size=1),
    clearance=st.sampled_from(tuple(Classification)),
    strict=st.booleans(),
)


def _passage(point: Point, prefix: str, n: int) -> Passage:
    return Passage(
        point_id=str(uuid.uuid4()),
        dense=(1.0, n / 10, 0.5, 0.25),
        sparse=SparseVector(indices=(1, 2 + n), values=(1.0, 1.0)),
        payload=PassagePayload(
            tenant_id=prefix + point.tenant,
            knowledge_base_id=point.kb,
            document_id=point.doc,
            document_version="v1",
            passage_index=n,
            classification=point.label,
            text="x",
            title="x",
            source="x",
            checksum="x",
            indexed_at="2026-01-01T00:00:00Z",
            org_id=point.org,
        ),
    )


def _prefixed(scope: Scope, prefix: str) -> Scope:
    return Scope.of(
        org_id=scope.org_id,
        tenant_id=prefix + scope.tenant_id,
        kb_ids=scope.kb_ids,
        clearance=scope.clearance,
        strict=scope.strict,
    )


Engine = Callable[[], AbstractContextManager[Index]]


@pytest.fixture(scope="module", params=["edge", "local"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """An index per example. Edge shares one shard, where earlier examples' points are noise
    under other tenant ids; local mode gets a fresh client, as its pure-Python filters slow
    down with every point written (shrinking runs hundreds of examples)."""
    if request.param == "local":
        yield lambda: closing(ServerIndex.local(None, dense_dim=DIM))
        return
    edge = EdgeIndex(Path(tmp_path_factory.mktemp("edge")), dense_dim=DIM)
    edge.ensure_collection(COLLECTION)
    yield lambda: nullcontext(edge)
    edge.close()


@settings(max_examples=40, deadline=None, database=None)
@given(points=points_st, scopes=st.lists(scopes_st, min_size=1, max_size=8))
def test_reads_admit_exactly_what_the_scope_admits(
    engine: Engine, points: list[Point], scopes: list[Scope]
) -> None:
    """count, both query legs and document_ids return exactly the points `Scope.admits`."""
    prefix = f"r{next(_run)}-"
    passages = [_passage(point, prefix, n) for n, point in enumerate(points)]
    with engine() as index:
        index.upsert(COLLECTION, passages)
        for scope in scopes:
            _check(index, _prefixed(scope, prefix), passages)


def _check(engine: Index, scope: Scope, passages: list[Passage]) -> None:
    admitted = [p for p in passages if scope.admits(to_payload(p.payload))]
    expected = {p.point_id for p in admitted}
    legs = [
        Leg(LegKind.DENSE, dense=(1.0, 0.0, 0.0, 0.0), limit=1000),
        Leg(LegKind.KEYWORD, sparse=SparseVector(indices=(1,), values=(1.0,)), limit=1000),
    ]
    assert engine.count(COLLECTION, scope) == len(expected)
    dense, keyword = engine.query(COLLECTION, scope, legs).legs
    assert {h.point_id for h in dense} == expected
    assert {h.point_id for h in keyword} == expected
    assert all(scope.admits(to_payload(h.payload)) for h in dense)
    assert engine.document_ids(COLLECTION, scope) == {p.payload.document_id for p in admitted}
