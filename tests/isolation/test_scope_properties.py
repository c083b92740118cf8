"""Properties of the Scope -> filter translation, on Qdrant Edge, qdrant-client local mode
and (where Docker runs) a Qdrant server.

Checked here:

- no Scope can be built without a tenant and a knowledge base, whatever the input;
- each adapter builds engine filters in exactly one function, and never reads or
  deletes without one (a structural check of the source);
- queries with several legs of both kinds, with limits and floors, agree with an
  exact-search oracle over the admitted points (dense: the cosine top-k);
- points outside a scope never change what the scope sees, BM25 scores included
  (per-scope IDF);
- `scroll_document`, `count` of one document, `delete_document`, `delete_points` and
  `backfill_org` touch exactly the points the scope admits.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import math
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, closing, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ingest.engines.edge.engine
import ingest.engines.server.index
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.engines.server.index import ServerIndex
from ingest.index import Hit, Leg, LegKind, Passage, SparseVector, org_collection
from ingest.payload import (
    Classification,
    PassagePayload,
    Scope,
    ScopeError,
    to_payload,
)
from tests.isolation.conftest import QDRANT_IMAGE
from tests.support.services import require_docker

DIM = 4
TENANTS = ("t1", "t2")
KBS = ("kb1", "kb2", "kb3")
ORGS = ("o1", "o2", None)
DOCS = ("d1", "d2")
VOCABULARY = (1, 2, 3, 4, 5, 6)
COLLECTION = org_collection("props")
TOLERANCE = 1e-4
_run = itertools.count()

# ---- construction --------------------------------------------------------------------

_junk = st.one_of(
    st.none(),
    st.just(""),
    st.text(max_size=3),
    st.integers(-2, 2),
    st.binary(max_size=2),
    st.lists(st.text(max_size=2), max_size=2),
)
_kb_sets = st.one_of(
    st.none(),
    st.just(frozenset()),
    st.frozensets(st.one_of(st.just(""), st.text(max_size=3), st.integers(0, 3)), max_size=3),
    st.sets(st.text(min_size=1, max_size=3), max_size=2),
    st.lists(st.text(max_size=3), max_size=2),
    st.text(max_size=3),
)


def _well_formed(scope: Any) -> bool:
    """Checked at run time: a Scope built from bad input may hold anything."""
    return (
        isinstance(scope.tenant_id, str)
        and bool(scope.tenant_id)
        and isinstance(scope.kb_ids, frozenset)
        and bool(scope.kb_ids)
        and all(isinstance(kb, str) and kb for kb in scope.kb_ids)
        and isinstance(scope.clearance, Classification)
        and (not scope.strict or (isinstance(scope.org_id, str) and bool(scope.org_id)))
    )


@settings(max_examples=300, deadline=None, database=None)
@given(
    org=_junk,
    tenant=_junk,
    kbs=_kb_sets,
    clearance=st.sampled_from(tuple(Classification)),
    strict=st.booleans(),
)
def test_no_scope_without_a_tenant_and_a_knowledge_base(
    org: Any, tenant: Any, kbs: Any, clearance: Classification, strict: bool
) -> None:
    """Whatever is passed in — None, empty strings, numbers, bytes, lists, empty or odd KB
    sets — a Scope either refuses to exist or names a tenant, at least one KB (all non-empty
    strings) and, when strict, an organization. Neither constructor nor `replace` slips by."""
    makers: list[Callable[[], Scope]] = [
        lambda: Scope(org, tenant, kbs, clearance, strict),
        lambda: Scope.of(
            org_id=org, tenant_id=tenant, kb_ids=kbs, clearance=clearance, strict=strict
        ),
    ]
    built: list[Scope] = []
    for make in makers:
        try:
            built.append(make())
        except (ScopeError, TypeError, ValueError):
            continue
    breakages: list[dict[str, Any]] = [
        {"tenant_id": ""},
        {"kb_ids": frozenset()},
        {"kb_ids": frozenset({""})},
    ]
    for scope in built:
        assert _well_formed(scope)
        for broken in breakages:
            with pytest.raises(ScopeError):
                dataclasses.replace(scope, **broken)


# ---- structure: one filter builder, no unscoped engine call --------------------------

_ENGINE_CALLS = {
    "CountRequest",
    "ScrollRequest",
    "FacetRequest",
    "QueryRequest",
    "delete_points_by_filter",
    "set_payload_by_filter",
    "count",
    "scroll",
    "facet",
    "delete",
    "set_payload",
    "_delete",
}


_Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _is_scope_filter(node: ast.AST, builders: frozenset[str] = frozenset()) -> bool:
    """A call of `_scope_filter`, or of a function that returns nothing else (`builders`)."""
    return isinstance(node, ast.Call) and _called(node) in {"_scope_filter", *builders}


def _scope_filter_builders(tree: ast.AST) -> frozenset[str]:
    """Functions every `return` of which hands back a `_scope_filter(...)` call: what they
    return is a Scope's filter too."""
    builders = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or fn.name == "_scope_filter":
            continue
        returns = [node for node in ast.walk(fn) if isinstance(node, ast.Return)]
        if returns and all(r.value is not None and _is_scope_filter(r.value) for r in returns):
            builders.add(fn.name)
    return frozenset(builders)


def _parameters(fn: _Function) -> list[ast.arg]:
    args = fn.args
    rest = [arg for arg in (args.vararg, args.kwarg) if arg is not None]
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *rest]


def _bound_to_scope_filters(fn: _Function, builders: frozenset[str]) -> set[str]:
    """The names `fn` binds only to a Scope's filter, whatever they are called: parameters
    typed as a filter (only `_scope_filter` builds one) and names assigned nothing but
    `_scope_filter(...)`."""
    typed = {
        arg.arg
        for arg in _parameters(fn)
        if arg.annotation is not None and ast.unparse(arg.annotation).rsplit(".", 1)[-1] == "Filter"
    }
    from_filter: set[str] = set()
    from_other: set[str] = set()
    body = fn.body if isinstance(fn.body, list) else [fn.body]
    for node in (node for statement in body for node in ast.walk(statement)):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {target.id for target in targets if isinstance(target, ast.Name)}
            scoped = node.value is not None and _is_scope_filter(node.value, builders)
            (from_filter if scoped else from_other).update(names)
    return (typed | from_filter) - from_other


def _unscoped_engine_calls(tree: ast.AST) -> list[str]:
    """Engine calls handed no Scope filter: neither a `_scope_filter(...)` call (or a call of
    a function that returns only such calls) nor a name bound to one (in the calling
    function or one enclosing it)."""
    unscoped: list[str] = []
    builders = _scope_filter_builders(tree)

    def visit(node: ast.AST, scoped: frozenset[str]) -> None:
        if isinstance(node, _Function):
            shadowed = {arg.arg for arg in _parameters(node)}
            scoped = (scoped - shadowed) | _bound_to_scope_filters(node, builders)
        if isinstance(node, ast.Call) and _called(node) in _ENGINE_CALLS:
            inside = list(ast.walk(node))
            if not any(
                _is_scope_filter(n, builders) or (isinstance(n, ast.Name) and n.id in scoped)
                for n in inside
            ):
                unscoped.append(ast.unparse(node))
        for child in ast.iter_child_nodes(node):
            visit(child, scoped)

    visit(tree, frozenset())
    return unscoped


@pytest.mark.parametrize("module", [ingest.engines.edge.engine, ingest.engines.server.index])
def test_each_adapter_builds_filters_in_one_function_and_always_uses_one(module: Any) -> None:
    """In each adapter, engine filters are constructed only inside `_scope_filter` (no
    other filter exists, not even an IDF corpus: keyword scores and the search's work
    never depend on points outside the Scope), and every engine read, count, facet,
    delete and payload update is handed a filter that came from `_scope_filter`, however
    the variable holding it is named (there is no unscoped call)."""
    tree = ast.parse(inspect.getsource(module))
    functions = [
        fn for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    builders = [
        fn.name
        for fn in functions
        if any(isinstance(c, ast.Call) and _called(c) == "Filter" for c in ast.walk(fn))
    ]
    assert builders == ["_scope_filter"]
    assert _unscoped_engine_calls(tree) == []


def test_the_unscoped_call_check_follows_values_not_names() -> None:
    """The structural check above flags an engine call whose filter came from anywhere but
    `_scope_filter` (or that has none), and accepts one whose filter did, whatever its
    variable is called, in the function or a closure inside it, or through a helper every
    return of which is a `_scope_filter(...)` call (one other return, and it is flagged)."""
    source = """
def scoped(shard, scope):
    chosen = _scope_filter(scope)
    def page(offset):
        return shard.scroll(ScrollRequest(offset=offset, filter=chosen))
    return shard.count(CountRequest(filter=chosen)), page


def forged(shard, scope):
    where = _scope_filter(scope)
    where = make_filter()
    return shard.count(CountRequest(filter=where))


def bare(shard):
    return shard.facet(FacetRequest(key="documentId"))


def narrowed(scope, ids):
    if ids:
        return _scope_filter(scope, HasIdCondition(ids))
    return _scope_filter(scope)


def leaky(scope, ids):
    if ids:
        return _scope_filter(scope, HasIdCondition(ids))
    return make_filter()


def through_helpers(shard, scope):
    shard.count(CountRequest(filter=narrowed(scope, [1])))
    return shard.count(CountRequest(filter=leaky(scope, [])))
"""
    assert _unscoped_engine_calls(ast.parse(source)) == [
        "shard.count(CountRequest(filter=where))",
        "CountRequest(filter=where)",
        "shard.facet(FacetRequest(key='documentId'))",
        "FacetRequest(key='documentId')",
        "shard.count(CountRequest(filter=leaky(scope, [])))",
        "CountRequest(filter=leaky(scope, []))",
    ]


def test_the_index_port_takes_scopes_never_raw_filters() -> None:
    """Every read, count, delete and update of the Index port and both adapters takes a
    Scope, and no method takes anything named like a filter."""
    from ingest.index import Index as Port

    for cls in (Port, EdgeIndex, ServerIndex):
        for name in (
            "query",
            "count",
            "scroll_document",
            "document_ids",
            "delete_points",
            "delete_document",
            "backfill_org",
        ):
            parameters = inspect.signature(getattr(cls, name)).parameters
            assert "scope" in parameters, f"{cls.__name__}.{name}"
            assert str(parameters["scope"].annotation) in {"Scope", "ingest.payload.Scope"}
        for name, member in inspect.getmembers(cls, inspect.isfunction):
            if not name.startswith("_"):
                assert not {"filter", "where", "conditions"} & set(
                    inspect.signature(member).parameters
                ), f"{cls.__name__}.{name}"


# ---- engines ---------------------------------------------------------------------------

Engine = Callable[[], AbstractContextManager[BlockingIndex]]


@pytest.fixture(scope="module", params=["edge", "local", "server"])
def engine(request: pytest.FixtureRequest, fast_root: Path) -> Iterator[Engine]:
    """An index per example: a fresh local-mode client (its pure-Python filters slow down
    with every point), or one Edge shard / server collection where earlier examples' points
    are noise under other tenant ids."""
    if request.param == "local":
        yield lambda: closing(BlockingIndex(ServerIndex.local(None, dense_dim=DIM)))
        return
    if request.param == "edge":
        index = BlockingIndex(EdgeIndex(fast_root / f"props-{uuid.uuid4().hex[:8]}", dense_dim=DIM))
        index.ensure_collection(COLLECTION)
        yield lambda: nullcontext(index)
        index.close()
        return
    require_docker()
    from testcontainers.community.qdrant import QdrantContainer

    with QdrantContainer(image=QDRANT_IMAGE) as container:
        server = BlockingIndex.opening(
            lambda: ServerIndex.connect(f"http://{container.rest_host_address}", None, 10.0, DIM)
        )
        server.ensure_collection(COLLECTION)
        yield lambda: nullcontext(server)
        server.close()


@dataclass(frozen=True)
class Point:
    tenant: str
    kb: str
    org: str | None
    label: Classification
    doc: str
    dense: tuple[float, ...]
    terms: tuple[int, ...]


_unit = st.lists(st.integers(-4, 4), min_size=DIM, max_size=DIM).filter(any)
points_st = st.lists(
    st.builds(
        Point,
        tenant=st.sampled_from(TENANTS),
        kb=st.sampled_from(KBS),
        org=st.sampled_from(ORGS),
        label=st.sampled_from(tuple(Classification)),
        doc=st.sampled_from(DOCS),
        dense=_unit.map(lambda v: tuple(float(x) for x in v)),
        terms=st.sets(st.sampled_from(VOCABULARY), min_size=1, max_size=3).map(
            lambda s: tuple(sorted(s))
        ),
    ),
    min_size=1,
    max_size=20,
)
scopes_st = st.builds(
    Scope.of,
    org_id=st.sampled_from(("o1", "o2")),
    tenant_id=st.sampled_from(TENANTS),
    kb_ids=st.frozensets(st.sampled_from(KBS), min_size=1),
    clearance=st.sampled_from(tuple(Classification)),
    strict=st.booleans(),
)
dense_legs = st.builds(
    lambda v, limit, floor: Leg(
        LegKind.DENSE, dense=tuple(float(x) for x in v), limit=limit, floor=floor
    ),
    _unit,
    st.integers(1, 25),
    st.one_of(st.none(), st.sampled_from((-0.5, 0.0, 0.3, 0.6, 0.9))),
)
# Passage and whole-document keyword legs (every point here carries both vectors alike).
keyword_legs = st.builds(
    lambda kind, terms, limit: Leg(
        kind,
        sparse=SparseVector(indices=tuple(sorted(terms)), values=tuple(1.0 for _ in terms)),
        limit=limit,
    ),
    st.sampled_from((LegKind.KEYWORD, LegKind.DOCUMENT_KEYWORD)),
    st.sets(st.sampled_from(VOCABULARY), min_size=1, max_size=3),
    st.integers(1, 25),
)
legs_st = st.tuples(
    st.lists(dense_legs, min_size=1, max_size=3), st.lists(keyword_legs, min_size=1, max_size=3)
).flatmap(lambda pair: st.permutations([*pair[0], *pair[1]]))


def _passage(point: Point, prefix: str, n: int) -> Passage:
    norm = math.sqrt(sum(x * x for x in point.dense))
    terms = SparseVector(indices=point.terms, values=tuple(1.0 for _ in point.terms))
    return Passage(
        point_id=str(uuid.uuid4()),
        dense=tuple(x / norm for x in point.dense),
        sparse=terms,
        document_sparse=terms,
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


def _prefixed(scope: Scope, prefix: str, **changes: Any) -> Scope:
    values = {
        "org_id": scope.org_id,
        "tenant_id": prefix + scope.tenant_id,
        "kb_ids": scope.kb_ids,
        "clearance": scope.clearance,
        "strict": scope.strict,
        **changes,
    }
    return Scope.of(**values)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


def _admitted(scope: Scope, passages: Sequence[Passage]) -> list[Passage]:
    return [p for p in passages if scope.admits(to_payload(p.payload))]


def _check_dense(leg: Leg, hits: Sequence[Hit], admitted: Sequence[Passage]) -> None:
    assert leg.dense is not None
    by_id = {p.point_id: p for p in admitted}
    for hit in hits:
        assert hit.point_id in by_id, "a hit outside the scope"
        assert hit.score == pytest.approx(
            _cosine(leg.dense, by_id[hit.point_id].dense), abs=TOLERANCE
        )
    scores = sorted((_cosine(leg.dense, p.dense) for p in admitted), reverse=True)
    floor = -math.inf if leg.floor is None else leg.floor
    at_least = [s for s in scores if s >= floor + TOLERANCE][: leg.limit]
    at_most = [s for s in scores if s >= floor - TOLERANCE][: leg.limit]
    assert len(at_least) <= len(hits) <= len(at_most)
    got = sorted((h.score for h in hits), reverse=True)
    assert got == pytest.approx(at_most[: len(got)], abs=TOLERANCE), "not the exact top-k"


def _check_keyword(leg: Leg, hits: Sequence[Hit], admitted: Sequence[Passage]) -> None:
    assert leg.sparse is not None
    query = set(leg.sparse.indices)
    matching = {p.point_id for p in admitted if query & set(p.sparse.indices)}
    got = {h.point_id for h in hits}
    assert got <= matching, "a keyword hit outside the scope or without a shared term"
    assert len(got) == min(leg.limit, len(matching))
    assert all(h.score > 0 for h in hits)


@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(points=points_st, scope=scopes_st, legs=legs_st)
def test_mixed_legs_agree_with_an_exact_search_oracle(
    engine: Engine, points: list[Point], scope: Scope, legs: list[Leg]
) -> None:
    """One query with several dense and keyword legs (limits, floors): every hit is
    admitted by the scope; each dense leg is exactly the cosine top-`limit` of the admitted
    points above its floor; each keyword leg (passage or whole-document) returns `limit`
    admitted points sharing a term with the query (or all of them). `rank` returns only
    admitted points, and `fetch` of every point id reads exactly the admitted ones."""
    prefix = f"m{next(_run)}-"
    passages = [_passage(point, prefix, n) for n, point in enumerate(points)]
    scope = _prefixed(scope, prefix)
    admitted = _admitted(scope, passages)
    with engine() as index:
        index.upsert(COLLECTION, passages)
        result = index.query(COLLECTION, scope, legs)
        ranked = index.rank(COLLECTION, scope, legs)
        fetched = index.fetch(COLLECTION, scope, [p.point_id for p in passages])
    assert len(result.legs) == len(legs)
    for leg, hits in zip(legs, result.legs, strict=True):
        assert all(scope.admits(to_payload(h.payload)) for h in hits)
        if leg.kind is LegKind.DENSE:
            _check_dense(leg, hits, admitted)
        else:
            _check_keyword(leg, hits, admitted)
    admitted_ids = {p.point_id for p in admitted}
    for ranked_leg in ranked.legs:
        assert {r.point_id for r in ranked_leg} <= admitted_ids, "a ranked point outside the scope"
    assert set(fetched) == admitted_ids, "fetch read a point outside the scope, or missed one"


@pytest.fixture(scope="module")
def indexed_edge(fast_root: Path) -> Iterator[BlockingIndex]:
    """One Edge shard that indexes (HNSW graph, compact sparse indexes) from 1 KB of vectors
    and searches through the graph under the filter; earlier examples' points are noise."""
    index = BlockingIndex(
        EdgeIndex(
            fast_root / f"indexed-{uuid.uuid4().hex[:8]}", dense_dim=DIM, indexing_threshold_kb=1
        )
    )
    index.ensure_collection(COLLECTION)
    yield index
    index.close()


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(points=points_st, scope=scopes_st, legs=legs_st)
def test_an_indexed_collection_answers_only_inside_the_scope(
    indexed_edge: BlockingIndex, points: list[Point], scope: Scope, legs: list[Leg]
) -> None:
    """Once `optimize` has built the graph that searches walk under the Scope filter, every
    leg of `query` and `rank` returns only admitted points, each keyword hit shares a term
    with its leg, a dense leg asking for an admitted point's own vector finds it first,
    and `fetch` reads exactly the admitted points. (The graph is approximate, so the exact
    top-k of the oracle above is not asked of it.)"""
    prefix = f"i{next(_run)}-"
    passages = [_passage(point, prefix, n) for n, point in enumerate(points)]
    scope = _prefixed(scope, prefix)
    admitted = _admitted(scope, passages)
    admitted_ids = {p.point_id for p in admitted}
    # Noise under a tenant no scope names takes the example past the 1 KB threshold, so
    # that its own points are in the graph the searches walk.
    noise = [
        _passage(dataclasses.replace(points[n % len(points)], tenant="noise"), prefix, n)
        for n in range(80)
    ]
    indexed_edge.upsert(COLLECTION, [*passages, *noise])
    assert indexed_edge.optimize() == [COLLECTION]
    result = indexed_edge.query(COLLECTION, scope, legs)
    ranked = indexed_edge.rank(COLLECTION, scope, legs)
    for leg, hits in zip(legs, result.legs, strict=True):
        assert {h.point_id for h in hits} <= admitted_ids, "a hit outside the scope"
        if leg.kind is not LegKind.DENSE:
            _check_keyword(leg, hits, admitted)
    for ranked_leg in ranked.legs:
        assert {r.point_id for r in ranked_leg} <= admitted_ids, "a ranked point outside the scope"
    for target in admitted[:3]:
        [own] = indexed_edge.query(
            COLLECTION, scope, [Leg(LegKind.DENSE, dense=target.dense, limit=1)]
        ).legs
        assert own
        assert own[0].score == pytest.approx(1.0, abs=TOLERANCE)
    fetched = indexed_edge.fetch(COLLECTION, scope, [p.point_id for p in passages])
    assert set(fetched) == admitted_ids, "fetch read a point outside the scope, or missed one"


def _ranked(hits: Sequence[Hit]) -> tuple[list[float], set[str]]:
    """A leg's scores, and the ids of the hits strictly above its last score (the hits at
    the cut may tie with points left out, and ties may break either way)."""
    scores = sorted((round(h.score, 5) for h in hits), reverse=True)
    cut = scores[-1] if scores else math.inf
    return scores, {h.point_id for h in hits if round(h.score, 5) > cut}


def _snapshot(index: BlockingIndex, scope: Scope, legs: Sequence[Leg]) -> Any:
    result = index.query(COLLECTION, scope, legs)
    assert all(scope.admits(to_payload(h.payload)) for hits in result.legs for h in hits)
    return (
        [_ranked(hits) for hits in result.legs],
        index.count(COLLECTION, scope),
        sorted(index.document_ids(COLLECTION, scope)),
        [[p.point_id for p in index.scroll_document(COLLECTION, scope, doc)] for doc in DOCS],
    )


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(points=points_st, noise=points_st, scope=scopes_st, legs=legs_st)
def test_points_outside_a_scope_never_change_what_it_sees(
    engine: Engine, points: list[Point], noise: list[Point], scope: Scope, legs: list[Leg]
) -> None:
    """`count` and `document_ids` admit exactly what `Scope.admits` admits, and writing
    points the scope does not admit (other tenants, KBs, labels, orgs; same document ids
    and terms) changes nothing the scope sees: the same hits with the same
    scores on every leg (BM25's IDF included), the same counts, documents and scrolls."""
    prefix = f"n{next(_run)}-"
    scope = _prefixed(scope, prefix)
    passages = [_passage(point, prefix, n) for n, point in enumerate(points)]
    outside = [
        p
        for p in (_passage(point, prefix, 100 + n) for n, point in enumerate(noise))
        if not scope.admits(to_payload(p.payload))
    ]
    assume(outside)
    with engine() as index:
        index.upsert(COLLECTION, passages)
        before = _snapshot(index, scope, legs)
        admitted = [p.payload for p in passages if scope.admits(to_payload(p.payload))]
        assert before[1] == len(admitted)
        assert before[2] == sorted({payload.document_id for payload in admitted})
        index.upsert(COLLECTION, outside)
        after = _snapshot(index, scope, legs)
    assert after == before


def _everything(index: BlockingIndex, prefix: str) -> dict[str, PassagePayload]:
    """Every point of this example, read back through wide (non-strict) scopes."""
    found: dict[str, PassagePayload] = {}
    for tenant, doc in itertools.product(TENANTS, DOCS):
        wide = Scope.of(
            org_id="any",
            tenant_id=prefix + tenant,
            kb_ids=KBS,
            clearance=Classification.RESTRICTED,
            strict=False,
        )
        found.update({p.point_id: p.payload for p in index.scroll_document(COLLECTION, wide, doc)})
    return found


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    points=points_st,
    scope=scopes_st,
    doc=st.sampled_from(DOCS),
    picks=st.lists(st.integers(0, 19), max_size=8),
    backfill=scopes_st,
)
def test_scroll_count_delete_and_backfill_touch_exactly_the_scope(
    engine: Engine,
    *,
    points: list[Point],
    scope: Scope,
    doc: str,
    picks: list[int],
    backfill: Scope,
) -> None:
    """`scroll_document` and `count` of a document return exactly its admitted points (in
    passage order); `delete_points` with ids from anywhere deletes only admitted ones;
    `delete_document` deletes exactly the admitted points of that document and nothing
    else; `backfill_org` sets orgId only on admitted points that lacked one."""
    prefix = f"s{next(_run)}-"
    scope = _prefixed(scope, prefix)
    passages = [_passage(point, prefix, n) for n, point in enumerate(points)]
    admitted = _admitted(scope, passages)
    of_doc = [p.point_id for p in admitted if p.payload.document_id == doc]
    with engine() as index:
        index.upsert(COLLECTION, passages)
        assert [p.point_id for p in index.scroll_document(COLLECTION, scope, doc)] == of_doc
        assert index.count(COLLECTION, scope, doc) == len(of_doc)

        chosen = {passages[i % len(passages)].point_id for i in picks}
        hit = chosen & {p.point_id for p in admitted}
        assert index.delete_points(COLLECTION, scope, sorted(chosen)) == len(hit)
        assert set(_everything(index, prefix)) == {p.point_id for p in passages} - hit

        remaining = [p for p in of_doc if p not in hit]
        assert index.delete_document(COLLECTION, scope, doc) == len(remaining)
        gone = hit | set(remaining)
        left = {p.point_id: p for p in passages if p.point_id not in gone}
        assert set(_everything(index, prefix)) == set(left)

        wide = _prefixed(backfill, prefix, strict=False)
        legacy = {
            pid
            for pid, p in left.items()
            if p.payload.org_id is None and wide.admits(to_payload(p.payload))
        }
        assert index.backfill_org(COLLECTION, wide) == len(legacy)
        stored = _everything(index, prefix)
        for pid, passage in left.items():
            expected = wide.org_id if pid in legacy else passage.payload.org_id
            assert stored[pid].org_id == expected
