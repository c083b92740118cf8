"""PII evaluation scoring: overlap matches, false redactions and their rate per 1,000."""

from __future__ import annotations

from typing import Any

from bench.pii_eval import Passage, Span, changelog_position, has_all_caps_word, score_set

POLICY = ("EMAIL_ADDRESS", "PERSON")

TEXT = "Ask Ada Lovelace at ada@example.org in London."
ADA = Span(4, 16, "PERSON", "mixed_case")
MAIL = Span(20, 35, "EMAIL_ADDRESS")
LONDON = Span(39, 45, "LOCATION")


def _score(predicted: list[Span]) -> dict[str, Any]:
    passages = [Passage(TEXT, (ADA, MAIL, LONDON)), Passage("Nothing here.", ())]
    return score_set(passages, [predicted, []], POLICY)


def test_overlap_with_a_gold_span_of_the_same_type_is_a_true_positive() -> None:
    """A name detected without its first word still counts for precision and recall,
    but not for the exact-boundary figures."""
    report = _score([Span(8, 16, "PERSON"), MAIL])
    person = report["per_type"]["PERSON"]
    assert (person["gold"], person["predicted"]) == (1, 1)
    assert (person["precision"], person["recall"]) == (1.0, 1.0)
    assert (person["exact_precision"], person["exact_recall"]) == (0.0, 0.0)
    assert report["recall_by_group"] == {"PERSON/mixed_case": {"gold": 1, "recall": 1.0}}


def test_a_span_overlapping_no_gold_span_is_a_false_redaction() -> None:
    """`Ask` matches nothing: a false redaction, counted per 1,000 passages (1 in 2 = 500)."""
    report = _score([Span(0, 3, "PERSON"), ADA])
    person = report["per_type"]["PERSON"]
    assert person["precision"] == 0.5
    assert person["false_redactions"] == 1
    assert person["false_redactions_per_1k"] == 500.0
    assert report["all_policy_types"]["false_redactions"] == 1
    assert report["examples_false_redaction"] == {"PERSON": ["Ask"]}


def test_a_span_over_a_gold_span_of_another_type_is_wrong_but_no_false_redaction() -> None:
    """A PERSON on the gold LOCATION lowers PERSON precision yet blanks labelled text."""
    report = _score([Span(39, 45, "PERSON")])
    person = report["per_type"]["PERSON"]
    assert (person["precision"], person["recall"]) == (0.0, 0.0)
    assert person["false_redactions"] == 0
    assert report["gold_outside_policy"] == {"LOCATION": 1}


def test_missed_gold_spans_lower_recall_only() -> None:
    """Nothing detected: recall 0, precision undefined, no false redactions."""
    report = _score([])
    mail = report["per_type"]["EMAIL_ADDRESS"]
    assert (mail["precision"], mail["recall"], mail["false_redactions_per_1k"]) == (None, 0.0, 0.0)


def test_per_thousand_is_over_all_passages_of_the_set() -> None:
    """Three false redactions in 2 passages are 1,500 per 1,000 passages."""
    wrong = [Span(0, 3, "PERSON"), Span(36, 38, "PERSON"), Span(17, 19, "EMAIL_ADDRESS")]
    report = _score(wrong)
    assert report["all_policy_types"]["false_redactions_per_1k"] == 1500.0
    assert report["per_type"]["EMAIL_ADDRESS"]["false_redactions_per_1k"] == 500.0


def test_subgroups() -> None:
    """All-capitals words of two letters or more, and a changelog name's line shape."""
    assert has_all_caps_word("Francisco MACIAS NGUEMA")
    assert not has_all_caps_word("A. Einstein")
    text = "  [ Jane Roe ]\n  * Thanks to John Doe.\n -- Jane Roe <j@x.org>  Mon, 1 Jan 2024"
    assert changelog_position(text, 4, 12) == "header"
    assert changelog_position(text, 29, 37) == "running"
    assert changelog_position(text, 43, 51) == "signature"
