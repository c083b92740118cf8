"""What every `kbgate` command prints: progress on stdout, setup errors on stderr."""

from __future__ import annotations

import sys


def say(message: str) -> None:
    print(message, flush=True)  # noqa: T201 — the CLI's own output


def fail(message: str) -> int:
    """A setup error: say why on stderr and exit 2."""
    print(f"kbgate: {message}", file=sys.stderr, flush=True)  # noqa: T201 — the CLI's own output
    return 2
