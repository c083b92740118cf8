"""Properties of a turn's filter inside a Scope, on Qdrant Edge and qdrant-client local mode:
for random filters of the grammar over random points of two workspaces, the engine keeps
exactly what the oracle (`Scope.admits`, which evaluates the narrowing in Python) keeps,
and never a point the Scope alone would not admit: a filter only narrows.
"""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Iterator
from contextlib import closing, nullcontext
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.engines.server.index import ServerIndex
from ingest.index import Leg, LegKind, Passage, SparseVector, org_collection
from ingest.metadata import MetadataError, check_schema, compile_filter, field_indexes
from ingest.payload import Classification, PassagePayload, Scope, to_payload

DIM = 4
COLLECTION = org_collection("filters")
SCHEMA = check_schema(
    {"region": "string", "year": "number", "draft": "boolean", "tags": "string_list"}
)
REGIONS = ("eu", "us", "apac")
TAGS = ("a", "b", "c")
_run = itertools.count()

metadata_st = st.fixed_dictionaries(
    {},
    optional={
        "region": st.sampled_from(REGIONS),
        "year": st.integers(2018, 2024),
        "draft": st.booleans(),
        "tags": st.lists(st.sampled_from(TAGS), min_size=1, max_size=2),
    },
)
points_st = st.lists(
    st.tuples(
        st.sampled_from(("t1", "t2")),
        st.sampled_from(("d1", "d2", "d3")),
        metadata_st,
        st.lists(st.integers(-3, 3), min_size=DIM, max_size=DIM).filter(any),
    ),
    min_size=1,
    max_size=25,
)
_leaf = st.one_of(
    st.sampled_from(REGIONS).map(lambda r: {"region": r}),
    st.lists(st.sampled_from(REGIONS), min_size=1, max_size=2).map(
        lambda r: {"region": {"$in": r}}
    ),
    st.sampled_from(REGIONS).map(lambda r: {"region": {"$ne": r}}),
    st.lists(st.sampled_from(REGIONS), min_size=1, max_size=2).map(
        lambda r: {"region": {"$nin": r}}
    ),
    st.booleans().map(lambda b: {"region": {"$exists": b}}),
    st.integers(2017, 2025).map(lambda y: {"year": y}),
    st.tuples(st.sampled_from(("$gt", "$gte", "$lt", "$lte")), st.integers(2017, 2025)).map(
        lambda o: {"year": {o[0]: o[1]}}
    ),
    st.booleans().map(lambda b: {"draft": b}),
    st.booleans().map(lambda b: {"draft": {"$ne": b}}),
    st.sampled_from(TAGS).map(lambda t: {"tags": t}),
    st.lists(st.sampled_from(TAGS), min_size=1, max_size=2).map(lambda t: {"tags": {"$nin": t}}),
    st.lists(st.sampled_from(("d1", "d2", "d3")), min_size=1, max_size=2).map(
        lambda d: {"document_id": {"$in": d}}
    ),
)
filters_st = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).map(lambda f: {"$and": f}),
        st.lists(inner, min_size=1, max_size=3).map(lambda f: {"$or": f}),
        inner.map(lambda f: {"$not": f}),
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module", params=["edge", "local"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """Edge: one shard for every example (earlier examples' points are noise under other
    tenant ids); local mode: a fresh client per example."""
    if request.param == "local":
        yield lambda: closing(BlockingIndex(ServerIndex.local(None, dense_dim=DIM)))
        return
    index = BlockingIndex(EdgeIndex(tmp_path_factory.mktemp("filters"), dense_dim=DIM))
    index.ensure_field_indexes(COLLECTION, field_indexes(SCHEMA))
    yield lambda: nullcontext(index)
    index.close()


def _passage(
    prefix: str, number: int, point: tuple[str, str, dict[str, Any], list[int]]
) -> Passage:
    tenant, doc, metadata, vector = point
    norm = math.sqrt(sum(x * x for x in vector))
    return Passage(
        point_id=str(uuid.uuid4()),
        dense=tuple(x / norm for x in vector),
        sparse=SparseVector(indices=(1,), values=(1.0,)),
        payload=PassagePayload(
            tenant_id=prefix + tenant,
            knowledge_base_id="kb",
            org_id="o1",
            document_id=doc,
            document_version="v1",
            passage_index=number,
            classification=Classification.INTERNAL,
            text="x",
            title="x",
            source="x",
            checksum="x",
            indexed_at="2026-01-01T00:00:00Z",
            metadata=metadata or None,
        ),
    )


@settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(points=points_st, document=filters_st)
def test_a_filter_keeps_exactly_the_oracles_points_and_only_narrows(
    engine: Any, points: list[Any], document: dict[str, Any]
) -> None:
    """Counted and searched, a narrowed Scope finds exactly the points the oracle admits,
    all of them inside the Scope without its filter, whatever the filter says."""
    prefix = f"r{next(_run)}-"
    passages = [_passage(prefix, n, point) for n, point in enumerate(points)]
    scope = Scope.of(org_id="o1", tenant_id=prefix + "t1", kb_ids=["kb"])
    narrowed = scope.narrowed(compile_filter(document, SCHEMA))
    expected = {p.point_id for p in passages if narrowed.admits(to_payload(p.payload))}
    assert expected <= {p.point_id for p in passages if scope.admits(to_payload(p.payload))}
    with engine() as index:
        index.upsert(COLLECTION, passages)
        assert index.count(COLLECTION, narrowed) == len(expected)
        leg = Leg(LegKind.DENSE, dense=(1.0, 0.0, 0.0, 0.0), limit=50)
        (found,) = index.query(COLLECTION, narrowed, [leg]).legs
        assert {hit.point_id for hit in found} == expected


@settings(max_examples=200, deadline=None, database=None)
@given(
    name=st.sampled_from(
        ("tenantId", "tenant_id", "orgId", "org_id", "classification", "knowledgeBaseId",
         "validUntil", "fields", "metadata", "pii", "text")
    ),
    wrap=st.sampled_from(("plain", "or", "not", "and")),
)  # fmt: skip
def test_a_filter_naming_a_reserved_key_is_refused_wherever_it_stands(name: str, wrap: str) -> None:
    """A payload contract key is never a filter's field, however deep it is put."""
    leaf: dict[str, Any] = {name: "t2"}
    document = {
        "plain": leaf,
        "or": {"$or": [{"region": "eu"}, leaf]},
        "not": {"$not": {"$not": leaf}},
        "and": {"$and": [{"region": "eu"}, {"$or": [leaf]}]},
    }[wrap]
    with pytest.raises(MetadataError) as refused:
        compile_filter(document, SCHEMA)
    assert refused.value.field == f"filter.{name}"
