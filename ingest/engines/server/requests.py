"""What the server adapter sends through qdrant-client, and the failures it maps.

Search parameters, payload-index settings and request builders of
`ingest.engines.server.index.ServerIndex`, and `engine_errors`, which turns a server's outage
into `IndexUnavailableError`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager

import grpc  # type: ignore[import-untyped]  # grpcio ships no type hints
import httpx
from qdrant_client import models
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from ingest.engines.common import ACORN_MAX_SELECTIVITY, DENSE_EF, GRAPH_M, sparse_values
from ingest.index import IndexUnavailableError, SparseVector
from ingest.payload import (
    ON_DISK_KEY,
    TENANT_KEY,
    AllOf,
    AnyOf,
    HasValue,
    IndexKind,
    InRange,
    IsAnyOf,
    Missing,
    Narrowing,
    NoneOf,
    PayloadKey,
)

#: Per-scope IDF (`SearchParams.idf.corpus`) arrived in Qdrant 1.19.
MIN_SERVER_VERSION = (1, 19, 0)
FILTERED_DENSE = models.SearchParams(
    hnsw_ef=DENSE_EF,
    acorn=models.AcornSearchParams(enable=True, max_selectivity=ACORN_MAX_SELECTIVITY),
)
#: A weak dense answer's second search (`weak_dense_legs`).
EXACT = models.SearchParams(exact=True)
#: One graph per tenant, none over the whole collection, as on Qdrant Edge
#: (`ingest.engines.edge.shards._graphs`): every search carries its tenant.
GRAPHS = models.HnswConfigDiff(m=0, payload_m=GRAPH_M)
_SERVER_ERROR = 500
_GRPC_UNAVAILABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


@contextmanager
def engine_errors(collection: str) -> Iterator[None]:
    """Connection failures, timeouts and server-side trouble become `IndexUnavailableError`."""
    try:
        yield
    except UnexpectedResponse as exc:
        if exc.status_code is None or exc.status_code < _SERVER_ERROR:
            raise
        raise IndexUnavailableError(f"Qdrant failed on {collection!r}: {exc}") from exc
    except grpc.RpcError as exc:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        if code not in _GRPC_UNAVAILABLE:
            raise
        raise IndexUnavailableError(f"Qdrant unreachable on {collection!r}: {exc}") from exc
    except (
        ResponseHandlingException,
        ResourceExhaustedResponse,
        httpx.TransportError,
        ConnectionError,
        TimeoutError,
    ) as exc:
        raise IndexUnavailableError(f"Qdrant unreachable on {collection!r}: {exc}") from exc


def parse_version(version: str) -> tuple[int, ...]:
    """(1, 20, 0) from "1.20.0", "v1.20" or "1.20.0-rc1"; (0, 0, 0) when no number leads."""
    numbers: list[int] = []
    for part in version.strip().removeprefix("v").split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers + [0] * (3 - len(numbers)))


def keyword_index(key: str) -> models.KeywordIndexParams:
    """The tenant key groups each tenant's points and carries the graph links; the Scope's
    other keys only filter. The document key stays on disk: only a document's own
    operations filter on it, never a search (as on Qdrant Edge)."""
    tenant = key == TENANT_KEY
    return models.KeywordIndexParams(
        type=models.KeywordIndexType.KEYWORD,
        is_tenant=tenant,
        enable_hnsw=tenant,
        on_disk=key == ON_DISK_KEY,
    )


def index_as_wanted(info: models.PayloadIndexInfo | None, key: str) -> bool:
    """Whether the collection's index of `key` is `keyword_index(key)` (the server builds
    graph links for an index's values unless told not to)."""
    params = None if info is None else info.params
    wanted = keyword_index(key)
    return (
        isinstance(params, models.KeywordIndexParams)
        and bool(params.is_tenant) is wanted.is_tenant
        and (params.enable_hnsw is not False) is wanted.enable_hnsw
        and bool(params.on_disk) is wanted.on_disk
    )


def narrowing_condition(node: Narrowing) -> models.Condition:
    """A Scope's narrowing as a qdrant-client condition; `_scope_filter` AND-s it with the
    Scope's own conditions."""
    match node:
        case AllOf(parts):
            return models.Filter(must=[narrowing_condition(part) for part in parts])
        case AnyOf(parts):
            return models.Filter(should=[narrowing_condition(part) for part in parts])
        case NoneOf(parts):
            return models.Filter(must_not=[narrowing_condition(part) for part in parts])
    return _field_test(node)


def _field_test(node: Narrowing) -> models.Condition:
    match node:
        case HasValue(path):
            empty = models.IsEmptyCondition(is_empty=models.PayloadField(key=path))
            return models.Filter(must_not=[empty])
        case Missing(path):
            return models.IsEmptyCondition(is_empty=models.PayloadField(key=path))
        case IsAnyOf(path, values):
            return models.FieldCondition(key=path, match=models.MatchAny(any=list(values)))
        case InRange(path, gt, gte, lt, lte, dates):
            if dates:
                moments = models.DatetimeRange(gt=gt, gte=gte, lt=lt, lte=lte)  # type: ignore[arg-type]  # normalized RFC 3339 strings, which the model parses
                return models.FieldCondition(key=path, range=moments)
            numbers = models.Range(
                gt=_number(gt), gte=_number(gte), lt=_number(lt), lte=_number(lte)
            )
            return models.FieldCondition(key=path, range=numbers)
    raise ValueError(f"not a narrowing: {node!r}")  # pragma: no cover - every kind above


def _number(value: float | str | None) -> float | None:
    return None if value is None else float(value)


def field_index(kind: IndexKind | str) -> models.PayloadSchemaParams:
    """The index of a filtered field of this kind: no graph links (only the tenant key
    has them), as on Qdrant Edge; booleans are stored as keywords (`boolean_keyword`)."""
    match IndexKind(kind):
        case IndexKind.KEYWORD | IndexKind.BOOLEAN:
            return models.KeywordIndexParams(
                type=models.KeywordIndexType.KEYWORD, is_tenant=False, enable_hnsw=False
            )
        case IndexKind.NUMBER:
            return models.FloatIndexParams(type=models.FloatIndexType.FLOAT, enable_hnsw=False)
    return models.DatetimeIndexParams(type=models.DatetimeIndexType.DATETIME, enable_hnsw=False)


def field_index_as_wanted(info: models.PayloadIndexInfo | None, kind: str) -> bool:
    """Whether the collection's index of a filtered field is of its kind."""
    return info is not None and isinstance(info.params, type(field_index(kind)))


def match(key: PayloadKey, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def sparse(vector: SparseVector) -> models.SparseVector:
    indices, values = sparse_values(vector)
    return models.SparseVector(indices=indices, values=values)


def term_request(
    name: str,
    term: int,
    where: models.Filter,
    *,
    limit: int,
    vector: bool,
    params: models.SearchParams | None = None,
) -> models.QueryRequest:
    """A search of sparse vector `name` for one term (weight 1), reading no payload and,
    when `vector`, each point's vector `name`."""
    return models.QueryRequest(
        query=models.NearestQuery(nearest=models.SparseVector(indices=[term], values=[1.0])),
        using=name,
        filter=where,
        params=params,
        limit=limit,
        with_vector=[name] if vector else False,
        with_payload=False,
    )
