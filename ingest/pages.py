"""Pages of a document: a form feed (U+000C) in its text starts a new page (PDF) or slide
(PPTX); `kbgate ingest` writes one before each page after the first, and any client may.
A passage's page is the one its first word is on, from 1; a text without a form feed has
no pages (None)."""

from __future__ import annotations

import re
from collections.abc import Sequence

PAGE_BREAK = "\f"
#: What `kbgate ingest` puts between two pages: a blank line (a paragraph's end, so no
#: sentence runs across pages, as before pages were recorded) and the form feed.
PAGE_SEPARATOR = "\n\n" + PAGE_BREAK
_WORD = re.compile(r"\S+")


def passage_pages(text: str, passages: Sequence[str]) -> list[int | None]:
    """The page each passage (a window of the text's words, in order) starts on."""
    if PAGE_BREAK not in text:
        return [None] * len(passages)
    words: list[str] = []
    pages: list[int] = []
    page = 1
    position = 0
    for found in _WORD.finditer(text):
        page += text.count(PAGE_BREAK, position, found.start())
        position = found.start()
        words.append(found.group())
        pages.append(page)
    located: list[int | None] = []
    start = 0
    for passage in passages:
        at = _locate(words, passage.split(), start)
        located.append(None if at is None else pages[at])
        if at is not None:
            start = at
    return located


#: How many leading words of a passage may be absent from the text: a passage along a
#: document's sections starts with its heading path (`chunking.chunk_document`), whose
#: words stand elsewhere in the text or not at all (the separator).
_LEADING_CONTEXT = 24


def _locate(words: Sequence[str], passage: Sequence[str], start: int) -> int | None:
    """Where the passage's own words start in `words`: its first 8 words, or the first 8
    after up to `_LEADING_CONTEXT` words of heading path."""
    for skip in range(min(_LEADING_CONTEXT, max(len(passage) - 1, 0)) + 1):
        at = _find(words, passage[skip : skip + 8], start)
        if at is not None:
            return at
    return None


def _find(words: Sequence[str], head: Sequence[str], start: int) -> int | None:
    """Where `head` first occurs in `words` at or after `start`."""
    if not head:
        return None
    for at in range(start, len(words) - len(head) + 1):
        if words[at] == head[0] and list(words[at : at + len(head)]) == list(head):
            return at
    return None
