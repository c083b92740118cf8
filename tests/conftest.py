"""Fixtures every test package shares: the async backend and the real embedding model.
Fixtures used by one package live in that package's conftest or beside its tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.embedder.embedding import FastEmbedder, build_embedder
from tests.support.redis_server import RedisServer


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `ci` (slow operational checks) run where `CI` is set, as `.ci/run` sets
    it; elsewhere they are skipped, saying how to run them."""
    if os.environ.get("CI"):
        return
    skip = pytest.mark.skip(reason="a slow operational check: runs with CI=true (as .ci/run)")
    for item in items:
        if "ci" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """asyncio for every async test and fixture; session-scoped so session fixtures may be async."""
    return "asyncio"


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the real model is assembled once per session (processes started by tests reuse it
    through KBGATE_MODEL_CACHE_DIR)."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def embedder(model_dir: Path) -> FastEmbedder:
    """The real embedding model (assembled offline), loaded once per test session."""
    return build_embedder(model_dir=model_dir, model_name=None, threads=None)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server of the test's own, stopped after it (fails in CI when missing)."""
    with RedisServer(tmp_path / "redis") as server:
        yield server
