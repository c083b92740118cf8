"""A large collection's indexed copy loaded and served by a host process
(`ingest.edge_host`), so that the gateway never stops for its load. Real Edge shards in
real host processes; small synthetic vectors (8-d), an indexing threshold of 1 KB and a
host from the first point, so that a few hundred points take the whole path."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from gateway.runtime.services import build_index, for_a_command
from ingest.edge_host import EdgeHost
from ingest.index import IndexBuilds, IndexUnavailableError, org_collection
from ingest.qdrant_edge import EDGE_DIR, EdgeIndex
from settings.config import load_config
from tests.integration.test_edge_build import COLLECTION, _passages, build_on_a_thread
from tests.integration.test_index_contract import (  # the contract suite's data
    DIM,
    dense_leg,
    hit_ids,
    random_unit,
    scope,
)


class _Hosting(EdgeIndex):
    """Edge that hands every indexed copy to a host, and runs `during` after the child
    built the copy, before the host starts: what the gateway does meanwhile."""

    def __init__(self, data_dir: Path, *, host_from_points: int = 1) -> None:
        super().__init__(
            data_dir, dense_dim=DIM, indexing_threshold_kb=1, host_from_points=host_from_points
        )
        self.during: Callable[[EdgeIndex], object] = lambda index: None
        builds = self._shards._builds
        build = builds.build

        def hooked(copy: Path, dense_dim: int, threshold_kb: int | None) -> bool:
            built = build(copy, dense_dim, threshold_kb)
            self.during(self)
            return built

        builds.build = hooked  # type: ignore[method-assign]  # the test's hook


def _hosted_and_due(index: _Hosting, rng: random.Random) -> EdgeHost:
    """200 points in the collection: 100 moved to a host by a first build, 100 written to
    the host since, enough for the next build. The host."""
    index.upsert(COLLECTION, _passages(0, 100, rng))
    assert index.index_written().collections == (COLLECTION,)
    host = index._shards.host_of(COLLECTION)
    assert host is not None
    index.upsert(COLLECTION, _passages(100, 100, rng))
    return host


def _reopened_holds(data_dir: Path, points: int) -> None:
    """The next process (no host) opens the collection's one directory with `points`."""
    again = EdgeIndex(data_dir, dense_dim=DIM, indexing_threshold_kb=1)
    try:
        assert again.count(COLLECTION, scope()) == points
        assert sorted(p.name for p in (data_dir / EDGE_DIR).iterdir()) == [COLLECTION]
    finally:
        again.close()


def _catch_up_fails(*args: Any) -> None:
    raise IndexUnavailableError("simulated: the indexed copy differs")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def index(data_dir: Path) -> Iterator[_Hosting]:
    with closing(_Hosting(data_dir)) as hosting:
        yield hosting


def test_the_indexed_copy_is_served_by_a_host_with_every_write(
    index: _Hosting, data_dir: Path
) -> None:
    """After the build the collection is served by a host process that holds the points
    written before the copy and those written and deleted while the child built it; no
    load stopped this process; searches and writes go to the host."""
    rng = random.Random(21)
    index.upsert(COLLECTION, _passages(0, 200, rng))
    late = _passages(200, 20, rng)

    def meanwhile(during: EdgeIndex) -> None:
        during.upsert(COLLECTION, late)
        during.delete_document(COLLECTION, scope(), "doc0")

    index.during = meanwhile
    builds = index.index_written()
    assert builds == IndexBuilds((COLLECTION,), 0.0)  # loaded by the host, not here
    host = index._shards.host_of(COLLECTION)
    assert host is not None
    assert host.load_ms > 0
    assert index.count(COLLECTION, scope()) == 219
    assert hit_ids(index, COLLECTION, scope(), dense_leg(late[-1].dense, limit=1)) == [
        [late[-1].point_id]
    ]
    index.upsert(COLLECTION, _passages(220, 5, rng))
    assert index.count(COLLECTION, scope()) == 224
    assert index.index_written() == IndexBuilds()  # nothing due since


def test_a_hosted_collection_is_built_into_a_new_host_with_every_write(
    index: _Hosting, data_dir: Path
) -> None:
    """A hosted collection written enough is indexed beside its host and handed to a new
    host loaded with the copy, with the writes and deletions made during the build; the
    old host exits and its directory goes; no load stopped this process."""
    rng = random.Random(31)
    first = _hosted_and_due(index, rng)
    late = _passages(200, 20, rng)

    def meanwhile(during: EdgeIndex) -> None:
        during.upsert(COLLECTION, late)
        during.delete_document(COLLECTION, scope(), "doc0")

    index.during = meanwhile
    assert index.index_written() == IndexBuilds((COLLECTION,), 0.0)
    second = index._shards.host_of(COLLECTION)
    assert second is not None
    assert second is not first
    assert not first.alive
    assert not first.path.exists()
    assert second.path.exists()
    assert index.count(COLLECTION, scope()) == 219
    assert hit_ids(index, COLLECTION, scope(), dense_leg(late[-1].dense, limit=1)) == [
        [late[-1].point_id]
    ]
    index.upsert(COLLECTION, _passages(220, 5, rng))
    assert index.count(COLLECTION, scope()) == 224
    index.close()
    _reopened_holds(data_dir, 224)


def test_a_write_sent_while_the_collection_changes_hosts_lands_in_the_new_one(
    index: _Hosting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that reaches the old host after it handed the collection over is refused
    there, waits for the move and lands in the new host; reads go on meanwhile."""
    rng = random.Random(32)
    _hosted_and_due(index, rng)
    shards = index._shards
    catch_up = shards._catch_up
    late = _passages(200, 1, rng)
    writer = threading.Thread(target=index.upsert, args=(COLLECTION, late))
    counted: list[int] = []

    def handed_over(*args: Any) -> None:
        writer.start()
        time.sleep(0.3)  # the write reaches the old host, which refuses it
        counted.append(index.count(COLLECTION, scope()))  # reads still answered
        catch_up(*args)

    monkeypatch.setattr(shards, "_catch_up", handed_over)
    assert index.index_written().collections == (COLLECTION,)
    writer.join(30)
    assert counted == [200]
    assert index.count(COLLECTION, scope()) == 201
    assert hit_ids(index, COLLECTION, scope(), dense_leg(late[0].dense, limit=1)) == [
        [late[0].point_id]
    ]


def test_a_move_between_hosts_given_up_leaves_the_old_host_serving(
    index: _Hosting, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the new host cannot catch up, the old one takes writes again, the new one is
    stopped and its copy removed: nothing written is lost."""
    rng = random.Random(33)
    first = _hosted_and_due(index, rng)
    monkeypatch.setattr(index._shards, "_catch_up", _catch_up_fails)
    with pytest.raises(IndexUnavailableError):
        index.index_written()
    assert index._shards.host_of(COLLECTION) is first
    index.upsert(COLLECTION, _passages(200, 3, rng))
    assert index.count(COLLECTION, scope()) == 203
    assert [p for p in (data_dir / EDGE_DIR).iterdir() if p.is_dir()] == [first.path]


def test_a_hosted_collection_dropped_during_its_build_stays_dropped(
    index: _Hosting, data_dir: Path
) -> None:
    """A hosted collection dropped while its copy is built is not brought back: the build
    ends without a swap or an error, and no host or directory is left."""
    rng = random.Random(35)
    _hosted_and_due(index, rng)
    index.during = lambda during: during.drop_collection(COLLECTION)
    assert index.index_written() == IndexBuilds()
    assert index._shards.host_of(COLLECTION) is None
    assert list((data_dir / EDGE_DIR).iterdir()) == []
    assert index.count(COLLECTION, scope()) == 0


def test_an_old_host_that_cannot_take_its_writes_back_is_started_again(
    index: _Hosting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the move to a new host is given up and the old host does not answer the call
    that gives it its writes back, it is stopped, and started again on its directory at
    the next call, which takes writes: nothing written is lost, no write is refused."""
    rng = random.Random(37)
    first = _hosted_and_due(index, rng)
    call = EdgeHost.call

    def no_take_back(host: EdgeHost, method: str, *args: Any) -> Any:
        if method == "take_back":
            raise IndexUnavailableError("simulated: the host did not answer")
        return call(host, method, *args)

    monkeypatch.setattr(index._shards, "_catch_up", _catch_up_fails)
    monkeypatch.setattr(EdgeHost, "call", no_take_back)
    with pytest.raises(IndexUnavailableError):
        index.index_written()
    assert not first.alive
    index.upsert(COLLECTION, _passages(200, 3, rng))
    assert index.count(COLLECTION, scope()) == 203
    again = index._shards.host_of(COLLECTION)
    assert again is not None
    assert again is not first


def test_a_start_hands_its_large_collections_to_hosts(data_dir: Path) -> None:
    """After the start's indexing, a collection of `host_from_points` points or more is
    served by a host, with every point, and takes writes there; a smaller one stays in
    this process."""
    small = org_collection("small")
    rng = random.Random(34)
    with closing(_Hosting(data_dir, host_from_points=150)) as writer:
        writer.upsert(COLLECTION, _passages(0, 200, rng))
        writer.upsert(small, _passages(0, 50, rng))
    with closing(_Hosting(data_dir, host_from_points=150)) as index:
        assert index.optimize() == [COLLECTION, small]
        assert index._shards.host_of(COLLECTION) is not None
        assert index._shards.host_of(small) is None
        assert index.count(COLLECTION, scope()) == 200
        index.upsert(COLLECTION, _passages(200, 2, rng))
        assert index.count(COLLECTION, scope()) == 202
        assert index.count(small, scope()) == 50


def test_the_hosted_collection_is_back_in_process_after_a_restart(
    index: _Hosting, data_dir: Path
) -> None:
    """Closing stops the host, which flushes; the next process opens the swapped
    generation itself, with every point, until its start hands it to a host again."""
    rng = random.Random(22)
    index.upsert(COLLECTION, _passages(0, 100, rng))
    assert index.index_written().collections == (COLLECTION,)
    index.upsert(COLLECTION, _passages(100, 3, rng))
    index.close()
    _reopened_holds(data_dir, 103)


def test_reads_and_writes_go_on_while_the_collection_moves_to_its_host(
    index: _Hosting,
) -> None:
    """Searches and writes made throughout the build and the move land and answer: a
    writer that waited for the shard while it moved is sent on to the host."""
    rng = random.Random(23)
    index.upsert(COLLECTION, _passages(0, 1000, rng))
    builder, done, outcome = build_on_a_thread(index)
    written = 1000
    while not done.is_set():
        hit_ids(index, COLLECTION, scope(), dense_leg(random_unit(rng), limit=5))
        index.upsert(COLLECTION, _passages(written, 1, rng))
        written += 1
    builder.join()
    assert outcome == [(COLLECTION,)]
    assert index._shards.host_of(COLLECTION) is not None
    assert index.count(COLLECTION, scope()) == written


def test_a_hosted_collection_dropped_is_gone_with_its_host(index: _Hosting, data_dir: Path) -> None:
    """Dropping a hosted collection removes its points and directories and stops its
    host."""
    index.upsert(COLLECTION, _passages(0, 100, random.Random(24)))
    assert index.index_written().collections == (COLLECTION,)
    assert index.drop_collection(COLLECTION) == 100
    assert index._shards.host_of(COLLECTION) is None
    assert list((data_dir / EDGE_DIR).iterdir()) == []
    assert index.count(COLLECTION, scope()) == 0


def test_a_dead_host_is_started_again_with_every_point(index: _Hosting) -> None:
    """A host that died is started again on the collection's directory at the next call,
    which answers from every point written before."""
    index.upsert(COLLECTION, _passages(0, 100, random.Random(25)))
    assert index.index_written().collections == (COLLECTION,)
    index.upsert(COLLECTION, _passages(100, 4, random.Random(28)))
    host = index._shards.host_of(COLLECTION)
    assert host is not None
    host._process.kill()
    host._process.wait()
    assert index.count(COLLECTION, scope()) == 104
    again = index._shards.host_of(COLLECTION)
    assert again is not None
    assert again is not host
    assert again.alive


def _killed(index: _Hosting, points: int, seed: int) -> EdgeHost:
    """`points` points in the collection, served by a host that is then killed."""
    index.upsert(COLLECTION, _passages(0, points, random.Random(seed)))
    assert index.index_written().collections == (COLLECTION,)
    host = index._shards.host_of(COLLECTION)
    assert host is not None
    host._process.kill()
    host._process.wait()
    return host


def test_the_upkeep_round_starts_a_dead_host_again_and_says_so(index: _Hosting) -> None:
    """An upkeep round (`index_written`) starts again a host that died, counts it, and
    builds nothing when nothing is due; the next round has nothing to start."""
    dead = _killed(index, 100, 32)
    assert index.index_written() == IndexBuilds(hosts_started_again=1)
    again = index._shards.host_of(COLLECTION)
    assert again is not None
    assert again is not dead
    assert again.alive
    assert index.index_written() == IndexBuilds()
    assert index.count(COLLECTION, scope()) == 100


def test_a_dead_host_that_will_not_start_again_fails_its_collection_alone(
    index: _Hosting, data_dir: Path
) -> None:
    """A dead host whose directory is gone fails the upkeep round (after the round tried
    every collection) and its collection's calls, each time, never serving it empty; the
    index still answers the readiness check, so the other collections stay served."""
    _killed(index, 100, 33)
    for generation in (data_dir / EDGE_DIR).glob(f"{COLLECTION}~*"):
        shutil.rmtree(generation)
    for _ in range(2):
        with pytest.raises(IndexUnavailableError):
            index.index_written()
        with pytest.raises(IndexUnavailableError):
            index.count(COLLECTION, scope())
    index.ping()
    other = org_collection("other")
    index.upsert(other, _passages(0, 3, random.Random(34)))
    assert index.count(other, scope()) == 3


def test_a_host_that_cannot_start_again_answers_unavailable(
    index: _Hosting, data_dir: Path
) -> None:
    """A dead host whose directory is gone answers the engine unavailable (503 at the
    edge), never an empty collection."""
    index.upsert(COLLECTION, _passages(0, 100, random.Random(29)))
    assert index.index_written().collections == (COLLECTION,)
    host = index._shards.host_of(COLLECTION)
    assert host is not None
    host._process.kill()
    host._process.wait()
    for generation in (data_dir / EDGE_DIR).glob(f"{COLLECTION}~*"):
        shutil.rmtree(generation)
    with pytest.raises(IndexUnavailableError):
        index.count(COLLECTION, scope())


def test_a_host_ends_when_its_gateway_dies_without_stopping_it(data_dir: Path) -> None:
    """A gateway killed outright leaves no host behind holding the collection: the host
    sees its pipes close, flushes and exits, and the next process opens the collection
    with every point."""
    script = textwrap.dedent(
        f"""
        import os, random
        from pathlib import Path
        from ingest.qdrant_edge import EdgeIndex
        from tests.integration.test_edge_build import _passages, COLLECTION, DIM
        index = EdgeIndex(Path({str(data_dir)!r}), dense_dim=DIM, indexing_threshold_kb=1,
                          host_from_points=1)
        index.upsert(COLLECTION, _passages(0, 100, random.Random(26)))
        assert index.index_written().collections == (COLLECTION,)
        index.upsert(COLLECTION, _passages(100, 2, random.Random(27)))
        print(index._shards.host_of(COLLECTION)._process.pid, flush=True)
        os._exit(0)  # no close: the hosts are not stopped
        """
    )
    done = subprocess.run(  # noqa: S603 — this interpreter, the test's own script
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    host_pid = int(done.stdout.split()[-1])
    deadline = time.monotonic() + 30
    while _alive(host_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(host_pid)
    again = EdgeIndex(data_dir, dense_dim=DIM, indexing_threshold_kb=1)
    try:
        assert again.count(COLLECTION, scope()) == 102
    finally:
        again.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its dead parent's reaper) counts as gone
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" not in status.read_text()


def test_a_call_that_waited_while_its_collection_got_a_host_goes_to_the_host(
    data_dir: Path,
) -> None:
    """A call for a collection not open here that waits for the shards' lock while the
    collection is handed to a host is sent to the host: it never opens the directory the
    host holds."""
    with closing(_Hosting(data_dir)) as writer:
        writer.upsert(COLLECTION, _passages(0, 100, random.Random(36)))
    with closing(_Hosting(data_dir)) as index:
        shards = index._shards
        counted: list[int] = []
        with shards._lock:
            caller = threading.Thread(
                target=lambda: counted.append(index.count(COLLECTION, scope()))
            )
            caller.start()
            time.sleep(0.3)  # the call waits for the lock
            shards._hosts[COLLECTION] = shards._host(COLLECTION, data_dir / EDGE_DIR / COLLECTION)
        caller.join(30)
        assert counted == [100]
        assert COLLECTION not in shards._shards


def test_a_command_on_the_data_dir_hands_no_collection_to_a_host(tmp_path: Path) -> None:
    """A command that opens the data dir and exits (`for_a_command`) keeps its collections
    in its own process whatever `KBGATE_EDGE_HOST_FROM_POINTS` says; the gateway's config
    hosts them."""
    config = load_config({"KBGATE_DATA_DIR": str(tmp_path), "KBGATE_EDGE_HOST_FROM_POINTS": "1"})
    for chosen, hosts_from in ((config, 1), (for_a_command(config), None)):
        index, _ = build_index(chosen)
        try:
            assert isinstance(index, EdgeIndex)
            assert index._shards._host_from_points == hosts_from
        finally:
            index.close()
