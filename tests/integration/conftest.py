"""Fixtures shared by the integration tests."""

from __future__ import annotations

import pytest

from ingest.embedding import FastEmbedder, build_embedder


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> FastEmbedder:
    """The real embedding model (assembled offline), loaded once per test session."""
    model_dir = tmp_path_factory.mktemp("models")
    return build_embedder(model_dir=model_dir, model_name=None, threads=None, batch_size=16)
