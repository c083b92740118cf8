"""Sentence-aware overlapping passages."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.chunking import (
    MAX_PASSAGE_CHARS,
    ChunkingParams,
    char_bound_applies,
    chunk_text,
    split_sentences,
)
from ingest.screening import screen


def test_sentences_keep_abbreviations_and_initials() -> None:
    """Abbreviations, initials and decimals do not end a sentence; paragraphs always do."""
    text = (
        "Obesity is rising, e.g. in the U.S. and elsewhere. Smith et al. agreed with J. Doe. "
        'Rates fell (p < 0.05). He said "Stop." Then left.\n\nNew paragraph'
    )
    assert split_sentences(text) == [
        "Obesity is rising, e.g. in the U.S. and elsewhere.",
        "Smith et al. agreed with J. Doe.",
        "Rates fell (p < 0.05).",
        'He said "Stop."',
        "Then left.",
        "New paragraph",
    ]


def _document(seed: int, sentences: int) -> list[str]:
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
    return [
        f"S{index} " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 40))) + "."
        for index in range(sentences)
    ]


@pytest.mark.parametrize("seed", range(5))
def test_every_sentence_is_whole_in_some_passage(seed: int) -> None:
    """A sentence that falls across a window boundary is found whole in at least one passage."""
    sentences = _document(seed, 60)
    passages = chunk_text(" ".join(sentences), ChunkingParams(max_words=80, overlap_words=25))
    assert len(passages) > 1
    for sentence in sentences:
        assert any(sentence in passage for passage in passages), sentence


def test_windows_respect_the_size_and_neighbours_overlap() -> None:
    """No window exceeds max_words; consecutive windows share whole sentences."""
    sentences = _document(7, 80)
    params = ChunkingParams(max_words=90, overlap_words=30)
    passages = chunk_text(" ".join(sentences), params)
    assert all(len(p.split()) <= params.max_words for p in passages)
    for left, right in itertools.pairwise(passages):
        first_of_right = split_sentences(right)[0]
        assert first_of_right in left


def test_overlong_sentence_is_cut_with_overlap() -> None:
    """A sentence longer than a window is cut into overlapping runs covering every word."""
    words = [f"w{i}" for i in range(250)]
    passages = chunk_text(" ".join(words) + ".", ChunkingParams(max_words=100, overlap_words=20))
    assert all(len(p.split()) <= 100 for p in passages)
    covered = {w.rstrip(".") for p in passages for w in p.split()}
    assert covered == set(words)
    assert passages[0].split()[-20:] == passages[1].split()[:20]


def test_short_text_is_one_passage_and_empty_text_none() -> None:
    """Short documents are one passage; blank ones yield none."""
    assert chunk_text("One sentence. Two sentences.") == ["One sentence. Two sentences."]
    assert chunk_text("   \n\n ") == []


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("ab .!?\n"), max_size=400),
    max_words=st.integers(1, 30),
    overlap=st.integers(0, 29),
)
def test_chunking_never_loses_words(text: str, max_words: int, overlap: int) -> None:
    """Whatever the text, every word appears in some passage and windows stay bounded."""
    params = ChunkingParams(max_words=max_words, overlap_words=min(overlap, max_words - 1))
    passages = chunk_text(text, params)
    assert all(len(p.split()) <= max_words for p in passages)
    assert set(text.split()) <= {w for p in passages for w in p.split()}


def test_an_overlong_token_is_cut_and_no_passage_passes_the_character_bound() -> None:
    """Issue 57 #6: a 900,000-character word is not one 900 KB passage: it is cut into
    pieces of at most `max_chars`, which together hold the whole word."""
    word = "y" * 900_000
    passages = chunk_text(f"Before it. {word} After it.")
    assert max(len(p) for p in passages) <= MAX_PASSAGE_CHARS
    assert passages[0].startswith("Before it.")
    assert sum(p.count("y") for p in passages) == len(word)  # every piece once, no overlap


def test_a_window_of_long_words_stops_at_the_character_bound() -> None:
    """120 words of 40 characters (a URL list) are more than one 2,000-character passage;
    the overlap stays within half the bound; ordinary prose never meets the bound."""
    urls = " ".join(f"https://example.com/{n:020d}/path" for n in range(120))
    passages = chunk_text(urls)
    assert len(passages) > 1
    assert all(len(p) <= MAX_PASSAGE_CHARS for p in passages)
    assert set(urls.split()) <= {w for p in passages for w in p.split()}
    prose = " ".join(_document(3, 80))
    assert not char_bound_applies(prose)
    assert chunk_text(prose) == chunk_text(prose, ChunkingParams(max_chars=10**9))
    assert char_bound_applies(urls)


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("abcdefgh .!?\n"), max_size=600),
    max_chars=st.integers(16, 80),
    max_words=st.integers(1, 30),
)
def test_passages_never_pass_either_bound(text: str, max_chars: int, max_words: int) -> None:
    """Whatever the text, no passage has more than `max_words` words or `max_chars`
    characters, and every character of every word is kept."""
    params = ChunkingParams(max_words=max_words, overlap_words=max_words // 2, max_chars=max_chars)
    passages = chunk_text(text, params)
    assert all(len(p) <= max_chars and len(p.split()) <= max_words for p in passages)
    kept = "".join(p.replace(" ", "") for p in passages)
    assert all(word[:max_chars] in kept for word in text.split())


@pytest.mark.parametrize(
    ("label", "held_back", "reason"),
    [
        ("public", False, None),
        (" Restricted ", False, None),
        (None, True, "missing_classification"),
        ("secret", True, "unknown_classification"),
        (3, True, "unknown_classification"),
        ("", True, "unknown_classification"),
    ],
)
def test_screening(label: object, held_back: bool, reason: str | None) -> None:
    """Only the four labels pass screening; anything else is held back with a reason."""
    verdict = screen(label)
    assert verdict.held_back is held_back
    assert verdict.reason == reason
