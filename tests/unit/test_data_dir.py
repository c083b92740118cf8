"""One process per embedded data dir: the lock file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.runtime.data_dir import DataDirInUseError, hold_data_dir
from settings.config import load_config


def test_a_held_data_dir_is_refused_naming_the_holder_until_released(tmp_path: Path) -> None:
    """A second hold on a held data dir raises, naming the holder's pid and command; after
    release the data dir can be held again."""
    config = load_config({}, data_dir=tmp_path / "data")
    first = hold_data_dir(config, "serve")
    assert first is not None
    with pytest.raises(
        DataDirInUseError, match=r"in use by another process \(pid \d+, kbgate serve"
    ):
        hold_data_dir(config, "ingest")
    first.release()
    again = hold_data_dir(config, "ingest")
    assert again is not None
    again.release()


def test_deployed_replicas_share_a_data_dir(tmp_path: Path) -> None:
    """With both a Qdrant server and Redis configured nothing is stored in the data dir,
    so no lock is taken; with only one of them, the embedded store still needs it."""
    deployed = load_config(
        {"KBGATE_QDRANT_URL": "http://q:6333", "KBGATE_REDIS_URL": "redis://r:6379/0"},
        data_dir=tmp_path,
    )
    assert hold_data_dir(deployed, "serve") is None
    assert hold_data_dir(deployed, "serve") is None
    half = load_config({"KBGATE_QDRANT_URL": "http://q:6333"}, data_dir=tmp_path)
    held = hold_data_dir(half, "serve")
    assert held is not None
    with pytest.raises(DataDirInUseError):
        hold_data_dir(half, "serve")
    held.release()
