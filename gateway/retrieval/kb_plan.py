"""One KB's part of a turn, as `gateway.retrieval.plan` makes it: where its passages
live, under which Scope, with which limits. Read by the legs, the answering rules and the
off-topic lines' measurement."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.index import DENSE_VECTOR
from ingest.payload import Scope
from settings.records import KnowledgeBase
from settings.resolve import Resolved

#: A Scope whose everyday questions come no nearer than this to any of its passages
#: (`gateway.retrieval.off_topic_line.Lines.reach`: the probes' sixth nearest topic's best
#: cosine, before the line's bounds) holds text the language model reads poorly:
#: changelogs, release notes, code. Prose KBs measure 0.42 (SciFact) to 0.55, Debian's
#: changelogs 0.29-0.32. There the line sits at its floor, far above what the probes reach,
#: and says little about another product's questions; the channels weigh alike
#: (`gateway.retrieval.plan.with_reach`) and the KB's words decide a close question
#: (`gateway.retrieval.answering.unknown_words`).
LOW_REACH = 0.36
#: ... and whose passages are technical text: at least this share of their words sit in
#: identifiers (`ingest.keyword_terms.identifier_share`; `Lines.identifiers`). Prose
#: measures 0.02 to 0.05, Debian's changelogs 0.13 to 0.15. A small prose KB measures a
#: reach as low as the changelogs' (TREC's 544-passage subset 0.33, SciFact's 0.31: the
#: nearest of fewer passages is farther), where weighing the channels alike costs it.
IDENTIFIER_SHARE = 0.08


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
    #: the channel weights are the platform's (no KB sets `fusion`): the KB's measured
    #: reach may set them (`gateway.retrieval.plan.with_reach`)
    platform_fusion: bool = False
    #: the whole-document keyword leg's share of the keyword weight (None: the platform's,
    #: `gateway.retrieval.legs.DOCUMENT_KEYWORD_SHARE`)
    document_keyword_share: float | None = None
    #: drop passages that copy a better-ranked one (`gateway.retrieval.diversity`)
    drop_copies: bool = True
    #: dense passages below it never count (None: `score_threshold`); lower than it only
    #: under a measured line above the platform default, which decides whether the KB
    #: answers and leaves the passages the default keeps (`gateway.retrieval.off_topic_line`)
    dense_cut: float | None = None
    #: how near everyday questions come to the Scope's passages (`Lines.reach`; None: not
    #: measured, or lines off)
    reach: float | None = None
    #: the share of the Scope's words in identifiers (`Lines.identifiers`; None: not
    #: measured, or lines off)
    identifiers: float | None = None
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
    def low_reach(self) -> bool:
        """Whether the Scope's measured reach is below `LOW_REACH` and its passages are
        technical text (`IDENTIFIER_SHARE`)."""
        return (
            self.reach is not None
            and self.reach < LOW_REACH
            and self.identifiers is not None
            and self.identifiers >= IDENTIFIER_SHARE
        )

    @property
    def dense_floor(self) -> float:
        """What each dense passage must reach to count."""
        return self.score_threshold.value if self.dense_cut is None else self.dense_cut
