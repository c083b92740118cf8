"""A deterministic stand-in for the Embedder, for unit tests of pure logic.

Dense: a unit vector drawn from the text's hash (same text, same vector; different
texts, nearly orthogonal). Sparse: one index per lowercased word (a stable hash),
valued by its count in documents and 1 in queries, as BM25 does. No model is loaded.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence

from ingest.embedder.embedding import Embedding
from ingest.index import SparseVector

_WORD = re.compile(r"\w+")


class FakeEmbedder:
    """Same interface as `ingest.embedder.embedding.FastEmbedder`; records how many texts it
    embedded."""

    def __init__(self, dense_dim: int = 384) -> None:
        self._dense_dim = dense_dim
        self.calls = 0

    @property
    def dense_dim(self) -> int:
        return self._dense_dim

    def embed_documents(self, texts: Sequence[str], *, lane: str = "") -> list[Embedding]:
        self.calls += len(texts)
        return [Embedding(self._dense(text), _sparse(text, query=False)) for text in texts]

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        self.calls += len(texts)
        return [Embedding(self._dense(text), _sparse(text, query=True)) for text in texts]

    def embed_document_keywords(self, texts: Sequence[str]) -> list[SparseVector]:
        return [_sparse(text, query=False) for text in texts]

    def _dense(self, text: str) -> tuple[float, ...]:
        raw: list[float] = []
        counter = 0
        while len(raw) < self._dense_dim:
            block = hashlib.sha256(f"{counter}:{text}".encode()).digest()
            raw.extend(byte / 127.5 - 1.0 for byte in block)
            counter += 1
        values = raw[: self._dense_dim]
        norm = math.sqrt(sum(v * v for v in values)) or 1.0
        return tuple(v / norm for v in values)


def token_id(word: str) -> int:
    """The sparse index of a word: stable across runs (unlike `hash`), within u32."""
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")


def _sparse(text: str, *, query: bool) -> SparseVector:
    counts = Counter(token_id(word) for word in _WORD.findall(text.lower()))
    indices = tuple(sorted(counts))
    values = tuple(1.0 if query else float(counts[i]) for i in indices)
    return SparseVector(indices=indices, values=values)


class FailingEmbedder:
    """Stands in for a broken model: every call raises."""

    dense_dim = 384

    def embed_documents(self, texts: Sequence[str], *, lane: str = "") -> list[Embedding]:
        raise RuntimeError("model unavailable")

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        raise RuntimeError("model unavailable")

    def embed_document_keywords(self, texts: Sequence[str]) -> list[SparseVector]:
        raise RuntimeError("model unavailable")
