"""A search reveals nothing about what lies outside its Scope: not by its keyword scores,
and not by the work it does (the code path, hence its cost and timing).

On Qdrant Edge (the embedded default), with synthetic vectors as in the Index contract.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.index import org_collection
from ingest.payload import Classification
from tests.integration.test_index_contract import (
    DIM,
    ORG,
    axis,
    document_leg,
    keyword_leg,
    passage,
    scope,
    with_document_terms,
)

REPO_ROOT = str(Path(__file__).resolve().parents[2])


def _traced(call: Callable[[], Any]) -> tuple[Any, list[str]]:
    """Run `call` in this thread, recording every function it enters: kbgate's own Python
    functions by name and every C function (the engine binding's calls among them)."""
    path: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(REPO_ROOT):
            path.append(frame.f_code.co_qualname)
        elif event == "c_call":
            path.append(f"c:{getattr(arg, '__qualname__', repr(arg))}")

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return result, path


def _ranking(
    index: BlockingIndex, collection: str
) -> tuple[list[list[tuple[str, float]]], list[str]]:
    """The turn's ranking call (dense, passage keyword, document keyword legs) for an
    internal-clearance caller: each leg's (point, score), and the code path it took.
    Run once untraced first, so that per-write state is settled in both runs alike."""
    caller = scope(clearance=Classification.INTERNAL)
    legs = [keyword_leg(1, 2), document_leg(1, 2)]

    def rank() -> Any:
        return index.rank(collection, caller, legs)

    rank()
    result, path = _traced(rank)
    scores = [[(point.point_id, point.score) for point in leg] for leg in result.legs]
    return scores, path


def test_a_document_above_the_callers_clearance_changes_neither_scores_nor_code_path(
    tmp_path: Path,
) -> None:
    """Adding a restricted document to the caller's own KB (one the caller cannot see)
    leaves the caller's keyword scores and the ranking call's code path exactly as they
    were: no cheaper path is taken when the workspace holds nothing outside the Scope, so
    neither scores nor timing tell that documents above the caller's clearance exist."""
    index = BlockingIndex(EdgeIndex(tmp_path, dense_dim=DIM))
    collection = org_collection(ORG)
    try:
        visible = [
            with_document_terms(passage(doc=f"doc{k}", idx=0, terms=(1, 10 + k)), 1, 10 + k)
            for k in range(4)
        ]
        visible.append(passage(doc="doc9", idx=0, terms=(2,), dense=axis(1)))
        index.upsert(collection, visible)
        scores_before, path_before = _ranking(index, collection)

        secret = passage(doc="secret", idx=0, terms=(1, 2), label=Classification.RESTRICTED)
        index.upsert(collection, [with_document_terms(secret, 1, 2)])
        scores_after, path_after = _ranking(index, collection)
    finally:
        index.close()

    assert scores_before, "the ranking call ran"
    assert all(scores_before), "every leg finds the visible documents"
    assert scores_after == scores_before
    assert path_after == path_before
