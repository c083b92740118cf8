"""A serving gateway's threads take turns on the GIL every millisecond, not Python's 5 ms."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from gateway.cli.serve import GIL_SWITCH_INTERVAL_S, share_the_gil


@pytest.fixture
def restored_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("restored_interval")
def test_serve_shortens_the_gils_switch_interval() -> None:
    """`kbgate serve` sets 1 ms: another workspace's CPU-heavy work then holds a turn's
    thread for at most about that long at a time."""
    sys.setswitchinterval(0.005)
    share_the_gil()
    assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_INTERVAL_S)
    assert pytest.approx(0.001) == GIL_SWITCH_INTERVAL_S
