"""Counting the turns in flight, which decides where a turn's blocking calls run."""

from __future__ import annotations

import pytest

from gateway.runtime.inflight import TurnsInFlight


def test_one_turn_is_alone_and_a_second_is_not() -> None:
    """`alone()` holds with no turn or one turn running, not with two."""
    turns = TurnsInFlight()
    assert turns.alone()
    with turns.running():
        assert turns.alone()
        with turns.running():
            assert not turns.alone()
            assert turns.count == 2
        assert turns.alone()
    assert turns.count == 0


def test_a_failed_turn_is_no_longer_counted() -> None:
    """A turn that raises leaves the count as it found it."""
    turns = TurnsInFlight()
    with pytest.raises(RuntimeError), turns.running():
        raise RuntimeError("the turn failed")
    assert turns.count == 0
