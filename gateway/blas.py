"""One thread per BLAS call in kbgate's processes.

The NER pipeline of the PII analysis multiplies small matrices through numpy, whose
OpenBLAS starts a thread per core for each call by default. kbgate already runs its CPU
work on threads of its own (the model's runners, the analysis, the turns), so those extra
threads only add hand-overs: one thread per call costs about a fifth less CPU per analysed
document on this project's benchmark. OpenBLAS reads its setting when numpy is first
imported, so it is set before any command runs; a value from the environment wins.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: The environment variable OpenBLAS (numpy's BLAS) reads its thread count from.
OPENBLAS_THREADS = "OPENBLAS_NUM_THREADS"


def single_threaded_blas(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Ask for one OpenBLAS thread unless the environment chose a count; True when set."""
    if OPENBLAS_THREADS in environ:
        return False
    environ[OPENBLAS_THREADS] = "1"
    return True
