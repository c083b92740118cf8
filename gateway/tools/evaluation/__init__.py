"""`kbgate eval`: score retrieval on a BEIR golden set, per channel, and gate releases on it.

Nothing here calls a language model: documents go
through the real ingest path (`gateway.admin.knowledge.put_document` on an embedded Qdrant
Edge store), every question through the real turn (`gateway.retrieval.turn.retrieve` with a
Principal), and the ranked documents are scored with ir-measures against the graded
judgments (nDCG@10, R@10, R@100, RR@10).

Channels are per-KB fusion weights: dense-only `{dense: 1, keyword: 0}`, keyword-only
`{dense: 0, keyword: 1}`, hybrid (the platform default, or `--kb-settings`) and the
reference `rrf` (both channels at weight 1, fused by plain RRF, k = 60). The
ranking runs ask for 100 documents (the eval's config raises the `top_k` bound and the
leg depth) with both floors at 0, so the floors do not cut the ranking; abstention is
measured apart, with the floors in force (platform defaults unless `--kb-settings` sets
them): the share of answerable questions that abstain, and of off-topic ones
(`--offtopic FILE`) that do.

Subsets: `--queries-subset tune|heldout` is a fixed half of the judged questions (split by
a seeded shuffle that never changes, so tuning never sees the held-out half);
`--limit N --seed S` then keeps N of them and a corpus of every document judged for them
plus a seeded sample of the others (about 4 x N documents in all): deterministic, small
enough for CI.

The gate: a baseline file holds, per subset key, the figures of a release and a tolerance.
`--baseline FILE` exits 1 when a gated figure (hybrid nDCG@10, hybrid R@100) drops by
more than the tolerance, or when hybrid nDCG@10 falls below a single channel or `rrf` by
more than the tolerance. `--write-baseline FILE` records the run under its key.

`--dataset` repeated evaluates several golden sets in one run (one embedder, each set in
its own store) and reports them in one table; each is gated on its own baseline
(`gateway.tools.evaluation.sets`).
"""
