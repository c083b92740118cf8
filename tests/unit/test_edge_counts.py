"""Counts kept between writes (`ingest.engines.edge.counts`): a kept count serves only
until a write touching its Scope's cells begins, a count made while such a write is under
way is never kept, and writes outside the Scope's cells leave it."""

from __future__ import annotations

from ingest.engines.edge.counts import CountsBetweenWrites, scope_cells
from ingest.payload import Classification, Scope

SCOPE = Scope.of(org_id="org", tenant_id="t1", kb_ids=["kb"], clearance=Classification.INTERNAL)
#: A cell the Scope reads, and cells it does not.
INSIDE = frozenset({("t1", "kb", "internal")})
ABOVE = frozenset({("t1", "kb", "restricted")})
OTHER_KB = frozenset({("t1", "kb2", "public")})
OTHER_TENANT = frozenset({("t2", "kb", "public")})


def test_a_scope_reads_each_label_up_to_its_clearance_in_each_of_its_kbs() -> None:
    """Cells: tenant x KB x label, labels up to the clearance."""
    assert scope_cells(
        Scope.of(org_id="org", tenant_id="t1", kb_ids=["a", "b"], clearance=Classification.INTERNAL)
    ) == {("t1", kb, label) for kb in ("a", "b") for label in ("public", "internal")}


def test_a_kept_count_serves_until_a_write_touching_its_scope_begins() -> None:
    """The count is served again between writes; a write to another collection leaves it,
    one touching the Scope's cells or the whole collection lapses it."""
    counts = CountsBetweenWrites()
    counts.keep("a", SCOPE, "q", counts.mark("a", SCOPE), 7)
    assert counts.kept("a", SCOPE, "q") == 7
    counts.write_begins("b", None)
    assert counts.kept("a", SCOPE, "q") == 7
    counts.write_begins("a", INSIDE)
    assert counts.kept("a", SCOPE, "q") is None
    counts.write_ends("a", INSIDE)
    assert counts.kept("a", SCOPE, "q") is None
    counts.keep("a", SCOPE, "q", counts.mark("a", SCOPE), 8)
    counts.write_begins("a", None)
    counts.write_ends("a", None)
    assert counts.kept("a", SCOPE, "q") is None


def test_writes_outside_the_scopes_cells_leave_its_counts() -> None:
    """Another workspace's writes, and this workspace's above the Scope's clearance or in
    another KB, neither lapse a kept count nor keep one from being kept: what lies outside
    the Scope does not change how long its turn takes."""
    counts = CountsBetweenWrites()
    counts.keep("a", SCOPE, "q", counts.mark("a", SCOPE), 7)
    for cells in (ABOVE, OTHER_KB, OTHER_TENANT):
        counts.write_begins("a", cells)
        assert counts.kept("a", SCOPE, "q") == 7
        counts.keep("a", SCOPE, "r", counts.mark("a", SCOPE), 3)
        counts.write_ends("a", cells)
    assert counts.kept("a", SCOPE, "q") == 7
    assert counts.kept("a", SCOPE, "r") == 3


def test_a_count_made_while_a_write_is_under_way_is_not_kept() -> None:
    """Neither a count begun during a write touching the Scope nor one such a write began
    during is kept."""
    counts = CountsBetweenWrites()
    counts.write_begins("a", INSIDE)
    counts.keep("a", SCOPE, "q", counts.mark("a", SCOPE), 1)
    counts.write_ends("a", INSIDE)
    assert counts.kept("a", SCOPE, "q") is None
    mark = counts.mark("a", SCOPE)
    counts.write_begins("a", INSIDE)
    counts.write_ends("a", INSIDE)
    counts.keep("a", SCOPE, "q", mark, 2)
    assert counts.kept("a", SCOPE, "q") is None
    counts.keep("a", SCOPE, "q", counts.mark("a", SCOPE), 3)
    assert counts.kept("a", SCOPE, "q") == 3


def test_a_count_of_zero_is_kept_too() -> None:
    """Zero is an answer like any other (a Scope without dated documents)."""
    counts = CountsBetweenWrites()
    counts.keep("a", SCOPE, "q", counts.mark("a", SCOPE), 0)
    assert counts.kept("a", SCOPE, "q") == 0
