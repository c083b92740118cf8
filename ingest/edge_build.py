"""Qdrant Edge's search indexes built beside a serving process, on a copy of a shard.

Edge's optimizer holds the GIL for as long as it runs (seconds per 10,000 passages), so
a process that serves must not run it. `EdgeShards.index_written` copies a shard that has
taken many writes into a sibling directory, runs this module on the copy in a child
process (niced: turns come first), loads the indexed copy, replays the writes made
since the copy and swaps it in. This module holds the parts that are not the shard's:
the child's entry point, and where a collection's live directory is on disk.

On disk a collection lives in `<root>/<collection>`. After a swap it lives in a
generation directory `<root>/<collection>~<n>`, named by a pointer file
`<root>/<collection>.live` that is written (atomically) only once the copy holds every
write. The next time the collection is opened, `live_directory` folds the layout back:
the generation is renamed to `<root>/<collection>`, and copies a crash left behind are
removed. A crash before the pointer is written leaves the old directory in charge; one
after leaves the copy, which by then holds every write.

Run as `python -m ingest.edge_build PATH --dense-dim N --threshold-kb KB`.
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from ingest.index import IndexUnavailableError

#: separates a collection's name from its generation (never part of a collection name)
GENERATION_MARK = "~"
POINTER_SUFFIX = ".live"
#: how much lower the child's scheduling priority is than the gateway's
CHILD_NICENESS = 10
_READ_CHUNK = 1 << 20


def pointer_file(root: Path, collection: str) -> Path:
    return root / f"{collection}{POINTER_SUFFIX}"


def next_generation(root: Path, collection: str) -> Path:
    """A fresh directory name for the collection's next indexed copy."""
    copies = root.glob(f"{collection}{GENERATION_MARK}*")
    taken = [_generation(path.name, collection) for path in copies]
    return root / f"{collection}{GENERATION_MARK}{max([0, *taken]) + 1}"


def point_to(root: Path, collection: str, generation: Path) -> None:
    """Make `generation` the collection's live directory, durably."""
    pointer = pointer_file(root, collection)
    staged = pointer.with_name(pointer.name + ".tmp")
    with staged.open("w") as handle:
        handle.write(generation.name)
        handle.flush()
        os.fsync(handle.fileno())
    staged.replace(pointer)
    _sync_directory(root)


def live_directory(root: Path, collection: str) -> Path:
    """The collection's directory, `<root>/<collection>`, after folding back a swapped
    generation and removing copies left unfinished. Call it only while the collection is
    not open in this process."""
    canonical = root / collection
    pointer = pointer_file(root, collection)
    if pointer.exists():
        generation = root / pointer.read_text().strip()
        if generation.parent == root and generation.is_dir():
            if canonical.exists():
                shutil.rmtree(canonical)
            generation.rename(canonical)
        pointer.unlink()
        _sync_directory(root)
    for leftover in root.glob(f"{collection}{GENERATION_MARK}*"):
        if _generation(leftover.name, collection):
            shutil.rmtree(leftover, ignore_errors=True)
    return canonical


def swapped_collections(root: Path) -> list[str]:
    """Collections whose live directory is a generation (named by a pointer file)."""
    return [path.name.removesuffix(POINTER_SUFFIX) for path in root.glob(f"*{POINTER_SUFFIX}")]


def remove_collection(root: Path, collection: str, live: Path) -> None:
    """Remove every directory and pointer the collection has on disk."""
    shutil.rmtree(live)
    pointer_file(root, collection).unlink(missing_ok=True)
    live_directory(root, collection)  # leftovers


class BuildChildren:
    """The build children an index has running; killed when it closes, so that a gateway
    stopping never waits for a build."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[str]] = set()
        self._stopped = False

    def build(self, copy: Path, dense_dim: int, threshold_kb: int | None) -> bool:
        """Index the shard copied to `copy` in a child process; whether anything was built.
        IndexUnavailableError when the child fails or was killed."""
        command = [sys.executable, "-m", "ingest.edge_build", str(copy), f"--dense-dim={dense_dim}"]
        if threshold_kb is not None:
            command.append(f"--threshold-kb={threshold_kb}")
        with self._lock:
            if self._stopped:
                raise IndexUnavailableError("the index is closing: no build started")
            child = subprocess.Popen(  # noqa: S603 — this interpreter, this module, our path
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            self._running.add(child)
        try:
            out, err = child.communicate()
        finally:
            with self._lock:
                self._running.discard(child)
        if child.returncode != 0:
            last = (err.strip().splitlines() or ["no message"])[-1]
            raise IndexUnavailableError(f"index build failed (exit {child.returncode}): {last}")
        return out.strip().endswith("built")

    def stop(self) -> None:
        """Kill the running builds; start no more."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for child in running:
            child.kill()


def main(argv: Sequence[str] | None = None) -> int:
    from ingest.edge_shards import EdgeShards

    parser = argparse.ArgumentParser(prog="python -m ingest.edge_build")
    parser.add_argument("path", type=Path)
    parser.add_argument("--dense-dim", type=int, required=True)
    parser.add_argument("--threshold-kb", type=int, default=None)
    args = parser.parse_args(argv)
    os.nice(CHILD_NICENESS)
    shards = EdgeShards(
        args.path.parent, args.dense_dim, indexing_threshold_kb=args.threshold_kb, search_threads=1
    )
    built = shards.optimize_directory(args.path)
    if built:
        read_through(args.path)
    print("built" if built else "unchanged")  # noqa: T201 — read by BuildChildren.build
    return 0


def read_through(path: Path) -> None:
    """Read every file under `path` once, into the page cache: the serving process then
    loads the copy from memory rather than disk, and loading holds its GIL
    (docs/decisions/edge-index-builds.md)."""
    for part in sorted(path.rglob("*")):
        if part.is_file():
            with part.open("rb") as handle:
                while handle.read(_READ_CHUNK):
                    pass


def copy_shard(source: Path, target: Path) -> None:
    """Copy a shard's directory to `target` (which must not exist), keeping its files' holes.

    Edge sizes its log segments and storage pages ahead (32 MB files, mostly never
    written), and the file system keeps the unwritten parts as holes. A plain copy writes
    them out as zeros: the copy, which becomes the live shard after a swap, would take
    twice the disk, and copying it (while the collection's writes wait) would write it all.
    """
    try:
        shutil.copytree(source, target, copy_function=_copy_file_with_holes)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # a half copy only takes disk
        raise


def _copy_file_with_holes(source: str, target: str) -> None:
    with open(source, "rb") as reader, open(target, "wb") as writer:
        size = os.fstat(reader.fileno()).st_size
        for start, end in _data_extents(reader.fileno(), size):
            _copy_range(reader.fileno(), writer.fileno(), start, end)
        writer.truncate(size)  # a hole at the end stays one
    shutil.copystat(source, target)


def _data_extents(handle: int, size: int) -> list[tuple[int, int]]:
    """The (start, end) ranges of a file that hold data; the whole file where the platform
    or the file system cannot tell data from holes."""
    if not hasattr(os, "SEEK_DATA"):
        return [(0, size)]
    extents, offset = [], 0
    while offset < size:
        try:
            start = os.lseek(handle, offset, os.SEEK_DATA)
        except OSError as error:
            if error.errno == errno.ENXIO:  # only a hole from `offset` on
                break
            if error.errno == errno.EINVAL:  # a file system without the query
                return [(0, size)]
            raise
        end = os.lseek(handle, start, os.SEEK_HOLE)
        extents.append((start, end))
        offset = end
    return extents


def _copy_range(reader: int, writer: int, start: int, end: int) -> None:
    offset = start
    while offset < end:
        copied = _copy_some(reader, writer, offset, end)
        if copied == 0:  # the file shrank meanwhile: nothing more to copy
            return
        offset += copied


def _copy_some(reader: int, writer: int, offset: int, end: int) -> int:
    """Copy bytes from `offset` towards `end`; how many. In the kernel where it can (one
    call, which lets go of the GIL throughout), else through this process."""
    in_kernel = getattr(os, "copy_file_range", None)
    if in_kernel is not None:
        try:
            return int(in_kernel(reader, writer, end - offset, offset, offset))
        except OSError:  # not between these two files (another file system, say)
            pass
    chunk = os.pread(reader, min(_READ_CHUNK, end - offset), offset)
    return os.pwrite(writer, chunk, offset) if chunk else 0


def _generation(name: str, collection: str) -> int:
    suffix = name.removeprefix(f"{collection}{GENERATION_MARK}")
    return int(suffix) if suffix != name and suffix.isdigit() else 0


def _sync_directory(path: Path) -> None:
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


if __name__ == "__main__":
    raise SystemExit(main())
