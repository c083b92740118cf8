"""Copies among a turn's passages (`gateway.retrieval.diversity`): which texts count as
copies of each other, and which of a group stays."""

from __future__ import annotations

from gateway.retrieval.diversity import (
    MIN_SHINGLES,
    NEAR_COPY_CUT,
    normalised_checksum,
    shingle_overlap,
    shingles,
    without_copies,
)

TEXT = (
    "Every member of staff accrues twenty-five days of paid annual leave a year and may "
    "carry up to five unused days into the first quarter of the next year."
)


def test_texts_equal_but_for_case_spacing_and_unicode_form_share_a_checksum() -> None:
    """Case, runs of whitespace and compatibility characters (a no-break space, a
    full-width letter) do not change the normalised checksum; a changed word does."""
    variant = "  " + TEXT.upper().replace(" ", "\u00a0", 3).replace("A", "\uff21", 1) + "\n"
    assert "\uff21" in variant
    assert normalised_checksum(variant) == normalised_checksum(TEXT)
    assert normalised_checksum(TEXT.replace("five", "six")) != normalised_checksum(TEXT)


def test_an_edited_copy_and_a_quoted_one_are_near_copies_but_a_reworded_one_is_not() -> None:
    """Front matter and a dropped word keep most word triples; a passage quoted inside a
    longer one keeps all of its own; texts that share a theme but are written apart share
    few."""
    edited = "Copied from the handbook. " + TEXT.replace(" paid", "", 1)
    quoted = f"The policy says: {TEXT} Questions go to the people team."
    reworded = (
        "Staff earn 25 days of holiday each year; at most five days left over may be taken "
        "in the first three months of the following year."
    )
    original = shingles(TEXT)
    assert shingle_overlap(original, shingles(edited)) >= NEAR_COPY_CUT
    assert shingle_overlap(original, shingles(quoted)) == 1.0
    assert shingle_overlap(original, shingles(reworded)) < 0.2


def test_the_best_ranked_of_each_group_of_copies_stays_in_order() -> None:
    """Walking best first, every later copy or near-copy of a kept passage is dropped and
    counted; the passages between them keep their places."""
    candidates = [
        ("a", TEXT),
        ("b", "Sick leave needs a doctor's note after three days away from work, sent to HR."),
        ("c", TEXT.upper()),
        ("d", "Copied from the handbook. " + TEXT),
        ("e", "Parental leave is eighteen weeks per child, unpaid, before the fifth birthday."),
    ]
    kept, dropped = without_copies(candidates, lambda candidate: candidate[1])
    assert [name for name, _ in kept] == ["a", "b", "e"]
    assert dropped == 2


def test_short_passages_are_copies_only_when_equal() -> None:
    """Below `MIN_SHINGLES` word triples a few shared words say little: two short titles
    that differ in a year are both kept; two equal ones are not."""
    first, second = "A list of films released in 1990.", "A list of films released in 1991."
    assert len(shingles(first)) < MIN_SHINGLES
    kept, _ = without_copies([first, second, first], str)
    assert kept == [first, second]
