"""Starting a real `kbgate serve` on a large data dir for a benchmark: the start builds
the indexes of what was written since the last one before it answers, which may take
longer than the test helper's wait, and logs how long the build took."""

from __future__ import annotations

import json
import time

from tests.support.gateway_process import GatewayProcess

#: the longest a start may take to answer `/health/live`
START_TIMEOUT_S = 1800.0


def start_live(gateway: GatewayProcess, timeout_s: float = START_TIMEOUT_S) -> float:
    """Start the gateway; the seconds until it answers `/health/live`."""
    started = time.perf_counter()
    try:
        gateway.start()
    except RuntimeError:
        deadline = time.monotonic() + timeout_s
        while True:  # a large store may take longer than the helper's wait
            try:
                gateway.wait_ready()
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    gateway.stop()
                    raise
    return time.perf_counter() - started


def logged_build_ms(gateway: GatewayProcess) -> int | None:
    """The duration of the last `index_optimized` the gateway logged (None: none)."""
    found = None
    for line in gateway.log_path.read_text().splitlines():
        if '"index_optimized"' in line:
            found = json.loads(line[line.index("{") :]).get("duration_ms")
    return found
