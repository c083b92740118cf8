"""Language detection: offline, restricted to the common languages, and started without a
writable temporary directory (the container image's read-only root filesystem)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from ingest.language import LanguageDetector


def test_the_model_loads_without_a_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """py3langid's own loader writes a temporary file; the detector reads its model in
    memory, so a start with no usable temporary directory still detects languages."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    detector = LanguageDetector.loaded()
    assert detector.detect("The package now builds reproducibly on every architecture.") == "en"
    assert detector.detect("Le paquet se construit désormais de façon reproductible.") == "fr"
    assert detector.detect("ok") is None
