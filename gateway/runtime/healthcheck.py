"""`python -m gateway.runtime.healthcheck`: exit 0 when the local gateway is ready, else 1.

A container's health check runs every few seconds, so this imports nothing beyond the
standard library (the full CLI takes over half a second of CPU to import).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence


def local_url(environ: Mapping[str, str]) -> str:
    """This host's gateway, on KBGATE_PORT (8080 unless set)."""
    return f"http://127.0.0.1:{environ.get('KBGATE_PORT') or '8080'}"


def is_ready(url: str, timeout_s: float = 3.0) -> bool:
    """Whether `url`/health/ready answers 200 within `timeout_s`."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url!r}")
    try:
        with urllib.request.urlopen(f"{url}/health/ready", timeout=timeout_s) as answer:  # noqa: S310 — scheme checked above
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    url = args[0] if args else local_url(os.environ)
    return 0 if is_ready(url) else 1


if __name__ == "__main__":
    raise SystemExit(main())
