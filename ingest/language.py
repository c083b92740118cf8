"""Which language a passage or a question is written in: py3langid (langid.py's model,
shipped in its wheel: nothing is downloaded), restricted to `LANGUAGES`.

The model is read on first use (about 2 s), once per detector; a detection is a
fraction of a millisecond per passage (`bench/language_cost.py`). A text with fewer
than `MIN_LETTERS` letters, or whose best language is less likely than `MIN_PROBABILITY`,
has no language (None): too little to tell.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from py3langid.langid import LanguageIdentifier  # type: ignore[import-untyped]  # py3langid ships no type hints

#: ISO 639-1 codes the detector chooses among: the languages most documents are written
#: in. Without a restriction the model also answers rarer neighbours (Occitan for a
#: short Spanish sentence).
LANGUAGES: tuple[str, ...] = (
    "ar", "bg", "cs", "da", "de", "el", "en", "es", "et", "fa", "fi", "fr", "he", "hi",
    "hr", "hu", "id", "it", "ja", "ko", "lt", "lv", "ms", "nl", "no", "pl", "pt", "ro",
    "ru", "sk", "sl", "sr", "sv", "th", "tr", "uk", "vi", "zh",
)  # fmt: skip
MIN_LETTERS = 12
MIN_PROBABILITY = 0.5


class LanguageDetector:
    """Detects languages offline; thread-safe, the model loaded on first use."""

    def __init__(self, languages: tuple[str, ...] = LANGUAGES) -> None:
        self._languages = languages
        self._identifier: LanguageIdentifier | None = None
        self._lock = threading.Lock()

    @classmethod
    def loaded(cls) -> LanguageDetector:
        """A detector with its model read now (a start's work, beside the other models)."""
        detector = cls()
        detector._model()
        return detector

    def _model(self) -> LanguageIdentifier:
        with self._lock:
            if self._identifier is None:
                identifier = _read_identifier()
                identifier.set_languages(list(self._languages))
                self._identifier = identifier
            return self._identifier

    def detect(self, text: str) -> str | None:
        """The text's ISO 639-1 code, or None when it is too short or unclear."""
        if sum(character.isalpha() for character in text) < MIN_LETTERS:
            return None
        code, probability = self._model().classify(text)
        return str(code) if float(probability) >= MIN_PROBABILITY else None

    def detect_many(self, texts: list[str]) -> list[str | None]:
        return [self.detect(text) for text in texts]


def _read_identifier() -> LanguageIdentifier:
    """py3langid's model read in memory. Its own loader (`from_model_file`) decompresses
    through a temporary file, which a read-only root filesystem (the container image)
    refuses; the uncompressed model (about 68 MB) lives only while it is read."""
    import io
    import lzma

    import numpy as np
    from py3langid.langid import MODEL_DIR, MODEL_FILE, LanguageIdentifier

    # py3langid ships no type hints; _to_array is its loader's own conversion of the arrays
    from py3langid.modelio import _to_array  # type: ignore[import-untyped]

    with lzma.open(MODEL_DIR / MODEL_FILE) as source:
        buffer = io.BytesIO(source.read())
    with np.load(buffer, allow_pickle=False) as data:
        return LanguageIdentifier(
            np.asarray(data["ptc"]),
            np.asarray(data["pc"]),
            data["classes"].tolist(),
            _to_array(data["nextmove"]),
            data["out_feat"].tolist(),
            norm_probs=True,
            tk_row=_to_array(data["nextmove_row"]),
        )
