"""The allocator bounds `kbgate serve` applies at start (`gateway.runtime.memory`)."""

from __future__ import annotations

import platform

import pytest

from gateway.runtime.memory import (
    ARENAS,
    MMAP_THRESHOLD_BYTES,
    TRIM_THRESHOLD_BYTES,
    bound_allocator,
)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_gets_two_arenas_and_fixed_thresholds() -> None:
    """On glibc the three settings are applied when the environment chooses none."""
    assert bound_allocator({}) == {
        "MALLOC_ARENA_MAX": ARENAS,
        "MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD_BYTES,
        "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD_BYTES,
    }


def test_the_environment_wins() -> None:
    """A setting chosen through the environment is left to glibc, which reads it itself."""
    chosen = {
        "MALLOC_ARENA_MAX": "4",
        "MALLOC_MMAP_THRESHOLD_": "65536",
        "MALLOC_TRIM_THRESHOLD_": "65536",
    }
    assert bound_allocator(chosen) == {}
    applied = bound_allocator({"MALLOC_ARENA_MAX": "4"})
    assert "MALLOC_ARENA_MAX" not in applied
