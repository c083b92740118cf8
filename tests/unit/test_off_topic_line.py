"""The off-topic line's rule and its built-in probes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from gateway.retrieval.off_topic_line import (
    LINE_HIGHEST,
    LINE_LOWEST,
    TOPICS_ALLOWED_NEAR,
    Lines,
    Probe,
    fingerprint,
    line_from_best,
    lines_from_best,
    load_probes,
    probe_embeddings,
    scope_key,
)
from ingest.embedder.embedding import Embedding
from ingest.index import SparseVector
from ingest.payload import Scope


def test_the_line_is_the_sixth_highest_topics_best_probe() -> None:
    """Each topic counts by its best probe; the five topics nearest the KB are passed over."""
    best = [(f"t{n}", 0.30 + n / 100) for n in range(10)]  # t9 0.39 ... t0 0.30
    best += [("t9", 0.59), ("t8", 0.58), ("t7", 0.57), ("t6", 0.56), ("t5", 0.55), ("t4", 0.54)]
    assert line_from_best(best) == pytest.approx(0.54)


def test_the_line_stays_within_its_bounds() -> None:
    """A KB far from every probe gets the lowest line, one close to them all the highest."""
    assert line_from_best((f"t{n}", 0.1) for n in range(30)) == LINE_LOWEST
    assert line_from_best((f"t{n}", 0.9) for n in range(30)) == LINE_HIGHEST
    assert line_from_best([]) == LINE_LOWEST


def test_the_joint_line_is_the_sixth_highest_topics_joint_score() -> None:
    """The joint line counts each probe's cosine plus 0.2 x its keyword share, by topic as
    the dense line does; it is never below the dense line."""
    best = [(f"t{n}", 0.45, 0.0) for n in range(10)]
    best += [(f"t{n}", 0.40, 0.5 + n / 100) for n in range(7)]  # t6 0.512 ... t0 0.500
    lines = lines_from_best(best)
    assert lines.dense == pytest.approx(0.45)
    assert lines.joint == pytest.approx(0.40 + 0.2 * 0.51)  # t1's, the sixth highest
    assert lines_from_best((f"t{n}", 0.1, 0.0) for n in range(30)) == Lines(
        LINE_LOWEST, LINE_LOWEST, reach=0.1
    )


def test_the_probes_are_thirty_topics_of_six_distinct_questions() -> None:
    """The built-in probes: every topic equally weighted, no question twice."""
    probes = load_probes()
    per_topic = Counter(probe.topic for probe in probes)
    assert len(per_topic) == 30
    assert set(per_topic.values()) == {6}
    assert len({probe.text.casefold() for probe in probes}) == len(probes)
    assert len(per_topic) > TOPICS_ALLOWED_NEAR


class _CountingModel:
    """A stand-in question model: a fixed vector per text, and the texts it was asked."""

    def __init__(self, shift: float = 0.0) -> None:
        self.asked: list[str] = []
        self.shift = shift

    def __call__(self, texts: Sequence[str]) -> list[Embedding]:
        self.asked.extend(texts)
        return [
            Embedding((len(text) / 100 + self.shift, 0.5), SparseVector((), ())) for text in texts
        ]


def test_probe_vectors_are_kept_beside_the_models(tmp_path: Path) -> None:
    """Computed once and kept; a later process re-embeds only the first probe to check the
    model; another model, or other probes, computes them again."""
    probes = load_probes()[:4]
    path = tmp_path / "models" / "probes.json"
    first = _CountingModel()
    vectors = probe_embeddings(path, probes, first)
    assert len(first.asked) == 4
    assert path.exists()
    again = _CountingModel()
    assert probe_embeddings(path, probes, again) == vectors
    assert again.asked == [probes[0].text]
    other_model = _CountingModel(shift=0.01)
    assert probe_embeddings(path, probes, other_model) != vectors
    assert len(other_model.asked) == 5
    other_probes = _CountingModel(shift=0.01)
    probe_embeddings(path, probes[:3], other_probes)
    assert len(other_probes.asked) == 3


def test_probe_vectors_are_computed_when_they_cannot_be_kept(tmp_path: Path) -> None:
    """A model dir that cannot be written to costs the computation, never the answer."""
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    model = _CountingModel()
    vectors = probe_embeddings(blocked / "probes.json", load_probes()[:2], model)
    assert len(vectors) == 2
    assert len(model.asked) == 2


def test_the_probes_are_not_the_evaluations_off_topic_questions() -> None:
    """The line is measured on its own questions, so the off-topic abstention the
    evaluations report is measured on questions it never saw."""
    probes = {probe.text.casefold() for probe in load_probes()}
    root = Path(__file__).resolve().parents[2]
    for path in (
        root / "bench" / "data" / "offtopic_questions.jsonl",
        root / "gateway" / "calibration" / "data" / "offtopic_questions.jsonl",
    ):
        asked = {json.loads(line)["text"].casefold() for line in path.read_text().splitlines()}
        assert probes.isdisjoint(asked), path


def test_kept_lines_are_keyed_by_what_measured_them() -> None:
    """Another model or another probe set gives another fingerprint; another clearance,
    org, KB or collection another key: kept lines serve only the Scope they were measured
    for, with the same model and probes."""
    probes = [Probe("cooking", "How long do I boil an egg?")]
    mark = fingerprint(None, probes)
    assert mark == fingerprint(None, list(probes))
    assert fingerprint("BAAI/bge-small-en-v1.5", probes) != mark
    assert fingerprint(None, [Probe("cooking", "How long do I bake bread?")]) != mark
    scope = Scope.of(org_id="acme", tenant_id="t1", kb_ids=["kb"], clearance="internal")
    others = [
        Scope.of(org_id="acme", tenant_id="t1", kb_ids=["kb"], clearance="restricted"),
        Scope.of(org_id="acme", tenant_id="t1", kb_ids=["kb", "kb2"], clearance="internal"),
        Scope.of(org_id="other", tenant_id="t1", kb_ids=["kb"], clearance="internal"),
    ]
    keys = {scope_key(mark, "kbgate_shared", each) for each in [scope, *others]}
    keys.add(scope_key(mark, "kbgate_org_acme", scope))
    keys.add(scope_key(fingerprint("m", probes), "kbgate_shared", scope))
    assert len(keys) == 6
    assert scope_key(mark, "kbgate_shared", scope) == scope_key(mark, "kbgate_shared", scope)
