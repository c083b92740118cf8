"""Background threads run at a lower CPU priority than the rest of the process."""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from ingest.background import BACKGROUND_NICE, lower_priority


def _nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def _lowered_again() -> int:
    lower_priority()
    return _nice_of_this_thread()


@pytest.mark.skipif(sys.platform != "linux", reason="nice values are per thread on Linux only")
def test_pool_threads_run_nicer_and_the_caller_keeps_its_priority() -> None:
    """Threads started with `lower_priority` as their initializer run at the background
    nice value (and a second call keeps it); the thread that made the pool is unchanged."""
    before = _nice_of_this_thread()
    with ThreadPoolExecutor(max_workers=2, initializer=lower_priority) as pool:
        seen = set(pool.map(lambda _: _nice_of_this_thread(), range(4)))
        again = pool.submit(_lowered_again).result()
    assert seen == {max(before, BACKGROUND_NICE)}
    assert again == max(before, BACKGROUND_NICE)
    assert _nice_of_this_thread() == before
