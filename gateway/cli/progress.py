"""`kbgate ingest`'s progress on stderr: a bar with rate and ETA on a terminal (tqdm),
else a line every few seconds and one at the end, each with the rate and the ETA."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

#: Seconds between two progress lines when stderr is not a terminal.
LINE_EVERY_S = 10.0


class IngestProgress(Protocol):
    def __call__(self, done: int, total: int, passages: int) -> None:
        """Files done, files in the run, passages indexed so far."""
        ...

    def close(self) -> None:
        """The run is over."""
        ...


def ingest_progress(stream: TextIO, *, every_s: float = LINE_EVERY_S) -> IngestProgress:
    """A bar when `stream` is a terminal, else periodic lines."""
    if stream.isatty():
        return BarProgress(stream)
    return LineProgress(stream, every_s=every_s)


class BarProgress:
    """tqdm's bar over the files (its own rate and ETA), with the passages' rate beside."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._bar: tqdm[Any] | None = None
        self._started = time.monotonic()

    def __call__(self, done: int, total: int, passages: int) -> None:
        from tqdm import tqdm

        if self._bar is None:
            self._bar = tqdm(total=total, unit="file", file=self._stream, dynamic_ncols=True)
        bar = self._bar
        bar.update(done - bar.n)
        elapsed = max(time.monotonic() - self._started, 1e-9)
        bar.set_postfix_str(f"{passages} passages, {passages / elapsed:.1f}/s", refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


class LineProgress:
    """One line every `every_s` seconds, and one when the last file is done."""

    def __init__(
        self,
        stream: TextIO,
        *,
        every_s: float = LINE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._every_s = every_s
        self._clock = clock
        self._started = clock()
        self._shown = self._started

    def __call__(self, done: int, total: int, passages: int) -> None:
        now = self._clock()
        if done < total and now - self._shown < self._every_s:
            return
        self._shown = now
        print(progress_line(done, total, passages, now - self._started), file=self._stream)
        self._stream.flush()

    def close(self) -> None:
        """Nothing to finish: every line is complete."""


def progress_line(done: int, total: int, passages: int, elapsed_s: float) -> str:
    """`kbgate ingest: 120/500 files (24%), 310 passages, 35.2 passages/s, ETA 1:07`."""
    percent = done * 100 // total if total else 100
    rate = passages / elapsed_s if elapsed_s > 0 else 0.0
    line = (
        f"kbgate ingest: {done}/{total} files ({percent}%), {passages} passages, "
        f"{rate:.1f} passages/s"
    )
    if 0 < done < total and elapsed_s > 0:
        line += f", ETA {_clock_time((total - done) * elapsed_s / done)}"
    return line


def _clock_time(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
