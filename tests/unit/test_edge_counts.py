"""Counts kept between writes (`ingest.engines.edge.counts`): a kept count serves only
until a write to its collection begins, and a count made while a write is under way is
never kept."""

from __future__ import annotations

from ingest.engines.edge.counts import CountsBetweenWrites


def test_a_kept_count_serves_until_a_write_to_its_collection_begins() -> None:
    """The count is served again between writes; a write to another collection leaves it."""
    counts = CountsBetweenWrites()
    counts.keep("a", "q", counts.mark("a"), 7)
    assert counts.kept("a", "q") == 7
    counts.write_begins("b")
    assert counts.kept("a", "q") == 7
    counts.write_begins("a")
    assert counts.kept("a", "q") is None
    counts.write_ends("a")
    assert counts.kept("a", "q") is None


def test_a_count_made_while_a_write_is_under_way_is_not_kept() -> None:
    """Neither a count begun during a write nor one a write began during is kept."""
    counts = CountsBetweenWrites()
    counts.write_begins("a")
    counts.keep("a", "q", counts.mark("a"), 1)
    counts.write_ends("a")
    assert counts.kept("a", "q") is None
    mark = counts.mark("a")
    counts.write_begins("a")
    counts.write_ends("a")
    counts.keep("a", "q", mark, 2)
    assert counts.kept("a", "q") is None
    counts.keep("a", "q", counts.mark("a"), 3)
    assert counts.kept("a", "q") == 3


def test_a_count_of_zero_is_kept_too() -> None:
    """Zero is an answer like any other (a Scope without dated documents)."""
    counts = CountsBetweenWrites()
    counts.keep("a", "q", counts.mark("a"), 0)
    assert counts.kept("a", "q") == 0
