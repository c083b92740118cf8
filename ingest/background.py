"""Background CPU work: threads that give the cores up to request handling.

Ingest embeds passages and analyses them on threads of their own. Those threads run at a
lower CPU priority (a higher nice value) than the rest of the process: while they are
the only work, they use every core; when a turn's threads become runnable, the kernel's
scheduler runs those first, within its own time slice, with no coordination in Python.

On Linux the nice value is a per-thread attribute, and a thread inherits its creator's;
elsewhere the call would change the whole process, so it is skipped there.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import suppress

#: The nice value of background threads. Under CFS a nice-10 thread gets about a tenth of
#: a core that a nice-0 thread also wants (weights 110 against 1024), and a woken nice-0
#: thread preempts it: turns wait little, and ingest keeps a share (never starved).
BACKGROUND_NICE = 10


def lower_priority() -> None:
    """Run the calling thread at `BACKGROUND_NICE` (a ThreadPoolExecutor initializer).

    Only ever raises the nice value (lowering it back needs a privilege); a thread already
    nicer keeps its value. Does nothing where nice values are not per thread.
    """
    if sys.platform != "linux":
        return
    thread = threading.get_native_id()
    with suppress(OSError):  # a container may forbid it: the work runs all the same
        current = os.getpriority(os.PRIO_PROCESS, thread)
        if current < BACKGROUND_NICE:
            os.setpriority(os.PRIO_PROCESS, thread, BACKGROUND_NICE)
