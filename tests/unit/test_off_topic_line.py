"""The off-topic line's rule and its built-in probes."""

from __future__ import annotations

from collections import Counter

import pytest

from gateway.retrieval.off_topic_line import (
    LINE_HIGHEST,
    LINE_LOWEST,
    TOPICS_ALLOWED_NEAR,
    line_from_best,
    load_probes,
)


def test_the_line_is_the_sixth_highest_topics_best_probe() -> None:
    """Each topic counts by its best probe; the five topics nearest the KB are passed over."""
    best = [(f"t{n}", 0.30 + n / 100) for n in range(10)]  # t9 0.39 ... t0 0.30
    best += [("t9", 0.59), ("t8", 0.58), ("t7", 0.57), ("t6", 0.56), ("t5", 0.55), ("t4", 0.54)]
    assert line_from_best(best) == pytest.approx(0.54)


def test_the_line_stays_within_its_bounds() -> None:
    """A KB far from every probe gets the lowest line, one close to them all the highest."""
    assert line_from_best((f"t{n}", 0.1) for n in range(30)) == LINE_LOWEST
    assert line_from_best((f"t{n}", 0.9) for n in range(30)) == LINE_HIGHEST
    assert line_from_best([]) == LINE_LOWEST


def test_the_probes_are_thirty_topics_of_six_distinct_questions() -> None:
    """The built-in probes: every topic equally weighted, no question twice."""
    probes = load_probes()
    per_topic = Counter(probe.topic for probe in probes)
    assert len(per_topic) == 30
    assert set(per_topic.values()) == {6}
    assert len({probe.text.casefold() for probe in probes}) == len(probes)
    assert len(per_topic) > TOPICS_ALLOWED_NEAR
