"""Copies among a turn's passages: the same text in different documents fills one slot.

Two passages are copies when their normalised texts are equal (`normalised_checksum`:
Unicode NFKC, case folded, runs of whitespace as one space), and near-copies when at least
`NEAR_COPY_CUT` of the word shingles (runs of `SHINGLE_WORDS` consecutive words of the
normalised text) of the shorter one are also the other's (`shingle_overlap`, the overlap
coefficient): an edited copy, or a passage quoted whole inside a longer one. Passages of
fewer than `MIN_SHINGLES` shingles are copies only when equal. Walking the fused
candidates best first, a passage that copies or nearly copies one already kept is dropped,
so of each group of copies the best-ranked stays. Pure: the turn reads the texts and
applies the result (the cut's measurement: docs/decisions/fusion-and-floors.md).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Callable, Sequence
from typing import TypeVar

#: Words per shingle.
SHINGLE_WORDS = 3
#: The share of the shorter passage's shingles found in the other at and above which two
#: passages are near-copies. Distinct documents written from one template (a football
#: team's seasons, a river's tributaries) share up to about 0.75.
NEAR_COPY_CUT = 0.8
#: Shorter passages are compared whole only: a few words in common say little.
MIN_SHINGLES = 8

T = TypeVar("T")


def normalised_text(text: str) -> str:
    """NFKC, case folded, whitespace runs as one space, trimmed."""
    return " ".join(_normalised_words(text))


def normalised_checksum(text: str) -> str:
    """sha256 of the normalised text: equal for copies that differ only in case, spacing
    or Unicode form."""
    return _checksum(_normalised_words(text))


def shingles(text: str) -> frozenset[tuple[str, ...]]:
    """Every run of `SHINGLE_WORDS` consecutive words of the normalised text (the whole
    text when it has fewer words)."""
    return _shingles(_normalised_words(text))


def _normalised_words(text: str) -> list[str]:
    if not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return text.casefold().split()


def _checksum(words: list[str]) -> str:
    return hashlib.sha256(" ".join(words).encode("utf-8")).hexdigest()


def _shingles(words: list[str]) -> frozenset[tuple[str, ...]]:
    if len(words) <= SHINGLE_WORDS:
        return frozenset({tuple(words)})
    return frozenset(zip(*(words[i:] for i in range(SHINGLE_WORDS)), strict=False))


def shingle_overlap(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    """The share of the smaller set's shingles found in the other (1.0 if either is empty)."""
    smaller = min(len(a), len(b))
    return len(a & b) / smaller if smaller else 1.0


def near_copies(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> bool:
    """Whether two passages' shingles make them near-copies (`NEAR_COPY_CUT`)."""
    if min(len(a), len(b)) < MIN_SHINGLES:
        return False
    return shingle_overlap(a, b) >= NEAR_COPY_CUT


def without_copies(
    candidates: Sequence[T],
    text_of: Callable[[T], str],
    may_drop: Callable[[T], bool] = lambda _: True,
) -> tuple[list[T], int]:
    """`candidates` (best first) without those that copy or nearly copy an earlier kept
    one (of those `may_drop` allows: their KB drops copies), and how many were dropped."""
    kept: list[T] = []
    checksums: set[str] = set()
    kept_shingles: list[frozenset[tuple[str, ...]]] = []
    for candidate in candidates:
        words = _normalised_words(text_of(candidate))
        checksum = _checksum(words)
        own = _shingles(words)
        copy = checksum in checksums or any(near_copies(own, other) for other in kept_shingles)
        if copy and may_drop(candidate):
            continue
        kept.append(candidate)
        checksums.add(checksum)
        kept_shingles.append(own)
    return kept, len(candidates) - len(kept)
