"""Fault injection, for tests only: scope filters with one clause missing.

Each adapter builds its engine filter from a Scope in exactly one function,
`_scope_filter`. `break_scope_filters` swaps both for a copy that leaves out one clause
(`tenant`, `kb`, `clearance` or `org`), so a test can show that the isolation suite
notices. Nothing here is reachable from product code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from qdrant_client import models
from qdrant_edge import FieldCondition, Filter, MatchAny, MatchValue

import ingest.engines.edge.engine
import ingest.engines.server.index
from ingest.payload import PayloadKey, Scope

CLAUSES = ("tenant", "kb", "clearance", "org")


def _clauses(scope: Scope, drop: str) -> list[tuple[PayloadKey, str | list[str]]]:
    wanted: list[tuple[str, PayloadKey, str | list[str]]] = [
        ("tenant", PayloadKey.TENANT_ID, scope.tenant_id),
        ("kb", PayloadKey.KNOWLEDGE_BASE_ID, sorted(scope.kb_ids)),
        ("clearance", PayloadKey.CLASSIFICATION, list(scope.labels)),
    ]
    if scope.strict:
        wanted.append(("org", PayloadKey.ORG_ID, scope.org_id))
    return [(key, value) for name, key, value in wanted if name != drop]


def broken_edge_filter(drop: str) -> Callable[..., Filter]:
    """`ingest.engines.edge.engine._scope_filter` without the `drop` clause."""

    def scope_filter(scope: Scope, *extra: Any) -> Filter:
        must: list[Any] = [
            FieldCondition(
                key=key,
                match=MatchAny(value) if isinstance(value, list) else MatchValue(value),
            )
            for key, value in _clauses(scope, drop)
        ]
        return Filter(must=[*must, *extra])

    return scope_filter


def broken_server_filter(drop: str) -> Callable[..., models.Filter]:
    """`ingest.engines.server.index._scope_filter` without the `drop` clause."""

    def scope_filter(scope: Scope, *extra: models.Condition) -> models.Filter:
        must: list[models.Condition] = [
            models.FieldCondition(
                key=key,
                match=models.MatchAny(any=value)
                if isinstance(value, list)
                else models.MatchValue(value=value),
            )
            for key, value in _clauses(scope, drop)
        ]
        return models.Filter(must=[*must, *extra])

    return scope_filter


def break_scope_filters(monkeypatch: pytest.MonkeyPatch, drop: str) -> None:
    """Make both adapters drop one clause of every Scope until `monkeypatch` is undone."""
    if drop not in CLAUSES:
        raise ValueError(f"unknown clause {drop!r}; choose from {CLAUSES}")
    monkeypatch.setattr(ingest.engines.edge.engine, "_scope_filter", broken_edge_filter(drop))
    monkeypatch.setattr(ingest.engines.server.index, "_scope_filter", broken_server_filter(drop))
