"""Fixtures of the integration suite's tests that start `kbgate` processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.embedder.embedding import Embedder


@pytest.fixture
def model_env(model_dir: Path, embedder: Embedder) -> dict[str, str]:
    """The model folder the shared embedder assembled, so each process reuses it."""
    assert embedder.dense_dim > 0
    return {"KBGATE_EMBEDDING_THREADS": "1", "KBGATE_MODEL_CACHE_DIR": str(model_dir)}
