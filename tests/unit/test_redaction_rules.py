"""Pure parts of redaction: overlap resolution, and the entity catalog kept in step."""

from __future__ import annotations

import itertools
import subprocess
import sys
from dataclasses import dataclass

import pytest

from gateway.safety.policy import resolve_overlaps
from gateway.safety.redaction import Detection, may_hold_phone_number


@dataclass
class Found:
    """What presidio's analyzer hands back, reduced to the fields the rule reads."""

    entity_type: str
    start: int
    end: int
    score: float


TEXT = "0123456789abcdefghijklmnopqrstuvwxyz"


def spans(found: list[Found]) -> list[tuple[int, int, str]]:
    return [(d.start, d.end, d.entity_type) for d in resolve_overlaps(TEXT, found)]


def test_disjoint_results_are_kept_in_text_order() -> None:
    """Results that do not touch each other all survive, sorted by start."""
    found = [Found("B", 10, 14, 0.5), Found("A", 0, 4, 0.4)]
    assert spans(found) == [(0, 4, "A"), (10, 14, "B")]


def test_contained_result_is_dropped_even_with_a_higher_score() -> None:
    """A span inside a longer one is covered by it: only the outer one is replaced."""
    found = [Found("URL_WITH_CREDENTIALS", 0, 20, 0.9), Found("EMAIL_ADDRESS", 5, 15, 1.0)]
    assert spans(found) == [(0, 20, "URL_WITH_CREDENTIALS")]


def test_same_span_goes_to_the_higher_score_then_the_type_name() -> None:
    """Two types on one span: the higher score wins; on a tie, the smaller type name."""
    assert spans([Found("PHONE_NUMBER", 0, 11, 0.4), Found("US_SSN", 0, 11, 0.5)]) == [
        (0, 11, "US_SSN")
    ]
    assert spans([Found("B", 0, 11, 0.5), Found("A", 0, 11, 0.5)]) == [(0, 11, "A")]


def test_same_type_overlaps_merge_into_their_union() -> None:
    """Two overlapping results of one type become one span covering both."""
    found = [Found("PHONE_NUMBER", 0, 8, 0.4), Found("PHONE_NUMBER", 5, 12, 0.4)]
    assert spans(found) == [(0, 12, "PHONE_NUMBER")]


def test_partial_overlap_trims_the_lower_score() -> None:
    """Crossing spans: the higher score keeps the overlap, the other keeps its remainder."""
    found = [Found("CREDIT_CARD", 0, 10, 1.0), Found("PHONE_NUMBER", 6, 16, 0.4)]
    assert spans(found) == [(0, 10, "CREDIT_CARD"), (10, 16, "PHONE_NUMBER")]


def test_union_of_detections_is_always_covered() -> None:
    """However results overlap, every detected character ends up inside a kept span."""
    found = [
        Found("A", 0, 6, 0.6),
        Found("B", 4, 12, 0.5),
        Found("C", 10, 20, 0.9),
        Found("D", 18, 25, 0.4),
        Found("E", 30, 33, 0.3),
    ]
    kept = resolve_overlaps(TEXT, found)
    covered = {i for d in kept for i in range(d.start, d.end)}
    detected = {i for f in found for i in range(f.start, f.end)}
    assert covered == detected
    assert all(a.end <= b.start for a, b in itertools.pairwise(kept))


def test_remainder_without_letters_or_digits_is_dropped() -> None:
    """A trimmed remainder of only punctuation or spaces is not worth a placeholder."""
    text = "abc-- xyz"
    found = [Found("A", 0, 3, 1.0), Found("B", 0, 5, 0.4)]
    # B contains A, so A is dropped and B kept whole.
    assert [(d.start, d.end) for d in resolve_overlaps(text, found)] == [(0, 5)]
    crossing = [Found("A", 0, 4, 1.0), Found("B", 2, 6, 0.4)]
    assert resolve_overlaps(text, crossing) == [Detection(0, 4, "A", 1.0)]


def test_importing_the_gateway_loads_no_presidio() -> None:
    """Nothing heavy at import time: presidio, spaCy, tldextract load only with a Redactor."""
    probe = (
        "import sys, gateway.http.app, gateway.safety.redaction, gateway.http.routes.redaction; "
        "print(sorted(m for m in ('presidio_analyzer', 'presidio_anonymizer', 'spacy', "
        "'tldextract') if m in sys.modules))"
    )
    done = subprocess.run(  # noqa: S603 — our own interpreter on a fixed probe
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("text", "fewest", "may_hold"),
    [
        ("No digits at all.", 4, False),
        ("Doses of 5 and 10 mg in 3 arms.", 4, False),  # letters split the digits
        ("Call 030 1234 today.", 4, True),
        ("(95% CI 1.2-3.4)", 4, True),  # punctuation and spaces do not split
        ("Room 12x34", 4, True),  # x is phone punctuation
        ("Codes A12B34C56", 4, False),
        ("Fullwidth \uff10\uff13\uff10\uff11", 4, True),  # any decimal digit counts
        ("Exactly 123 here", 4, False),
        ("Exactly 1234 here", 4, True),
        ("A single 7", 0, True),  # a bound of 0 never skips
    ],
)
def test_a_text_may_hold_a_phone_number_only_with_enough_digits_in_one_stretch(
    text: str, fewest: int, may_hold: bool
) -> None:
    """Digits count together across punctuation and spaces, never across letters."""
    assert may_hold_phone_number(text, fewest) is may_hold
