"""Which ranked passages a turn keeps while a document is being replaced: only those of
the version indexed last, per (KB, document), in their original order."""

from __future__ import annotations

from gateway.retrieval.versions import newest_versions
from ingest.index import RankedPoint
from ingest.payload import PassageRef


def _hit(point: str, document: str, version: str, indexed_at: str, kb: str = "kb") -> RankedPoint:
    ref = PassageRef(
        knowledge_base_id=kb,
        document_id=document,
        document_version=version,
        passage_index=0,
        indexed_at=indexed_at,
    )
    return RankedPoint(point, 1.0, ref)


def test_one_version_per_document_keeps_every_hit_in_order() -> None:
    """Outside a replacement (one version per document) nothing is dropped or reordered,
    including the same passage found by two legs."""
    hits = [
        _hit("a1", "a", "v1", "t1"),
        _hit("b1", "b", "v7", "t2"),
        _hit("a2", "a", "v1", "t1"),
        _hit("a1", "a", "v1", "t1"),
    ]
    assert newest_versions(hits) == hits


def test_a_document_caught_mid_replacement_keeps_only_its_newest_version() -> None:
    """Two versions of one document: the one indexed last survives, wherever its hits
    are; other documents are untouched."""
    hits = [
        _hit("old1", "a", "v1", "2026-01-01"),
        _hit("b1", "b", "v1", "2026-01-01"),
        _hit("new1", "a", "v2", "2026-02-01"),
        _hit("old2", "a", "v1", "2026-01-01"),
        _hit("new2", "a", "v2", "2026-02-01"),
    ]
    kept = [hit.point_id for hit in newest_versions(hits)]
    assert kept == ["b1", "new1", "new2"]


def test_the_same_document_id_in_two_knowledge_bases_is_two_documents() -> None:
    """Versions are compared per (KB, document): another KB's copy is never superseded."""
    hits = [
        _hit("x1", "a", "v1", "2026-01-01", kb="kb1"),
        _hit("y1", "a", "v2", "2026-02-01", kb="kb2"),
    ]
    assert newest_versions(hits) == hits
