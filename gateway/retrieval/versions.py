"""The newest version of each document among ranked hits.

A replacement writes a document's new version before it deletes the old one
(`ingest.sync`), so for a moment a ranking can see both; a turn keeps only the
version indexed last, so no reader sees both versions or neither.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from ingest.payload import PassageRef


class _Referenced(Protocol):
    @property
    def ref(self) -> PassageRef: ...


_HitT = TypeVar("_HitT", bound=_Referenced)


def newest_versions(hits: Iterable[_HitT]) -> list[_HitT]:
    """Drop hits from superseded versions of a document caught mid-replacement.

    Per (KB, document), only the version indexed last survives; order is kept.
    """
    hits = list(hits)
    versions: dict[tuple[str, str], str] = {}
    for hit in hits:
        ref = hit.ref
        if versions.setdefault((ref.knowledge_base_id, ref.document_id), ref.document_version) != (
            ref.document_version
        ):
            break
    else:
        return hits  # one version per document, as outside a replacement: all current
    newest: dict[tuple[str, str], tuple[str, str]] = {}
    for hit in hits:
        ref = hit.ref
        key = (ref.knowledge_base_id, ref.document_id)
        stamp = (ref.indexed_at, ref.document_version)
        if key not in newest or stamp > newest[key]:
            newest[key] = stamp
    return [
        hit
        for hit in hits
        if newest[(hit.ref.knowledge_base_id, hit.ref.document_id)][1] == hit.ref.document_version
    ]
