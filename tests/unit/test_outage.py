"""The fail-fast gate in front of Redis: hold after a failure, one probe, then healthy again."""

from __future__ import annotations

import pytest

from settings.stores.outage import FailFast


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_healthy_gate_admits_every_call() -> None:
    """Before any failure every call goes to the dependency."""
    gate = FailFast(hold_s=1.0, probe_s=5.0, clock=Clock())
    assert gate.healthy
    assert all(gate.admit() for _ in range(10))


def test_failure_holds_then_lets_one_probe_through() -> None:
    """After a failure calls fail fast for hold_s; then exactly one probe is admitted while the
    others keep failing fast; the probe's success reopens the gate for everyone."""
    clock = Clock()
    gate = FailFast(hold_s=1.0, probe_s=5.0, clock=clock)
    gate.failed()
    assert not gate.admit()
    clock.now += 0.99
    assert not gate.admit()
    clock.now += 0.02
    assert gate.admit()  # the probe
    assert not gate.admit()  # others while it runs
    gate.succeeded()
    assert gate.healthy
    assert gate.admit()


def test_failed_probe_holds_again_and_a_lost_probe_expires() -> None:
    """A failed probe starts a new hold; a probe that never reports lets another through after
    probe_s."""
    clock = Clock()
    gate = FailFast(hold_s=1.0, probe_s=5.0, clock=clock)
    gate.failed()
    clock.now += 1.0
    assert gate.admit()
    gate.failed()
    clock.now += 0.5
    assert not gate.admit()
    clock.now += 0.5
    assert gate.admit()  # this probe is lost (cancelled): no outcome reported
    clock.now += 4.9
    assert not gate.admit()
    clock.now += 0.2
    assert gate.admit()


def test_bad_bounds_are_refused() -> None:
    """A negative hold or a non-positive probe window is a programming error."""
    with pytest.raises(ValueError, match="hold_s"):
        FailFast(hold_s=-1, probe_s=1)
    with pytest.raises(ValueError, match="probe_s"):
        FailFast(hold_s=1, probe_s=0)
