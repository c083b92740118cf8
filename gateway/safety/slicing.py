"""A long text or a JSON value cut into units of analysis, and what is found in a
piece moved back to where it lies in the whole (`gateway.safety.redaction`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gateway.safety.spans import Detection
from ingest.payload import PiiSpan

#: Deeper JSON than this is refused rather than walked.
MAX_JSON_DEPTH = 64
#: The most characters the recognizers read at once (spaCy refuses a text past a million;
#: passages are far shorter, `ingest.chunking.MAX_PASSAGE_CHARS`, but one stored before
#: passages had a character bound may not be). A longer text is read in slices cut at
#: whitespace, its spans shifted back: a long text is never a failure.
MAX_ANALYSIS_CHARS = 100_000
#: Characters of one text a call-time redaction (`redact`, `redact_explained`) analyses
#: between two checkpoints (about 0.1 s of analysis on a core of its own). A longer text is read
#: in slices of this size, each widened by `SLICE_OVERLAP_CHARS` on either side so that
#: an entity cut by a slice's edge is whole in the widened slice; a name found in one
#: slice is then looked for in the whole text (`same_names`).
TEXT_SLICE_CHARS = 2_000
SLICE_OVERLAP_CHARS = 200


def analysis_slices(text: str, bound: int = MAX_ANALYSIS_CHARS) -> list[tuple[int, str]]:
    """`text` in consecutive slices of at most `bound` characters, each with its offset;
    a slice ends at the last whitespace of its second half where there is one."""
    slices: list[tuple[int, str]] = []
    start = 0
    while start < len(text):
        end = min(start + bound, len(text))
        if end < len(text):
            cut = max(text.rfind(space, start + bound // 2, end) for space in " \n\t")
            if cut > start:
                end = cut + 1
        slices.append((start, text[start:end]))
        start = end
    return slices


def text_slices(
    text: str, bound: int = TEXT_SLICE_CHARS, overlap: int = SLICE_OVERLAP_CHARS
) -> list[tuple[int, str]]:
    """`analysis_slices` of `text`, each widened by `overlap` characters on either side,
    with the offset of each widened slice."""
    widened: list[tuple[int, str]] = []
    for offset, piece in analysis_slices(text, bound):
        start, end = max(0, offset - overlap), min(len(text), offset + len(piece) + overlap)
        widened.append((start, text[start:end]))
    return widened


def shifted_result(result: Any, offset: int) -> Any:
    """An analyzer result (presidio's or a Detection) moved `offset` characters on."""
    if isinstance(result, Detection):
        return replace(result, start=result.start + offset, end=result.end + offset)
    moved = copy.copy(result)
    moved.start, moved.end = result.start + offset, result.end + offset
    return moved


#: Strings of a JSON value analysed in one call, and the characters one call takes
#: (a longer string goes alone): one unit of work between two checkpoints.
JSON_BATCH_STRINGS = 16
JSON_BATCH_CHARS = 4_000


def json_batches(texts: Sequence[str]) -> list[list[str]]:
    """`texts` in order, cut into batches of at most JSON_BATCH_STRINGS strings and
    JSON_BATCH_CHARS characters (a longer string is a batch of its own)."""
    batches: list[list[str]] = []
    batch: list[str] = []
    chars = 0
    for text in texts:
        if batch and (len(batch) >= JSON_BATCH_STRINGS or chars + len(text) > JSON_BATCH_CHARS):
            batches.append(batch)
            batch, chars = [], 0
        batch.append(text)
        chars += len(text)
    if batch:
        batches.append(batch)
    return batches


def collect_strings(value: Any, into: dict[str, None]) -> None:
    """Every string of a JSON value into `into` (distinct, in first-seen order); ValueError
    past MAX_JSON_DEPTH."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(node, str):
            into[node] = None
        elif isinstance(node, dict):
            stack.extend((item, depth + 1) for item in reversed(node.values()))
        elif isinstance(node, list | tuple):
            stack.extend((item, depth + 1) for item in reversed(node))


def shifted(span: PiiSpan, offset: int) -> PiiSpan:
    if not offset:
        return span
    return PiiSpan(span.start + offset, span.end + offset, span.entity_type, span.score)
