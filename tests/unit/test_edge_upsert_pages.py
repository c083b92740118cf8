"""An Edge upsert's pages (`ingest.engines.edge.engine._document_pages`): at least
`UPSERT_PAGE` points each, and never a document split between two calls."""

from __future__ import annotations

from typing import Any, cast

from ingest.engines.edge.engine import UPSERT_PAGE, _document_pages
from ingest.index import Passage
from tests.integration.test_index_contract import passage


def _pages(documents: list[int]) -> list[list[str]]:
    """Pages of document ids, for documents of the given passage counts."""
    passages: list[Passage] = [
        passage(doc=f"doc{number}", idx=position)
        for number, count in enumerate(documents)
        for position in range(count)
    ]
    points: list[Any] = [p.payload.document_id for p in passages]  # stand-ins for points
    return cast(list[list[str]], _document_pages(passages, points))


def test_a_small_write_is_one_call() -> None:
    """Fewer points than a page: one call."""
    assert _pages([3, 4]) == [["doc0"] * 3 + ["doc1"] * 4]


def test_pages_close_only_between_documents() -> None:
    """A page closes at the first document boundary once it holds `UPSERT_PAGE` points:
    each document's passages stay in one call, however long the document."""
    sizes = [UPSERT_PAGE - 1, 5, 2 * UPSERT_PAGE, 1, 1]
    pages = _pages(sizes)
    assert [len(page) for page in pages] == [UPSERT_PAGE + 4, 2 * UPSERT_PAGE, 2]
    seen: dict[str, int] = {}
    for number, page in enumerate(pages):
        for document in page:
            assert seen.setdefault(document, number) == number, "a document split"
    assert sum(len(page) for page in pages) == sum(sizes)
