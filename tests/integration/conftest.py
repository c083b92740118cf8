"""Fixtures shared by the integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.embedding import FastEmbedder, build_embedder


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the real model is assembled once per session (processes started by tests reuse it
    through KBGATE_MODEL_CACHE_DIR)."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def embedder(model_dir: Path) -> FastEmbedder:
    """The real embedding model (assembled offline), loaded once per test session."""
    return build_embedder(model_dir=model_dir, model_name=None, threads=None)
