"""Sentence-aware, overlapping passages sized for the embedding model.

A document becomes windows of whole sentences, each at most `max_words` words
(MiniLM reads 256 word-pieces. Scientific English runs well over 1.3 pieces a word:
with the title in front, 29% of 160-word windows were cut off on SciFact; the default
120 words rarely is, and scored dense nDCG@10 0.677 against 0.645 there). Windows end
at sentence ends, so every sentence is whole in at least one passage; neighbours
also share whole sentences (up to `overlap_words` words, and at least the last
sentence when it is no longer than half a window) so context carries across.
A single sentence longer than a window is cut into overlapping word runs (the
only place a sentence is split).

Windows are bounded in characters too (`max_chars`, 2,000 by default: 120 words of
prose take about 700). Without it a run of long tokens (a URL list, a data URI, minified
code, one 900,000-character "word") became one passage of any size, and the PII analyzer,
which reads a passage whole, refused one past a million characters. A token longer than
`max_chars` is cut into pieces of `max_chars`; the word window and the overlap also stop
at the character bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ingest.structure import Section, sections

# A sentence ends at . ! ? (optionally closed by quotes or brackets) followed by
# space and an upper-case letter, digit or opening quote/bracket; paragraph breaks
# always end one.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])")
_PARAGRAPH = re.compile(r"\n\s*\n+")
_ABBREVIATIONS = frozenset(
    {
        "e.g.",
        "i.e.",
        "et al.",
        "etc.",
        "vs.",
        "fig.",
        "figs.",
        "eq.",
        "ref.",
        "no.",
        "dr.",
        "mr.",
        "mrs.",
        "ms.",
        "prof.",
        "st.",
        "approx.",
        "ca.",
        "cf.",
        "inc.",
        "ltd.",
        "co.",
        "jan.",
        "feb.",
        "mar.",
        "apr.",
        "jun.",
        "jul.",
        "aug.",
        "sep.",
        "sept.",
        "oct.",
        "nov.",
        "dec.",
        "u.s.",
        "u.k.",
        "sp.",
        "spp.",
        "resp.",
        "vol.",
        "pp.",
    }
)


#: The most characters a passage holds by default (spaces included).
MAX_PASSAGE_CHARS = 2000
MIN_PASSAGE_CHARS = 16


@dataclass(frozen=True, slots=True)
class ChunkingParams:
    """Window and overlap sizes, in words; and the most characters a passage may hold."""

    max_words: int = 120
    overlap_words: int = 30
    max_chars: int = MAX_PASSAGE_CHARS

    def __post_init__(self) -> None:
        if self.max_words < 1:
            raise ValueError("max_words must be at least 1")
        if not 0 <= self.overlap_words < self.max_words:
            raise ValueError("overlap_words must be in [0, max_words)")
        if self.max_chars < MIN_PASSAGE_CHARS:
            raise ValueError(f"max_chars must be at least {MIN_PASSAGE_CHARS}")


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, whitespace-normalised, abbreviations kept inside."""
    sentences: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        pending = ""
        for raw in _SENTENCE_END.split(paragraph.strip()):
            piece = " ".join(raw.split())
            if not piece:
                continue
            pending = f"{pending} {piece}" if pending else piece
            if not _ends_with_abbreviation(pending):
                sentences.append(pending)
                pending = ""
        if pending:
            sentences.append(pending)
    return sentences


def _ends_with_abbreviation(sentence: str) -> bool:
    last = sentence.rsplit(" ", 2)
    tail_one = last[-1].lower()
    tail_two = " ".join(last[-2:]).lower() if len(last) > 1 else tail_one
    return tail_one in _ABBREVIATIONS or tail_two in _ABBREVIATIONS or _is_initial(tail_one)


def _is_initial(word: str) -> bool:
    """A single capital initial such as "J." in "J. Smith"."""
    return len(word) == 2 and word[0].isalpha() and word[1] == "."


def chunk_text(text: str, params: ChunkingParams | None = None) -> list[str]:
    """Overlapping windows of whole sentences (see module docstring)."""
    params = params or ChunkingParams()
    units = [unit for sentence in split_sentences(text) for unit in _fit(sentence, params)]
    return [" ".join(units[start:end]) for start, end in _windows(units, params)]


def _windows(units: list[str], params: ChunkingParams) -> list[tuple[int, int]]:
    """The passages' `[start, end)` ranges over `units` (see the module docstring)."""
    sizes = [len(unit.split()) for unit in units]
    lengths = [len(unit) for unit in units]
    windows: list[tuple[int, int]] = []
    start = 0
    while start < len(units):
        end, words, chars = start, 0, -1
        while end < len(units) and (
            end == start
            or (
                words + sizes[end] <= params.max_words
                and chars + 1 + lengths[end] <= params.max_chars
            )
        ):
            words += sizes[end]
            chars += 1 + lengths[end]
            end += 1
        windows.append((start, end))
        if end >= len(units):
            break
        start = _next_start(start, end, sizes, lengths, params)
    return windows


def char_bound_applies(text: str, params: ChunkingParams | None = None) -> bool:
    """Whether `max_chars` can change how `text` is cut: some `max_words` consecutive
    words (every window is such a run) are longer than `max_chars` characters. When it
    cannot, the passages are those the word window alone makes."""
    params = params or ChunkingParams()
    lengths = [len(word) + 1 for word in text.split()]
    run = sum(lengths[: params.max_words])
    if run - 1 > params.max_chars:
        return True
    for index in range(params.max_words, len(lengths)):
        run += lengths[index] - lengths[index - params.max_words]
        if run - 1 > params.max_chars:
            return True
    return False


def _next_start(
    start: int, end: int, sizes: list[int], lengths: list[int], params: ChunkingParams
) -> int:
    """Step back over whole sentences worth at most `overlap_words` (at least one sentence
    when it is no longer than half a window) and half of `max_chars`, always moving forward."""
    nxt, shared, shared_chars = end, 0, 0
    while nxt - 1 > start:
        size, length = sizes[nxt - 1], lengths[nxt - 1] + 1
        first_and_short = nxt == end and size <= params.max_words // 2
        if shared + size > params.overlap_words and not first_and_short:
            break
        if shared_chars + length > params.max_chars // 2:
            break
        nxt -= 1
        shared += size
        shared_chars += length
    return nxt


def _fit(sentence: str, params: ChunkingParams) -> list[str]:
    """A sentence as is, or cut into overlapping runs when longer than a window (in words
    or characters); a token longer than `max_chars` is cut into pieces first."""
    words = [piece for word in sentence.split() for piece in _cut(word, params.max_chars)]
    if len(words) <= params.max_words and len(sentence) <= params.max_chars:
        return [" ".join(words)]
    runs = []
    begin = 0
    while True:
        end, chars = begin, -1
        while end < len(words) and (
            end == begin
            or (end - begin < params.max_words and chars + 1 + len(words[end]) <= params.max_chars)
        ):
            chars += 1 + len(words[end])
            end += 1
        runs.append(" ".join(words[begin:end]))
        if end >= len(words):
            break
        nxt, shared = end, 0
        while nxt - 1 > begin and end - (nxt - 1) <= params.overlap_words:
            shared += len(words[nxt - 1]) + 1
            if shared > params.max_chars // 2:
                break
            nxt -= 1
        begin = nxt
    return runs


def _cut(word: str, max_chars: int) -> list[str]:
    """A token as is, or in pieces of `max_chars` characters when longer."""
    if len(word) <= max_chars:
        return [word]
    return [word[begin : begin + max_chars] for begin in range(0, len(word), max_chars)]


def chunk_document(text: str, params: ChunkingParams | None = None) -> list[str]:
    """The document's passages: `chunk_sections`' texts."""
    return [chunk.text for chunk in chunk_sections(text, params)]


@dataclass(frozen=True, slots=True)
class Chunk:
    """A passage's text and the heading path of the section it comes from (outermost
    first; empty outside any section)."""

    text: str
    path: tuple[str, ...] = ()


def chunk_sections(text: str, params: ChunkingParams | None = None) -> list[Chunk]:
    """The document's passages: along its sections where it has headings
    (`ingest.structure`), else `chunk_text`'s windows.

    A section's blocks (list items, paragraphs) are windowed like sentences, a block too
    long for a window cut into its sentences; no passage holds two sections' text, and
    each starts with its section's heading path (`HEADING_SEPARATOR` between headings),
    so a passage from the middle of a long entry still says which version it is about.
    Blocks start lines of their own."""
    params = params or ChunkingParams()
    found = sections(text)
    passages: list[Chunk] = []
    for section in found or ():
        passages.extend(Chunk(t, section.path) for t in _section_passages(section, params))
    return passages or [Chunk(t) for t in chunk_text(text, params)]


#: Between the headings of a passage's heading path.
HEADING_SEPARATOR = " > "


def _section_passages(section: Section, params: ChunkingParams) -> list[str]:
    """A section's windows, each led by its heading path within the window's bounds."""
    heading = HEADING_SEPARATOR.join(section.path)
    if len(heading) > params.max_chars // 2:
        heading = heading[: params.max_chars // 2]
    room = ChunkingParams(
        max_words=max(params.max_words - len(heading.split()), params.max_words // 2),
        overlap_words=min(params.overlap_words, params.max_words // 4),
        max_chars=max(params.max_chars - len(heading) - 1, params.max_chars // 2),
    )
    units: list[str] = []
    starts: set[int] = set()
    for block in section.blocks:
        starts.add(len(units))
        if len(block.split()) <= room.max_words and len(block) <= room.max_chars:
            units.append(block)
        else:
            sentences = split_sentences(block)
            units.extend(unit for sentence in sentences for unit in _fit(sentence, room))
    passages = []
    for start, end in _windows(units, room):
        body = "".join(
            ("\n" if index in starts and index > start else " " if index > start else "") + unit
            for index, unit in enumerate(units[start:end], start=start)
        )
        passages.append(f"{heading}\n{body}" if heading else body)
    return passages
