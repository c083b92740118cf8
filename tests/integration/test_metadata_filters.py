"""Document fields and a turn's filter in both engines (Qdrant Edge, qdrant-client local
mode): a Scope narrowed by a compiled filter returns exactly what the Python oracle
(`Scope.admits`) admits, never a point outside the Scope however the filter is written,
and the declared fields' payload indexes are made.

Vectors are small and synthetic (8-d): no embedding model.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qdrant_edge import EdgeShard

from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EDGE_DIR, EdgeIndex
from ingest.engines.server.index import ServerIndex
from ingest.index import Leg, LegKind, Passage, SparseVector
from ingest.metadata import (
    MetadataError,
    check_metadata,
    check_schema,
    compile_filter,
    expired_at,
    valid_at,
)
from ingest.payload import (
    IndexKind,
    PassagePayload,
    PayloadKey,
    Scope,
    field_path,
    text_checksum,
    to_payload,
)

DIM = 8
ORG = "acme"
COLLECTION = "kb_org_acme"
_IDS = uuid.UUID("0b9f3c52-2f3e-4f0f-8f40-3c7a3c1e7d11")
SCHEMA = check_schema(
    {
        "region": "string",
        "year": "number",
        "draft": "boolean",
        "published": "datetime",
        "tags": "string_list",
    }
)


def unit(rng: random.Random) -> tuple[float, ...]:
    values = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(v * v for v in values) ** 0.5
    return tuple(v / norm for v in values)


def make_passage(
    tenant: str, doc: str, metadata: dict[str, Any], rng: random.Random, **validity: str
) -> Passage:
    text = f"{tenant} {doc}"
    return Passage(
        point_id=str(uuid.uuid5(_IDS, f"{tenant}|{doc}")),
        dense=unit(rng),
        sparse=SparseVector(indices=(1,), values=(1.0,)),
        payload=PassagePayload(
            tenant_id=tenant,
            knowledge_base_id="kb",
            org_id=ORG,
            document_id=doc,
            document_version="v1",
            passage_index=0,
            classification="internal",
            text=text,
            title=doc,
            source="",
            checksum=text_checksum(text),
            indexed_at="2026-01-01T00:00:00Z",
            metadata=check_metadata(metadata, SCHEMA) if metadata else None,
            **validity,  # type: ignore[arg-type]  # valid_from / valid_until strings
        ),
    )


def world() -> list[Passage]:
    """Two workspaces holding the same document ids with varied fields."""
    rng = random.Random(7)
    passages = []
    for tenant in ("t1", "t2"):
        for number in range(40):
            metadata: dict[str, Any] = {
                "region": ["eu", "us", "apac"][number % 3],
                "year": 2015 + number % 10,
                "draft": number % 4 == 0,
                "published": f"2024-0{1 + number % 9}-15T12:00:00+02:00",
                "tags": [f"t{number % 5}", f"t{number % 7}"],
                "owner": f"{tenant}-owner",  # undeclared: kept, not filterable
            }
            if number % 11 == 0:
                metadata = {}
            validity = {}
            if number % 6 == 1:
                validity["valid_until"] = "2025-06-01T00:00:00Z"
            if number % 6 == 2:
                validity["valid_from"] = "2027-01-01T00:00:00Z"
            passages.append(make_passage(tenant, f"doc{number}", metadata, rng, **validity))
    return passages


@pytest.fixture(params=["edge", "local"], scope="module")
def index(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BlockingIndex]:
    """One engine holding `world()`, shared by the module's tests (they only read)."""
    if request.param == "edge":
        built = BlockingIndex(EdgeIndex(tmp_path_factory.mktemp("edge"), dense_dim=DIM))
    else:
        built = BlockingIndex(ServerIndex.local(None, dense_dim=DIM))
    built.ensure_field_indexes(
        COLLECTION, {field_path(t.index_kind, n): t.index_kind.value for n, t in SCHEMA.items()}
    )
    built.upsert(COLLECTION, world())
    yield built
    built.close()


def _scope(tenant: str = "t1") -> Scope:
    return Scope.of(org_id=ORG, tenant_id=tenant, kb_ids=["kb"])


FILTERS: list[dict[str, Any]] = [
    {"region": "eu"},
    {"region": {"$ne": "eu"}},
    {"region": {"$in": ["us", "apac"]}},
    {"region": {"$nin": ["us"]}},
    {"year": {"$gte": 2018, "$lt": 2021}},
    {"year": 2019},
    {"year": {"$in": [2015, 2024]}},
    {"draft": True},
    {"draft": {"$ne": True}},
    {"published": {"$gt": "2024-04-15T10:00:00Z"}},
    {"published": {"$lte": "2024-03-15"}},
    {"published": "2024-02-15T10:00:00Z"},
    {"tags": "t3"},
    {"tags": {"$in": ["t6", "t0"]}},
    {"tags": {"$nin": ["t1"]}},
    {"region": {"$exists": False}},
    {"year": {"$exists": True}},
    {"$or": [{"region": "eu"}, {"draft": True}]},
    {"$and": [{"region": "eu"}, {"$not": {"year": {"$lt": 2018}}}]},
    {"$not": {"$or": [{"tags": "t2"}, {"region": "us"}]}},
    {"document_id": {"$in": ["doc3", "doc4", "doc5"]}},
]


@pytest.mark.parametrize("document", FILTERS, ids=[str(f) for f in FILTERS])
def test_a_filter_finds_exactly_what_the_oracle_admits(
    index: BlockingIndex, document: dict[str, Any]
) -> None:
    """Each operator, on each type, keeps exactly the points the oracle admits, counted and
    searched, and only the caller's own workspace's."""
    narrowed = _scope().narrowed(compile_filter(document, SCHEMA))
    expected = {p.point_id for p in world() if narrowed.admits(to_payload(p.payload))}
    assert expected, "the filter should keep something of t1's"
    assert index.count(COLLECTION, narrowed) == len(expected)
    leg = Leg(LegKind.DENSE, dense=unit(random.Random(1)), limit=200)
    (found,) = index.query(COLLECTION, narrowed, [leg]).legs
    assert {hit.point_id for hit in found} == expected
    assert all(hit.payload.tenant_id == "t1" for hit in found)


def test_a_filter_naming_another_workspaces_documents_finds_nothing(index: BlockingIndex) -> None:
    """A filter that names only t2's fields and ids, or ORs them in, stays inside t1's
    Scope: it finds t1's own points or nothing, never t2's."""
    t2_only = {"$or": [{"document_id": "doc3"}, {"region": {"$in": ["eu", "us", "apac"]}}]}
    narrowed = _scope().narrowed(compile_filter(t2_only, SCHEMA))
    leg = Leg(LegKind.DENSE, dense=unit(random.Random(2)), limit=500)
    (found,) = index.query(COLLECTION, narrowed, [leg]).legs
    assert found
    assert {hit.payload.tenant_id for hit in found} == {"t1"}
    assert index.count(COLLECTION, narrowed) <= index.count(COLLECTION, _scope())


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"tenantId": "t2"}, "filter.tenantId"),
        ({"$or": [{"tenant_id": "t2"}]}, "filter.tenant_id"),
        ({"org_id": "other"}, "filter.org_id"),
        ({"classification": "restricted"}, "filter.classification"),
        ({"owner": "t2-owner"}, "filter.owner"),
        ({"year": "2019"}, "filter.year"),
        ({"region": {"$gt": "eu"}}, "filter.region.$gt"),
        ({"draft": {"$in": [1]}}, "filter.draft.$in"),
        ({"region": {"$regex": "e.*"}}, "filter.region.$regex"),
        ({"$where": "1"}, "filter.$where"),
        ({}, "filter"),
    ],
)
def test_a_filter_breaking_the_grammar_names_the_field(document: Any, field: str) -> None:
    """Reserved names, undeclared fields, wrong types and unknown operators are refused,
    naming the field."""
    with pytest.raises(MetadataError) as refused:
        compile_filter(document, SCHEMA)
    assert refused.value.field == field


def test_deep_or_wide_filters_are_bounded() -> None:
    """Nesting and size have bounds: a filter past them is refused, not run."""
    deep: dict[str, Any] = {"region": "eu"}
    for _ in range(10):
        deep = {"$or": [deep]}
    with pytest.raises(MetadataError, match="deeper"):
        compile_filter(deep, SCHEMA)
    wide = {"$or": [{"year": n} for n in range(65)]}
    with pytest.raises(MetadataError):
        compile_filter(wide, SCHEMA)
    with pytest.raises(MetadataError):
        compile_filter({"region": {"$in": [str(n) for n in range(101)]}}, SCHEMA)


def test_validity_keeps_documents_in_force_and_counts_the_expired(index: BlockingIndex) -> None:
    """Documents whose `valid_until` passed, or whose `valid_from` has not come, do not
    answer; the expired ones can be counted."""
    now = "2026-06-01T00:00:00Z"
    in_force = _scope().narrowed(valid_at(now))
    expected = {p.point_id for p in world() if in_force.admits(to_payload(p.payload))}
    assert index.count(COLLECTION, in_force) == len(expected) == 40 - 7 - 7
    assert index.count(COLLECTION, _scope().narrowed(expired_at(now))) == 7
    earlier = _scope().narrowed(valid_at("2025-01-01T00:00:00Z"))
    assert index.count(COLLECTION, earlier) == 40 - 7


def test_declared_fields_get_payload_indexes_on_edge(tmp_path: Path) -> None:
    """Each declared field's path gets an index of its kind; the validity and language
    keys get theirs when the collection is made."""
    edge = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    fields = {field_path(t.index_kind, n): t.index_kind.value for n, t in SCHEMA.items()}
    assert edge.ensure_field_indexes(COLLECTION, fields) == len(
        {field_path(t.index_kind, n) for n, t in SCHEMA.items()}
    )
    assert edge.ensure_field_indexes(COLLECTION, fields) == 0
    edge.close()
    shard = EdgeShard.load(str(tmp_path / EDGE_DIR / COLLECTION))
    try:
        schema = shard.info().payload_schema
    finally:
        shard.close()
    for path in [*fields, PayloadKey.VALID_FROM, PayloadKey.VALID_UNTIL, PayloadKey.LANGUAGE]:
        assert path in schema
    assert field_path(IndexKind.DATETIME, "published") in schema


def test_undeclared_and_declared_fields_are_returned_as_stored(index: BlockingIndex) -> None:
    """A passage's fields come back with it: declared datetimes normalized to UTC,
    undeclared fields as given."""
    (found,) = index.query(
        COLLECTION,
        _scope().narrowed(compile_filter({"document_id": "doc1"}, SCHEMA)),
        [Leg(LegKind.DENSE, dense=unit(random.Random(3)), limit=5)],
    ).legs
    (hit,) = found
    assert hit.payload.metadata is not None
    assert hit.payload.metadata["published"] == "2024-02-15T10:00:00Z"
    assert hit.payload.metadata["owner"] == "t1-owner"


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"year": 2**60}, "metadata.year"),
        ({"published": "9999-12-31T23:59:59-01:00"}, "metadata.published"),
        ({"published": "2024-02-30"}, "metadata.published"),
        ({"tags": ["x" * 1025]}, "metadata.tags"),
        ({"fields": "x"}, "metadata.fields"),
    ],
)
def test_values_past_a_bound_are_refused_naming_the_field(
    metadata: dict[str, Any], field: str
) -> None:
    """Numbers beyond exact floats, moments past the calendar's ends in UTC, impossible
    dates, oversized strings and reserved names are refused, naming the field."""
    with pytest.raises(MetadataError) as refused:
        check_metadata(metadata, SCHEMA)
    assert refused.value.field == field
