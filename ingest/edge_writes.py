"""Writes to a Qdrant Edge shard as kbgate describes them, before Edge's own form.

Edge's `UpdateOperation` objects cannot be pickled. The writes a shard takes while its
indexed copy is built are journalled in this form, so that they can be replayed onto the
copy wherever it is loaded, in this process or in another. `EdgeIndex` turns each one into
Edge's operation in one place (`EdgeIndex.operation`); its Scope becomes a filter there, as
for every read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ingest.index import Passage
from ingest.payload import Scope


@dataclass(frozen=True, slots=True)
class Upsert:
    """Write these passages (new points, or new versions of the same ids)."""

    passages: tuple[Passage, ...]
    #: whether the shard carries the whole-document keyword vector
    document_keywords: bool


@dataclass(frozen=True, slots=True)
class DeleteWhere:
    """Delete the points inside `scope` with one of `point_ids`, or of `document_id`."""

    scope: Scope
    point_ids: frozenset[str] | None = None
    document_id: str | None = None

    def __post_init__(self) -> None:
        if (self.point_ids is None) == (self.document_id is None):
            raise ValueError("a deletion names either point ids or a document, not both")


@dataclass(frozen=True, slots=True)
class SetPayloadWhere:
    """Set `payload`'s keys on the points inside `scope` with one of `point_ids`, or on
    those without an organization id (`org_missing`)."""

    scope: Scope
    payload: Mapping[str, Any]
    point_ids: frozenset[str] | None = None
    org_missing: bool = False

    def __post_init__(self) -> None:
        if (self.point_ids is None) == (not self.org_missing):
            raise ValueError("a payload update names either point ids or org_missing")


Write = Upsert | DeleteWhere | SetPayloadWhere
