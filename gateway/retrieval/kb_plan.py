"""One KB's part of a turn, as `gateway.retrieval.plan` makes it: where its passages
live, under which Scope, with which limits. Read by the legs, the answering rules and the
off-topic lines' measurement."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.index import DENSE_VECTOR
from ingest.payload import Scope
from settings.records import KnowledgeBase
from settings.resolve import Resolved


@dataclass(frozen=True, slots=True)
class KbPlan:
    """One KB's part of a turn: where, under which Scope, with which limits."""

    kb: KnowledgeBase
    scope: Scope
    #: where the KB's passages live (`collection_for` its storage and org)
    collection: str
    top_k: Resolved[int]
    #: the KB answers when its best dense passage reaches it (or its keywords their floor)
    score_threshold: Resolved[float]
    keyword_floor: float
    dense_weight: float
    keyword_weight: float
    #: drop passages that copy a better-ranked one (`gateway.retrieval.diversity`)
    drop_copies: bool = True
    #: dense passages below it never count (None: `score_threshold`); lower than it only
    #: under a measured line above the platform default, which decides whether the KB
    #: answers and leaves the passages the default keeps (`gateway.retrieval.off_topic_line`)
    dense_cut: float | None = None
    #: under measured lines, a question below `score_threshold` is still answered when its
    #: `gateway.retrieval.answering.joint_score` reaches it (None: no joint line)
    joint_line: float | None = None
    #: the dense model the KB answers from ("": the deployment's) and its named vector
    dense_model: str = ""
    dense_vector: str = DENSE_VECTOR
    #: the question and its variations embedded by `dense_model`, when it is not the
    #: deployment's (a turn embeds them once per model in use: `with_question_vectors`)
    question_dense: tuple[tuple[float, ...], ...] | None = None

    @property
    def dense_floor(self) -> float:
        """What each dense passage must reach to count."""
        return self.score_threshold.value if self.dense_cut is None else self.dense_cut
