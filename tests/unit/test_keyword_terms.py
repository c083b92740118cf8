"""Technical tokens in the keyword channel: identifiers matched whole and by their parts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ingest.keyword_terms import (
    ADDED_WEIGHT,
    added_terms,
    is_own_word,
    keyword_analysis_applies,
    keyword_text,
    question_weights,
    term_weights,
)

if TYPE_CHECKING:
    from fastembed.sparse.bm25 import Bm25


@pytest.mark.parametrize(
    ("text", "added"),
    [
        ("--prune=now", ["prune_now"]),
        ("core.untrackedCache", ["core_untrackedcache", "untracked", "cache"]),
        ("CVE-2023-50387", ["cve_2023_50387"]),
        ("gpg.fail", ["gpg_fail"]),
        ("1:9.0p1-1", ["1_9_0p1_1", "9_0p1_1", "9_0p1"]),
        ("3.0.17-1~deb12u2", ["3_0_17_1_deb12u2", "3_0_17"]),
        ("metadata_csum_seed", ["metadata", "csum", "seed"]),
        ("RequiredRSASize", ["required", "rsa", "size"]),
        ("xmlFreeID", ["xml", "free", "id"]),
        ("hr_HR-euro.diff", ["hr", "hr", "hr_hr_euro_diff", "euro_diff"]),
    ],
)
def test_identifiers_add_their_joined_form_and_their_parts(text: str, added: list[str]) -> None:
    """An identifier adds one word joining its parts (and each coarser segment's), a
    snake_case or camelCase name its parts: the words BM25's own split loses."""
    assert list(added_terms(text)) == added


def test_prose_and_plain_numbers_are_left_alone() -> None:
    """Text without identifiers is returned as it is: no keyword vector changes for it."""
    text = "Which bash upload started compiling the shell with hardening flags? Bug #1021082"
    assert keyword_text(text) == text
    assert not keyword_analysis_applies(text)


def test_trailing_punctuation_is_not_part_of_an_identifier() -> None:
    """A sentence's full stop or a closing bracket after an identifier changes nothing."""
    assert list(added_terms("Fixed in (CVE-2022-1271).")) == ["cve_2022_1271"]
    assert list(added_terms('use "--prune=now",')) == ["prune_now"]


def test_each_occurrence_counts() -> None:
    """Two mentions add the joined word twice, as BM25 counts any repeated word."""
    assert keyword_text("gpg.fail and gpg.fail") == "gpg.fail and gpg.fail\ngpg_fail gpg_fail"


def test_a_long_path_adds_a_bounded_number_of_words() -> None:
    """A URL or path adds at most eight joined words, none longer than BM25 keeps."""
    url = "https://www.kernel.org/pub/linux/kernel/v6.x/ChangeLog-6.1.181/a/b/c/d/e/f/g/h"
    joined = [word for word in added_terms(url) if "_" in word]
    assert 0 < len(joined) <= 8
    assert all(len(word) <= 40 for word in joined)


def _bm25() -> Bm25:
    from ingest.embedder.embedding import BM25_AVG_LEN, _bm25_model, _load_bm25

    return _bm25_model(_load_bm25(k=1.2, b=0.75, avg_len=BM25_AVG_LEN))


def test_weights_of_plain_text_are_fastembeds() -> None:
    """A text with nothing added is weighed exactly as fastembed's BM25 weighs it."""
    bm25 = _bm25()
    text = "Enable all hardening flags when compiling the shell (Closes: #1021082)."
    (expected,) = bm25.passage_embed([text])
    weights = term_weights(bm25, text)
    assert dict(zip(weights.indices, weights.values, strict=True)) == pytest.approx(
        dict(zip(expected.indices.tolist(), expected.values.tolist(), strict=True))
    )


def test_added_words_count_as_terms_but_not_in_the_length() -> None:
    """An identifier's joined form is a term of its own; the words beside it keep the
    weight they have in the same text without it (the length counts words only)."""
    bm25 = _bm25()
    plain = term_weights(bm25, "Run gc with prune now to drop loose objects")
    option = term_weights(bm25, "Run gc with --prune=now to drop loose objects")
    joined = bm25.compute_token_id("prune_now")
    assert joined in option.indices
    assert joined not in plain.indices
    loose = bm25.compute_token_id("loos")
    assert dict(zip(option.indices, option.values, strict=True))[loose] == pytest.approx(
        dict(zip(plain.indices, plain.values, strict=True))[loose]
    )


def test_a_questions_added_words_weigh_less_than_its_own() -> None:
    """A question's own words weigh 1, as fastembed's question vectors do; what the
    analysis adds weighs `ADDED_WEIGHT`, and only its own words count as its words."""
    bm25 = _bm25()
    vector = question_weights(bm25, "Which release fixed CVE-2022-1271?")
    weights = dict(zip(vector.indices, vector.values, strict=True))
    (plain,) = bm25.query_embed(["Which release fixed CVE-2022-1271?"])
    assert {term: weights[term] for term in plain.indices.tolist()} == dict.fromkeys(
        plain.indices.tolist(), 1.0
    )
    assert weights[bm25.compute_token_id("cve_2022_1271")] == ADDED_WEIGHT
    assert [is_own_word(weight) for weight in (1.0, ADDED_WEIGHT)] == [True, False]
