"""Running the `kbgate` console script against a running gateway (tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def kbgate_at(*args: str, url: str, key: str) -> subprocess.CompletedProcess[str]:
    """`kbgate ARGS --url URL --key KEY`, its output captured, never raising on its exit code."""
    kbgate = Path(sys.executable).with_name("kbgate")
    return subprocess.run(  # noqa: S603 — our own console script, fixed arguments
        [str(kbgate), *args, "--url", url, "--key", key],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
