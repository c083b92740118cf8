"""Which vector set a model's vectors live in, and the models a deployment loads."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ingest.embedder.embedding import Embedding, ModelUnavailableError
from ingest.embedder.models import DenseModels, model_slug, vector_of
from ingest.index import DENSE_VECTOR, SparseVector, is_dense_vector


class _Model:
    """A stand-in model: its name is all the catalogue needs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    @property
    def dense_dim(self) -> int:
        return 4

    def embed_documents(
        self, texts: Sequence[str], *, lane: str = "", inline: bool = False
    ) -> list[Embedding]:
        return [Embedding((1.0, 0.0, 0.0, 0.0), SparseVector((), ())) for _ in texts]

    def embed_queries(self, texts: Sequence[str]) -> list[Embedding]:
        return self.embed_documents(texts)

    def embed_document_keywords(self, texts: Sequence[str]) -> list[SparseVector]:
        return [SparseVector((), ()) for _ in texts]

    def close(self) -> None:
        self.closed = True


def test_each_model_has_a_vector_set_of_its_own_and_the_deployments_is_dense() -> None:
    """The deployment's model ("" in a KB's record) answers from `dense`; another model
    from `dense_<slug>`, its id folded to lower-case letters, digits and `_`; an id with
    nothing to keep is refused."""
    assert vector_of("") == DENSE_VECTOR
    assert vector_of("kbgate/all-MiniLM-L6-v2-int8-questions") == (
        "dense_kbgate_all_minilm_l6_v2_int8_questions"
    )
    assert is_dense_vector(vector_of("BAAI/bge-small-en-v1.5"))
    assert model_slug("Org/Model--v2") == "org_model_v2"
    with pytest.raises(ValueError, match="not a model id"):
        model_slug("///")


def test_other_models_load_once_on_first_use_and_only_they_are_closed() -> None:
    """The catalogue hands out the deployment's model under its id or "", loads another on
    first use and keeps it, refuses a model its loader cannot load, and closes only the
    models it loaded."""
    own = _Model("own")
    loads: list[str] = []

    def load(name: str) -> _Model:
        loads.append(name)
        if name == "missing":
            raise ModelUnavailableError(name)
        return _Model(name)

    models = DenseModels(own, "own/model", load)
    assert models.get("") is own
    assert models.get("own/model") is own
    assert models.vector("own/model") == DENSE_VECTOR
    assert models.own("own/model") == ""
    assert models.named("") == "own/model"
    other = models.get("other")
    assert models.get("other") is other
    assert loads == ["other"]
    with pytest.raises(ModelUnavailableError):
        models.get("missing")
    models.close()
    assert isinstance(other, _Model)
    assert other.closed
    assert not own.closed
    assert DenseModels(own, "own/model").loaded("other") is None
