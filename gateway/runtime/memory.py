"""A bounded heap for the long-lived gateway process.

glibc's malloc gives each thread that allocates its own arena (up to 8 per core) and raises
its mmap threshold as large blocks are freed, so the model's and the index's large,
short-lived buffers — allocated from worker threads, of sizes that vary with every batch —
stay in the heap as fragments after use: RSS creeps up with the mix of text lengths. Two
arenas and a fixed mmap threshold keep it flat.

The threshold, 4 MiB, is above the model's buffers for one passage (the largest, the
attention scores of a 256-token run, is 3 MiB), and the heap's free top is given back
only beyond 16 MiB: each model run reuses the previous run's buffers instead of mapping
them again and having the kernel fault them in page by page. Blocks above the threshold
are mapped and given back when freed.
Environment settings (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`,
`MALLOC_TRIM_THRESHOLD_`) win; elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Mapping

#: mallopt parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENAS = 2
MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 16 * 1024 * 1024


def bound_allocator(environ: Mapping[str, str] = os.environ) -> dict[str, int]:
    """Apply the settings not already chosen through the environment; what was applied."""
    wanted = {
        "MALLOC_ARENA_MAX": (M_ARENA_MAX, ARENAS),
        "MALLOC_MMAP_THRESHOLD_": (M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
        "MALLOC_TRIM_THRESHOLD_": (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
    }
    pending = {name: setting for name, setting in wanted.items() if name not in environ}
    if not pending:
        return {}
    mallopt = _glibc_mallopt()
    if mallopt is None:
        return {}
    return {
        name: value for name, (parameter, value) in pending.items() if mallopt(parameter, value)
    }


def _glibc_mallopt() -> ctypes._NamedFuncPointer | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 — only glibc has it (musl, macOS do not)
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt
