"""A passage's page: the page its own first words are on."""

from ingest.chunking import ChunkingParams, chunk_document
from ingest.pages import PAGE_SEPARATOR, passage_pages


def test_a_passage_is_on_the_page_its_first_word_is_on() -> None:
    """Windows of a text with form feeds name the page each starts on; a text without
    one has no pages."""
    text = PAGE_SEPARATOR.join(" ".join(f"p{page}w{i}" for i in range(30)) for page in (1, 2, 3))
    passages = [" ".join(f"p{page}w{i}" for i in range(10, 20)) for page in (1, 2, 3)]
    assert passage_pages(text, passages) == [1, 2, 3]
    assert passage_pages(text.replace("\f", ""), passages) == [None, None, None]


def test_a_passage_led_by_its_heading_path_is_found_by_its_own_words() -> None:
    """A section's later windows start with its heading path (`chunk_document`), words
    that stand at the heading on an earlier page: the passage is on the page of the words
    that follow them."""
    body = " ".join(f"entry{i}." for i in range(200))
    text = "# Release 2.0\n\n" + body[:600] + PAGE_SEPARATOR + body[600:]
    passages = chunk_document(text, ChunkingParams(max_words=40, overlap_words=5))
    assert passages[-1].startswith("Release 2.0")
    pages = passage_pages(text, passages)
    assert pages[0] == 1
    assert pages[-1] == 2
    assert None not in pages
