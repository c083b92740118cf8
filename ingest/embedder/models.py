"""The dense models a deployment embeds with: its own (`KBGATE_EMBEDDING_MODEL`, the
bundled MiniLM by default), whose vectors are every collection's `dense`, and the others
knowledge bases migrate to or from (`gateway.admin.migration`), each with a named vector
set of its own, `dense_<slug>` (`ingest.index.dense_vector_name`).

Other models are loaded on first use, offline (`build_other_model`), and kept for the
process's life: one passage runner at background priority each, questions in the
caller's thread, as the deployment's own model runs them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from ingest.embedder.embedding import (
    MINILM_MODEL_NAME,
    MINILM_QUESTION_MODEL_NAME,
    Embedder,
    ModelUnavailableError,
)
from ingest.index import DENSE_VECTOR, dense_vector_name

#: model ids a migration may name without a model in the cache: bundled with kbgate
BUNDLED_MODELS = (MINILM_MODEL_NAME, MINILM_QUESTION_MODEL_NAME)
#: the longest model id taken (fastembed's names are far shorter)
MAX_MODEL_ID = 200


def model_slug(model_id: str) -> str:
    """The model's part of its vector set's name: lower-case letters and digits, runs of
    anything else one `_`."""
    slug = re.sub(r"[^a-z0-9]+", "_", model_id.lower()).strip("_")
    if not slug:
        raise ValueError(f"not a model id: {model_id!r}")
    return slug


def vector_of(model_id: str) -> str:
    """The named vector a KB's `embedding_model` answers from: `dense` for "" (the
    deployment's model), else the model's own set."""
    return DENSE_VECTOR if not model_id else dense_vector_name(model_slug(model_id))


class DenseModels:
    """The deployment's model and the others, by model id. Thread-safe."""

    def __init__(
        self,
        default: Embedder,
        default_id: str,
        load: Callable[[str], Embedder] | None = None,
    ) -> None:
        """`load` loads another model by id (None: only the deployment's is known)."""
        self.default = default
        self.default_id = default_id
        self._load = load
        self._loaded: dict[str, Embedder] = {default_id: default}
        self._lock = threading.Lock()

    def vector(self, model_id: str) -> str:
        """The named vector holding `model_id`'s vectors."""
        return vector_of("" if model_id == self.default_id else model_id)

    def loaded(self, model_id: str) -> Embedder | None:
        """The model if it is loaded already."""
        return self._loaded.get(model_id)

    def own(self, model_id: str) -> str:
        """A model id as a KB's `embedding_model` stores it: "" for the deployment's."""
        return "" if model_id in ("", self.default_id) else model_id

    def named(self, model_id: str) -> str:
        """A KB's `embedding_model` as a model id: the deployment's for ""."""
        return model_id or self.default_id

    def get(self, model_id: str) -> Embedder:
        """The model, loaded if needed (blocking: seconds). `ModelUnavailableError` when it
        cannot be loaded offline."""
        model_id = self.named(model_id)
        found = self._loaded.get(model_id)
        if found is not None:
            return found
        if self._load is None or not model_id or len(model_id) > MAX_MODEL_ID:
            raise ModelUnavailableError(f"no model {model_id!r} in this deployment")
        with self._lock:
            found = self._loaded.get(model_id)
            if found is None:
                found = self._load(model_id)
                self._loaded[model_id] = found
        return found

    def close(self) -> None:
        """Stop the other models' runners (the deployment's own is closed by its owner)."""
        for model_id, model in list(self._loaded.items()):
            close = getattr(model, "close", None)
            if model_id != self.default_id and callable(close):
                close()
